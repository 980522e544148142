"""Fit the speed rulebook (rules/speed.toml) to public llama.cpp measurements.

    python bench/calibrate.py            # print the fitted tables as TOML
    python bench/calibrate.py --write    # and write them into rules/speed.toml

The placement of each measured run is fixed (llama-bench offloads everything); the script then
runs the engine's own decode and prefill functions under trial values of the speed tables and
fits them by coordinate descent on the mean absolute log error (robust to the few odd rows the
sources contain). An architecture or kernel with fewer than `MIN_ROWS` measurements gets the
median of the fitted ones as its `default`.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measurements import ROOT, SPEED_DATASETS, load_cases, placer_for  # noqa: E402

from advisor.catalog.rulebook import build_rulebook, rulebook_to_dict  # noqa: E402
from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.engine import speed as spd  # noqa: E402
from advisor.engine.check import decode_seconds, prefill_seconds  # noqa: E402

MIN_ROWS = 4


@dataclass
class Row:
    test: str
    arch: str
    kernel: str
    backend: str
    measured_s: float
    dataset: str
    run: object
    """Seconds for this row under a rules dict: a closure over the fixed placement."""
    runtime: str = "llama.cpp"


def build_rows() -> list[Row]:
    catalog = load_catalog(user=False)
    rows = []
    for c in load_cases(catalog):
        if c.measured is None or (c.dataset not in SPEED_DATASETS and c.runtime == "llama.cpp"):
            continue
        placer = placer_for(catalog, c)
        p = placer.at(c.ctx)
        if not p.fits:
            continue
        g = placer.rig.gpus[0].spec
        args = (p, placer.rig, placer.model, placer.quant, placer.runtime)
        if c.test == "tg":
            run = (lambda a, o, ctx, depth: lambda rules: decode_seconds(*a, rules, o, ctx, depth=depth))(
                args, placer.options, c.ctx, c.n_gen // 2)
            measured = 1 / c.measured
        else:
            run = (lambda a, n: lambda rules: prefill_seconds(*a, rules, n))(args, c.n_prompt)
            measured = c.n_prompt / c.measured
        rows.append(Row(c.test, g.arch, placer.quant.kernel, spd.backend_of(g, placer.runtime), measured,
                        c.dataset, run, c.runtime))
    return rows


def loss(rows: list[Row], rules: dict) -> float:
    """Mean |log error| under a rulebook given as the plain dict its TOML parses to."""
    book = build_rulebook(rules)
    return sum(abs(math.log(r.run(book) / r.measured_s)) for r in rows) / max(len(rows), 1)


def fit(rows: list[Row], test: str, rules: dict) -> dict:
    """Coordinate descent over the section's tables; returns the fitted section."""
    part = "decode" if test == "tg" else "prefill"
    rows = [r for r in rows if r.test == test and r.runtime == "llama.cpp"]
    rules = copy.deepcopy(rules)
    sec = rules["speed"][part]
    start_eff = 0.8 if test == "tg" else 0.5
    sec["arch_efficiency"] = {"default": start_eff, **{a: start_eff for a, n in Counter(r.arch for r in rows).items()
                                                      if n >= MIN_ROWS}}
    sec["kernel_factor"] = {"default": 1.0, "f16": 1.0, "f32": 1.0,
                            **{k: 1.0 for k, n in Counter(r.kernel for r in rows).items()
                               if n >= MIN_ROWS and k not in ("f16", "f32")}}
    sec["per_layer_us"] = {"default": 20.0, **{b: 20.0 for b, n in Counter(r.backend for r in rows).items()
                                               if n >= MIN_ROWS}}
    keys = [("arch_efficiency", k) for k in sec["arch_efficiency"] if k != "default"]
    keys += [("kernel_factor", k) for k in sec["kernel_factor"] if k not in ("default", "f16", "f32")]
    keys += [("per_layer_us", k) for k in sec["per_layer_us"] if k != "default"]
    keys += [("per_token_us", None)] if test == "tg" else [("attention_efficiency", None)]
    best = loss(rows, rules)
    step = 0.4
    while step > 0.004:
        improved = False
        for table, key in keys:
            for factor in (1 + step, 1 / (1 + step)):
                old = sec[table] if key is None else sec[table][key]
                new = old * factor
                if table == "arch_efficiency" and new > 1.0:
                    continue
                if part == "decode" and table == "kernel_factor" and new > 1.0:
                    continue  # decode cannot stream weights faster than the memory's peak
                if key is None:
                    sec[table] = new
                else:
                    sec[table][key] = new
                trial = loss(rows, rules)
                if trial < best - 1e-9:
                    best, improved = trial, True
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
    print(f"# {part}: mean |log error| {best:.3f} over {len(rows)} rows", file=sys.stderr)
    return sec


