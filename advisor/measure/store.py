"""The measurement store: every `advisor verify` comparison made on this machine, beside the user catalog.

One JSON file, `measurements.json`, in the folder `advisor catalog path` prints ($ADVISOR_CONFIG_DIR moves
it); not a `.toml`, so the catalog loader never reads it. Written whole through a temporary file and a
rename (advisor/files.py), bounded to the most recent `MAX_RUNS` runs. A run keeps the plain model's
prediction (never a calibrated one), so the calibration fitted from the store never feeds on itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor.errors import AdvisorError, one_line

STORE_NAME = "measurements.json"
FORMAT = "advisor measurements"
MAX_RUNS = 2000
"""Runs kept (the oldest go first): years of daily verifying, and a file of about a megabyte."""
MAX_BYTES = 8 * 2**20
"""A store larger than this was not written by the advisor."""
FIELDS: dict[str, type | tuple[type, ...]] = {
    "when": str, "advisor": str, "kind": str, "source": str, "model": str, "quant": str, "runtime": str,
    "device": str, "backend": str, "placement": str, "test": str, "n_prompt": int, "n_gen": int, "depth": int,
    "flash_attn": str, "predicted": (int, float), "measured": (int, float), "gpus": list, "gpu_count": int,
    "split": str, "cpu": str, "ram_gib": (int, float), "ram_bandwidth_gb_s": (int, float),
    "ram_bandwidth_basis": str, "build": str, "params_b": (int, float), "model_size_gib": (int, float),
}
"""Every key of a stored run and its JSON type (a run missing one, or with another type, is refused)."""


def store_path() -> Path:
    from advisor.catalog.load import user_dir

    return user_dir() / STORE_NAME


def _check_run(run: object, where: str, n: int) -> dict:
    if not isinstance(run, dict):
        raise AdvisorError(f"{where}: run {n} is not an object", "remove the file to start a new store")
    for key, kind in FIELDS.items():
        if not isinstance(run.get(key), kind) or isinstance(run.get(key), bool):
            raise AdvisorError(f"{where}: run {n}: {key} is missing or not a {getattr(kind, '__name__', 'number')}",
                               "the store is written by advisor verify; remove the file to start a new one")
    if not (run["predicted"] > 0 and run["measured"] > 0):
        raise AdvisorError(f"{where}: run {n}: predicted and measured must be above 0",
                           "remove the file to start a new store")
    return run


def load_runs(path: Path | None = None) -> list[dict]:
    """The stored runs, oldest first ([] when there is no store); AdvisorError for a file that is not one."""
    from advisor.files import read_limited

    path = path or store_path()
    if not path.exists():
        return []
    where = one_line(str(path), 300)
    raw = read_limited(path, MAX_BYTES, "a measurement store", "remove the file to start a new store")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise AdvisorError(f"{where}: not a measurement store (broken JSON)", "remove the file to start a new store") \
            from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("runs"), list):
        raise AdvisorError(f"{where}: not a measurement store written by advisor verify",
                           "remove or move the file; advisor verify writes a new one")
    return [_check_run(r, where, n) for n, r in enumerate(data["runs"][-MAX_RUNS:], 1)]


def append_runs(runs: list[dict], path: Path | None = None) -> tuple[Path, int]:
    """Add `runs` to the store (created with its folder when missing); the store's path and its run count."""
    from advisor.files import write_atomic

    path = path or store_path()
    kept = (load_runs(path) + [_check_run(r, "new run", n) for n, r in enumerate(runs, 1)])[-MAX_RUNS:]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisorError(f"{one_line(str(path.parent), 300)}: cannot create the folder ({exc.strerror or exc})",
                           "set $ADVISOR_CONFIG_DIR to a folder you can write") from None
    write_atomic(path, json.dumps({"format": FORMAT, "version": 1, "runs": kept}, indent=1, ensure_ascii=False) + "\n")
    return path, len(kept)


def calibration_from(runs: list[dict], source: str):
    """The engine's Calibration fitted on stored runs."""
    from advisor.engine.calibration import Run, fit

    return fit([Run(r["device"], r["backend"], r["placement"], r["test"], float(r["predicted"]), float(r["measured"]))
                for r in runs], source)


def load_calibration(warn=None):
    """This machine's Calibration, or None without a store. A broken store is an AdvisorError, unless `warn`
    is given: then it is passed the line to say and the plain model answers (an answer never fails for the
    store's sake)."""
    path = store_path()
    try:
        runs = load_runs(path)
    except AdvisorError as exc:
        if warn is None:
            raise
        warn(f"advisor: warning: {exc} (answering with the plain model)")
        return None
    return calibration_from(runs, str(path)) if runs else None


EXPORT_COLUMNS = ("dataset", "source_url", "runtime", "backend", "gpu", "gpu_count", "split", "model", "params_b",
                  "quant", "model_size_gib", "test", "n_prompt", "n_gen", "depth", "flash_attn", "tokens_per_s",
                  "notes")
"""tests/data/speed_measurements.csv's columns, in its order (tests/data/speed_measurements.md)."""


def export_rows(runs: list[dict]) -> str:
    """The runs as rows of the project's measurement format (tests/data/speed_measurements.csv): one per test,
    the rig described in `notes`, ready to paste into that file or to share."""
    import csv
    import io

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(EXPORT_COLUMNS)
    for r in runs:
        cpu_run = r["backend"].endswith("/cpu")
        rig = (f"rig: {r['gpu_count']} GPU(s) {', '.join(r['gpus']) or '(names not read)'}; " if not cpu_run else "rig: ") + \
            (f"CPU {r['cpu'] or 'not read'}; RAM {r['ram_gib']:g} GiB at {r['ram_bandwidth_gb_s']:g} GB/s "
             f"({r['ram_bandwidth_basis'] or 'basis not stated'})")
        notes = (f"advisor verify {r['when']} ({r['kind']}: {r['source']}); {rig}; placement {r['placement']}; "
                 f"build {r['build'] or 'not stated'}; advisor {r['advisor']} predicted {r['predicted']:g} tok/s "
                 f"(plain model)")
        w.writerow(("advisor_verify", f"local: advisor verify on this rig, {r['when']}", r["runtime"],
                    "CPU" if cpu_run else r["backend"].split("/")[-1].upper(),
                    r["cpu"] if cpu_run else (r["gpus"][0] if r["gpus"] else r["device"]),
                    0 if cpu_run else r["gpu_count"], r["split"], r["model"], f"{r['params_b']:g}", r["quant"],
                    f"{r['model_size_gib']:.2f}", r["test"], r["n_prompt"], r["n_gen"], r["depth"],
                    {"on": "1", "off": "0"}.get(r["flash_attn"], ""), f"{r['measured']:.10g}", notes))
    return out.getvalue()
