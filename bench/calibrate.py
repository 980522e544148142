"""Fit the speed rulebook (rules/speed.toml) to public measurements.

    python bench/calibrate.py            # print the fitted tables as TOML
    python bench/calibrate.py --write    # and write them into rules/speed.toml
    python bench/calibrate.py --check    # exit 1 unless rules/speed.toml is what the data gives

The placement of each measured run is fixed (llama-bench offloads everything); the script then
runs the engine's own decode and prefill functions under trial values of the speed tables and
fits them by coordinate descent on the mean absolute log error (robust to the few odd rows the
sources contain). The start is fixed and nothing is random, so the same data always gives the same
tables (tests/test_accuracy.py checks that rules/speed.toml is exactly that). A table entry (an
architecture, a quant kernel, a backend) is fitted only where at least `MIN_ROWS` rows measure it;
the rest share the `default`, the median of the fitted entries.

bench/accuracy.py refits with whole groups of rows held out (`fit_rules` on a subset) to measure
the error out of sample.
"""

from __future__ import annotations

import copy
import math
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measurements import ROOT, SPEED_DATASETS, Case, is_heldout, load_cases, placer_for  # noqa: E402

from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.catalog.rulebook import build_rulebook, rulebook_to_dict, with_speed  # noqa: E402
from advisor.engine import estimate  # noqa: E402
from advisor.engine import memory as mem  # noqa: E402
from advisor.engine import speed as spd  # noqa: E402
from advisor.engine.estimate import decode_seconds, prefill_seconds  # noqa: E402
from advisor.engine.placement.capacity import flash_attention_on  # noqa: E402
from advisor.engine.rig import gpu_backend  # noqa: E402

MIN_ROWS = 8
"""Rows an entry of a table needs before it gets its own fitted value (fewer: the default)."""
SPEED_TOML = ROOT / "rules" / "speed.toml"


@dataclass
class Row:
    case: Case
    test: str
    arch: str
    kernel: str
    backend: str
    measured_s: float
    run: Callable[[object], float]
    """Seconds for this row under a Rulebook: a closure over the fixed placement."""
    kind: str
    """The kind of answer (advisor.engine.speed.answer_kind): what its error band is for."""
    naive: float
    """tokens/s of the naive baseline before its one global fraction: peak bandwidth over the model
    file (decode), dense FP16 throughput over 2 x active parameters (prefill); GPUs add up only
    in tensor parallel."""
    native: bool = True
    """The GPU ran its vendor's own backend (CUDA, ROCm, Metal), so its architecture's entry applies."""
    flash: bool = False
    """Flash attention was on."""
    moe: bool = False
    """The model routes experts."""
    family: str = ""
    """The backend family entry the row would read (advisor.engine.speed.family_key: `vulkan-amd` for an AMD GPU
    on Vulkan)."""

    @property
    def dataset(self) -> str:
        return self.case.dataset

    @property
    def runtime(self) -> str:
        return self.case.runtime

    def predicted_tokens_per_s(self, book) -> float:
        n = self.case.n_prompt if self.test == "pp" else 1
        return n / self.run(book)


def in_fit(case: Case) -> bool:
    """Rows the fit may use: the llama-bench tables, and other runtimes' own results; never the 2025-26
    held-out rows (measurements.HELDOUT_DATASETS), which only score the fitted tables."""
    return not is_heldout(case.dataset) and (case.dataset in SPEED_DATASETS or case.runtime != "llama.cpp")


class _LinkTimes:
    """`link_times` once per (placement, prompt, streams) while fitting: it reads only
    rules["interconnect"], which the fit never changes, and it is half the cost of a prediction.
    Outside `with LINKS:` (and for any other call) it is the engine's own function."""

    def __init__(self, inner: Callable) -> None:
        self.inner, self.memo, self.keep, self.active = inner, {}, [], 0

    def __enter__(self) -> None:
        self.active += 1

    def __exit__(self, *exc) -> None:
        self.active -= 1
        if not self.active:
            self.memo.clear()
            self.keep.clear()

    def __call__(self, sc, placement, prompt_tokens, streams, *more, **kw):
        if not self.active or more or kw:
            return self.inner(sc, placement, prompt_tokens, streams, *more, **kw)
        key = (id(placement), id(sc.rig), sc.runtime.id, prompt_tokens, streams)
        if key not in self.memo:
            self.keep.append((placement, sc.rig))  # their ids stay theirs while the memo lives
            self.memo[key] = self.inner(sc, placement, prompt_tokens, streams)
        return self.memo[key]