def fit_runtime(rows: list[Row], runtime: str, rules: dict) -> dict | None:
    """Another runtime's own fixed decode costs (per token, per layer), the fractions kept from llama.cpp."""
    rows = [r for r in rows if r.runtime == runtime and r.test == "tg"]
    if len(rows) < MIN_ROWS:
        return None
    rules = copy.deepcopy(rules)
    table = rules["speed"].setdefault("by_runtime", {})
    best, best_loss = None, float("inf")
    for token in range(0, 2001, 50):
        for layer in range(0, 121, 4):
            table[runtime] = {"per_token_us": float(token), "per_layer_us": float(layer)}
            trial = loss(rows, rules)
            if trial < best_loss:
                best, best_loss = dict(table[runtime]), trial
    print(f"# {runtime}: mean |log error| {best_loss:.3f} over {len(rows)} rows", file=sys.stderr)
    return best


def _inline(d: dict, digits: int) -> str:
    return "{ " + ", ".join(f'{k} = {round(v, digits)}' if re.match(r"^[a-z0-9_]+$", k) else f'"{k}" = {round(v, digits)}'
                            for k, v in d.items()) + " }"


def main() -> int:
    rules = rulebook_to_dict(load_catalog(user=False).rules)
    rows = build_rows()
    dec, pre = fit(rows, "tg", rules), fit(rows, "pp", rules)
    fitted = copy.deepcopy(rules)
    fitted["speed"]["decode"].update(dec)
    own = {rt: fit_runtime(rows, rt, fitted) for rt in sorted({r.runtime for r in rows} - {"llama.cpp"})}
    print(f"# rows used: {dict(Counter((r.test, r.dataset) for r in rows))}")
    text = {
        ("decode", "arch_efficiency"): _inline(dec["arch_efficiency"], 3),
        ("decode", "kernel_factor"): _inline(dec["kernel_factor"], 3),
        ("decode", "per_layer_us"): _inline(dec["per_layer_us"], 1),
        ("decode", "per_token_us"): f"{round(dec['per_token_us'], 1)}",
        ("prefill", "arch_efficiency"): _inline(pre["arch_efficiency"], 3),
        ("prefill", "kernel_factor"): _inline(pre["kernel_factor"], 3),
        ("prefill", "per_layer_us"): _inline(pre["per_layer_us"], 1),
        ("prefill", "attention_efficiency"): f"{round(pre['attention_efficiency'], 4)}",
        **{("by_runtime", rt): _inline(v, 1) for rt, v in own.items() if v},
    }
    for (sec, key), val in text.items():
        print(f"[{sec}] {key} = {val}")
    if "--write" in sys.argv:
        path = ROOT / "rules" / "speed.toml"
        src = path.read_text()
        for (sec, key), val in text.items():
            if sec == "by_runtime":
                key = f'"{key}"'
            block_start = src.index(f"[{sec}]")
            block_end = src.find("\n[", block_start + 1)
            block_end = len(src) if block_end < 0 else block_end
            block = re.sub(rf"(?m)^{key} = .*$", f"{key} = {val}", src[block_start:block_end])
            src = src[:block_start] + block + src[block_end:]
        path.write_text(src)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