if not isinstance(estimate.link_times, _LinkTimes):
    estimate.link_times = _LinkTimes(estimate.link_times)
LINKS: _LinkTimes = estimate.link_times


def build_rows(cases: list[Case] | None = None, offload: bool = False) -> list[Row]:
    """Every measured speed whose run fits its rig (with `offload`: also runs that the advisor places
    partly in system RAM, as a user would be answered), with its placement fixed."""
    catalog = load_catalog(user=False)
    rows = []
    for c in cases if cases is not None else load_cases(catalog):
        if c.measured is None:
            continue
        placer = placer_for(catalog, c)
        p = placer.at(c.ctx)
        if not (p.fits or (offload and p.runs)):
            continue
        g = placer.rig.gpus[0].spec if placer.rig.gpus else None
        sc = placer.scenario
        parallel = len(placer.rig.gpus) if p.strategy == "tensor_parallel" else 1
        # a CPU-only row's naive baseline: the RAM's peak bandwidth, the rulebook's CPU prefill throughput
        bandwidth = g.memory_bandwidth_gb_s if g else placer.rig.ram_bandwidth_gb_s
        flops = g.fp16_tflops * 1e12 if g else float(sc.rules.speed.prefill.cpu_gflops) * 1e9
        if c.test == "tg":
            naive = bandwidth * 1e9 * parallel / mem.weights_layout(placer.model, placer.quant).total_bytes
        else:
            naive = flops * parallel / (2 * placer.model.params_active)
        if c.test == "tg":
            # llama-bench tg N generates N tokens from an empty cache (a held-out row may start at `depth`):
            # on average half-way deep.
            run = (lambda s, pl, depth: lambda rules: decode_seconds(s.with_rules(rules), pl, depth=depth))(
                sc, p, c.depth + c.n_gen // 2)
            measured = 1 / c.measured
        else:
            run = (lambda s, pl, n, d: lambda rules: prefill_seconds(s.with_rules(rules), pl, n, d))(
                sc, p, c.n_prompt, c.depth)
            measured = c.n_prompt / c.measured
        backend = spd.backend_of(g, placer.runtime) if g else "cpu"
        rows.append(Row(c, c.test, g.arch if g else "cpu", placer.quant.kernel, backend, measured, run,
                        spd.answer_kind(p, placer.rig, placer.model, placer.runtime), naive,
                        g is not None and backend == gpu_backend(g),
                        flash_attention_on(placer.runtime, placer.rig, sc.options), placer.model.is_moe,
                        spd.family_key(backend, g.vendor if g else "cpu", g is None or backend == gpu_backend(g))))
    return rows


def _err(row: Row, book) -> float:
    return abs(math.log(row.run(book) / row.measured_s))


def loss(rows: list[Row], rules: dict, base=None) -> float:
    """Mean |log error| under a rulebook given as the plain dict its TOML parses to (`base`: that rulebook built
    once, of which only the speed tables change)."""
    book = with_speed(base, rules["speed"]) if base is not None else build_rulebook(rules)
    return sum(_err(r, book) for r in rows) / max(len(rows), 1)


def _depends(row: Row, table: str, key: str | None, families: dict[int, str] | None = None) -> bool:
    """Whether a row's prediction reads this entry while the section is fitted (defaults stay fixed);
    `families`: the backend family entry each row reads (`_family_keys`)."""
    if key is None:
        return True
    if table == "flash_attention_efficiency":
        return row.flash and row.backend == key
    if table == "moe_efficiency":
        return row.moe and row.backend == key
    if table == "backend_efficiency":
        return (families or {}).get(id(row), row.backend) == key
    return {"arch_efficiency": row.arch, "kernel_factor": row.kernel, "per_layer_us": row.backend}[table] == key


def _family_keys(rows: list[Row], archs: list[str]) -> dict[int, str]:
    """The backend family entry each row reads, for the rows that read one (another backend than the vendor's, such
    as Vulkan, or an architecture without its own entry): the backend and vendor (`vulkan-amd`,
    advisor.engine.speed.family_key) where that has MIN_ROWS rows, else the backend."""
    reading = [r for r in rows if not r.native or r.arch not in archs]
    own = Counter(r.family for r in reading)
    return {id(r): r.family if own[r.family] >= MIN_ROWS else r.backend for r in reading}


START = {"decode": {"arch_efficiency": 0.8, "per_token_us": 1000.0},
         "prefill": {"arch_efficiency": 0.5, "attention_efficiency": 0.1}}
"""The fixed start of the descent (whatever rules/speed.toml holds, the fit starts here)."""


def _start(part: str, entries: dict[str, list[str]] | None = None) -> dict:
    """The fixed start of a section, with an entry for each key `entries` lists per table (archs, kernels,
    backends, families, flash, moe)."""
    e = entries or {}
    eff = START[part]["arch_efficiency"]
    glob = "per_token_us" if part == "decode" else "attention_efficiency"
    out = {"arch_efficiency": {"default": eff, **{a: eff for a in e.get("archs", ())}},
           "kernel_factor": {"default": 1.0, "f16": 1.0, "f32": 1.0, **{k: 1.0 for k in e.get("kernels", ())}},
           "per_layer_us": {"default": 20.0, **{b: 20.0 for b in e.get("backends", ())}},
           "backend_efficiency": {b: eff for b in e.get("families", ())},
           glob: START[part][glob]}
    if part == "prefill":
        out["flash_attention_efficiency"] = {b: START[part]["attention_efficiency"] for b in e.get("flash", ())}
        out["moe_efficiency"] = {b: 1.0 for b in e.get("moe", ())}
    return out


def fit(rows: list[Row], test: str, rules: dict, quiet: bool = False) -> dict:
    """Coordinate descent over the section's tables from a fixed start; returns the fitted section."""
    part = "decode" if test == "tg" else "prefill"
    rows = [r for r in rows if r.test == test and r.runtime == "llama.cpp"]
    rules = copy.deepcopy(rules)
    sec = rules["speed"][part]
    archs = sorted(a for a, n in Counter(r.arch for r in rows if r.native).items() if n >= MIN_ROWS)
    # a quant kernel's factor is measured where the matrix products dominate: rows from an empty cache (after a
    # deep one the attention term dominates a prompt, and a kernel seen only there would absorb its misfit)
    kernels = sorted(k for k, n in Counter(r.kernel for r in rows if not r.case.depth).items()
                     if n >= MIN_ROWS and k not in ("f16", "f32"))
    backends = sorted(b for b, n in Counter(r.backend for r in rows).items() if n >= MIN_ROWS)
    fam_of = _family_keys(rows, archs)
    families = sorted(b for b, n in Counter(fam_of.values()).items() if n >= MIN_ROWS)
    flash = sorted(b for b, n in Counter(r.backend for r in rows if r.flash).items() if n >= MIN_ROWS)
    moe = sorted(b for b, n in Counter(r.backend for r in rows if r.moe).items() if n >= MIN_ROWS)
    sec.update(_start(part, {"archs": archs, "kernels": kernels, "backends": backends, "families": families,
                             "flash": flash, "moe": moe}))
    keys = [("arch_efficiency", k) for k in archs] + [("kernel_factor", k) for k in kernels]
    keys += [("per_layer_us", k) for k in backends] + [("backend_efficiency", k) for k in families]
    keys += [("per_token_us", None)] if test == "tg" else [("attention_efficiency", None)]
    if test == "pp":
        keys += [("flash_attention_efficiency", k) for k in flash] + [("moe_efficiency", k) for k in moe]
    base = book = build_rulebook(rules)  # the fit changes the speed tables only: the rest is built once
    errs = [_err(r, book) for r in rows]
    best = sum(errs)
    step = 0.4
    while step > 0.004:
        improved = False
        for table, key in keys:
            touched = [i for i, r in enumerate(rows) if _depends(r, table, key, fam_of)]
            for factor in (1 + step, 1 / (1 + step)):
                old = sec[table] if key is None else sec[table][key]
                new = old * factor
                if table in ("arch_efficiency", "backend_efficiency", "flash_attention_efficiency") and new > 1.0:
                    continue
                if part == "decode" and table == "kernel_factor" and new > 1.0:
                    continue  # decode cannot stream weights faster than the memory's peak
                if key is None:
                    sec[table] = new
                else:
                    sec[table][key] = new
                trial_errs, book = list(errs), with_speed(base, rules["speed"])
                for i in touched:
                    trial_errs[i] = _err(rows[i], book)
                trial = sum(trial_errs)
                if trial < best - 1e-9:
                    best, errs, improved = trial, trial_errs, True
                    break
                if key is None:
                    sec[table] = old
                else:
                    sec[table][key] = old
        if not improved:
            step /= 2
    # Defaults for what the data does not cover: the median of the fitted values.
    for table, skip in (("arch_efficiency", ("default",)), ("kernel_factor", ("default", "f16", "f32"))):
        fitted = [v for k, v in sec[table].items() if k not in skip]
        if fitted:
            sec[table]["default"] = statistics.median(fitted)
    fitted = [v for k, v in sec["per_layer_us"].items() if k != "default"]
    if fitted:
        sec["per_layer_us"]["default"] = max(fitted)
    _family_defaults(sec, rows, archs)
    if not quiet:
        print(f"# {part}: mean |log error| {best / max(len(rows), 1):.3f} over {len(rows)} rows", file=sys.stderr)
    return sec


def _family_defaults(sec: dict, rows: list[Row], archs: list[str]) -> None:
    """A backend family without rows of its own takes the median of its measured architectures (an Apple GPU
    newer than the rows: the median of the Apple ones); the MoE factor of a backend without rows takes the median of
    the fitted backends (none fitted: 1), its fused (flash) attention the plain attention fraction: each backend has
    its own kernel (CUDA's reaches 0.6 of FP16 peak, ROCm's and Vulkan's on AMD under 0.1), so another backend's
    says nothing of it."""
    native = {r.arch: r.backend for r in rows if r.native}
    fam = sec["backend_efficiency"]
    for backend in sorted(set(native.values()) - set(fam)):
        own = [sec["arch_efficiency"][a] for a in archs if native.get(a) == backend]
        if own:
            fam[backend] = statistics.median(own)
    if "flash_attention_efficiency" in sec:  # a backend's fused attention kernel is its own: unmeasured, no gain
        sec["flash_attention_efficiency"]["default"] = sec.get("attention_efficiency")
    if "moe_efficiency" in sec:
        fitted = list(sec["moe_efficiency"].values())
        sec["moe_efficiency"]["default"] = statistics.median(fitted) if fitted else 1.0


def fit_runtime(rows: list[Row], runtime: str, rules: dict, quiet: bool = False) -> dict | None:
    """Another runtime's own fixed decode costs (per token, per layer), the fractions kept from llama.cpp."""
    rows = [r for r in rows if r.runtime == runtime and r.test == "tg"]
    if len(rows) < MIN_ROWS:
        return None
    rules = copy.deepcopy(rules)
    table = rules["speed"].setdefault("by_runtime", {})
    best, best_loss, base = None, float("inf"), build_rulebook(rules)
    for token in range(0, 2001, 50):
        for layer in range(0, 121, 4):
            table[runtime] = {"per_token_us": float(token), "per_layer_us": float(layer)}
            trial = loss(rows, rules, base)
            if trial < best_loss:
                best, best_loss = dict(table[runtime]), trial
    if not quiet:
        print(f"# {runtime}: mean |log error| {best_loss:.3f} over {len(rows)} rows", file=sys.stderr)
    return best


def fit_rules(rows: list[Row], rules: dict, quiet: bool = False) -> dict:
    """The rulebook (as a plain dict) with its speed tables fitted on `rows` (those `in_fit`)."""
    with LINKS:
        return _fit_rules([r for r in rows if in_fit(r.case)], rules, quiet)


def _fit_rules(rows: list[Row], rules: dict, quiet: bool) -> dict:
    fitted = copy.deepcopy(rules)
    for part in ("decode", "prefill"):  # nothing of the stored tables enters the fit
        fitted["speed"][part].update(_start(part))
    fitted["speed"].pop("by_runtime", None)
    fitted["speed"]["decode"].update(fit(rows, "tg", fitted, quiet))
    fitted["speed"]["prefill"].update(fit(rows, "pp", fitted, quiet))  # its stream floor reads decode's
    own = {rt: fit_runtime(rows, rt, fitted, quiet) for rt in sorted({r.runtime for r in rows} - {"llama.cpp"})}
    fitted["speed"]["by_runtime"] = {rt: v for rt, v in own.items() if v}
    return fitted


def _inline(d: dict, digits: int) -> str:
    return "{ " + ", ".join(f'{k} = {round(v, digits)}' if re.match(r"^[a-z0-9_]+$", k) else f'"{k}" = {round(v, digits)}'
                            for k, v in d.items()) + " }"


def toml_values(fitted: dict) -> dict[tuple[str, str], str]:
    """(section, key) -> the TOML value text, rounded as rules/speed.toml stores it."""
    dec, pre = fitted["speed"]["decode"], fitted["speed"]["prefill"]
    return {
        ("decode", "arch_efficiency"): _inline(dec["arch_efficiency"], 3),
        ("decode", "kernel_factor"): _inline(dec["kernel_factor"], 3),
        ("decode", "per_layer_us"): _inline(dec["per_layer_us"], 1),
        ("decode", "per_token_us"): f"{round(dec['per_token_us'], 1)}",
        ("prefill", "arch_efficiency"): _inline(pre["arch_efficiency"], 3),
        ("prefill", "kernel_factor"): _inline(pre["kernel_factor"], 3),
        ("prefill", "per_layer_us"): _inline(pre["per_layer_us"], 1),
        ("prefill", "attention_efficiency"): f"{round(pre['attention_efficiency'], 4)}",
        ("decode", "backend_efficiency"): _inline(dec["backend_efficiency"], 3),
        ("prefill", "backend_efficiency"): _inline(pre["backend_efficiency"], 3),
        ("prefill", "flash_attention_efficiency"): _inline(pre["flash_attention_efficiency"], 4),
        ("prefill", "moe_efficiency"): _inline(pre["moe_efficiency"], 3),
        **{("by_runtime", f'"{rt}"'): _inline(v, 1) for rt, v in fitted["speed"]["by_runtime"].items()},
    }


def _block(src: str, sec: str) -> tuple[int, int]:
    start = src.index(f"[{sec}]")
    end = src.find("\n[", start + 1)
    return start, len(src) if end < 0 else end


def stored_values(src: str, keys) -> dict[tuple[str, str], str | None]:
    """The same (section, key) values as rules/speed.toml's text has them."""
    out = {}
    for sec, key in keys:
        start, end = _block(src, sec)
        m = re.search(rf"(?m)^{re.escape(key)} = (.*)$", src[start:end])
        out[(sec, key)] = m.group(1).strip() if m else None
    return out


def with_values(src: str, text: dict[tuple[str, str], str]) -> str:
    for (sec, key), val in text.items():
        start, end = _block(src, sec)
        block, n = re.subn(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {val}", src[start:end])
        if not n:
            block = block.rstrip("\n") + f"\n{key} = {val}\n"
        src = src[:start] + block + src[end:]
    return src


def main() -> int:
    rules = rulebook_to_dict(load_catalog(user=False).rules)
    rows = build_rows()
    text = toml_values(fit_rules(rows, rules))
    print(f"# rows used: {dict(sorted(Counter((r.test, r.dataset) for r in rows if in_fit(r.case)).items()))}")
    for (sec, key), val in text.items():
        print(f"[{sec}] {key} = {val}")
    src = SPEED_TOML.read_text()
    if "--check" in sys.argv:
        stale = {k: v for k, v in stored_values(src, text).items() if v != text[k]}
        for (sec, key), val in stale.items():
            print(f"stale: [{sec}] {key} = {val}, the data gives {text[(sec, key)]}", file=sys.stderr)
        return 1 if stale else 0
    if "--write" in sys.argv:
        SPEED_TOML.write_text(with_values(src, text))
        print(f"wrote {SPEED_TOML}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
