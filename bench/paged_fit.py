"""The paged servers' (vLLM, SGLang) factors on a GPU's matrix-product fraction, fitted on cited vLLM runs.

llama.cpp's prefill fractions (rules/speed.toml [prefill], bench/calibrate.py) are its MMQ kernels' once the
weights each tile re-reads are counted apart; a paged server's products run in cuBLAS/CUTLASS/Marlin/Triton kernels
under a scheduler's step. Three factors are fitted here, each the grid value least off:

- `[prefill] family_efficiency.paged` (advisor.engine.speed.matmul_efficiency), on the dense concurrency sweeps
  (tests/data/vllm_concurrency_sweeps.csv: median TPOT and TTFT, each measure's median |log error| one vote);
- `[prefill] family_moe_efficiency.paged`, a mixture-of-experts model's products against that (vLLM's fused-MoE
  kernels), on the prompt-heavy runs of MoE models (tests/data/vllm_prompt_heavy.csv, the random 2,000- and
  4,000-token prompts: prompt tokens sent over the run's duration against the advisor's prefill rate);
- `[decode] family_moe_compute`, on a MoE decode step's products, on the MoE decode runs (vllm_moe_*.csv,
  vllm_a100_context.csv), each page one vote: one factor per key, the family's (`paged`) and each MoE kernel of
  its own that runs hold (`paged:mxfp4-marlin`: rules/speed.toml [decode] moe_kernels), each on its own runs.

tests/test_vllm_concurrency.py scores every row with the factors fitted without the row's source
(`held_out_catalog`), so every figure it prints is out of sample.

    python bench/paged_fit.py           # the fits, and each source's rows held out
    python bench/paged_fit.py --check   # exit 1 unless rules/speed.toml holds the fitted values
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from advisor.catalog.load import load_catalog
from advisor.catalog.types import Catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.speed import moe_kernel
from advisor.probe.flags import rig_from_flags

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
FAMILY = "paged"
GRID = tuple(round(0.20 + 0.05 * i, 2) for i in range(17))  # 0.20 .. 1.00


@dataclasses.dataclass(frozen=True)
class Obs:
    """One measured figure of one row: `read` takes it from the advisor's serving answer (a prompt-heavy run has
    none: `prompt_log_error` reads the prefill rate)."""

    source: str
    label: str
    measured: float
    gpu: str
    tp: int
    model: str
    options: Options
    read: Callable | None = None
    measure: str = ""
    key: str = FAMILY
    """The rules/speed.toml [decode] MoE key its answer takes (a MoE decode run's: speed.moe_kernel)."""


def _source(r: dict) -> str:
    return r["source"].split(" (")[0]


def _tpot(s) -> float:
    return 1000 / s.per_stream_decode_tokens_per_s


def _ttft(s) -> float:
    return 1000 * s.ttft_p50_s


def _sweep(r: dict) -> list[Obs]:
    tp, p, o = int(r["tensor_parallel"]), int(r["input_tokens"]), int(r["output_tokens"])
    opts = Options(runtime=r["runtime"], quant=r["quant"], ctx=p + o, prompt_tokens=p, output_tokens=o,
                   concurrency=int(r["concurrency"]), tensor_parallel=tp if tp > 1 else None)
    label = f"{r['gpu']} tp{tp} c={r['concurrency']}"  # the concurrency sweeps are of dense models
    return [Obs(_source(r), f"{label} {name}", float(r[col]), r["gpu"], tp, r["model"], opts, read, name)
            for name, col, read in (("TPOT", "median_tpot_ms", _tpot), ("TTFT", "median_ttft_ms", _ttft))]


@functools.lru_cache(maxsize=None)
def _rows(name: str) -> tuple[dict, ...]:
    """A data file's rows, read once (the held-out fits ask for them per source)."""
    return tuple(csv.DictReader((DATA / name).open(encoding="utf-8")))


MEASURES = ("TPOT", "TTFT")


def observations() -> list[Obs]:
    """The figures the paged fraction is fitted on: the dense concurrency sweeps' TPOT and TTFT."""
    return [o for r in _rows("vllm_concurrency_sweeps.csv") for o in _sweep(r)]


PROMPT_INPUTS = (2000, 4000)
"""The prompt-heavy cases fitted on: at 32,000 tokens attention outweighs the products, and the 128-token case
(4 output tokens, 1,000 requests) is the scheduler's."""


def prompt_runs(catalog: Catalog, moe: bool = True, inputs: tuple[int, ...] = PROMPT_INPUTS) -> list[Obs]:
    """The catalog models' prompt-heavy runs (prompt tokens sent over each run's duration, the decode of its short
    outputs included) of `inputs` prompt tokens without expert parallel (the advisor does not place
    experts apart under TP): MoE models' (`moe`) or dense ones' (the check that the measure is the prefill rate)."""
    out, seen = [], set()
    for r in _rows("vllm_prompt_heavy.csv"):
        model, printed = catalog.models.get(r["model"]), (r["duration_s"], r["total_input_tokens"],
                                                          r["total_generated_tokens"])
        # a block printed on two pages (glm-4.5-air's H100 page repeats its A100 page's) counts once, where first
        copy = printed in seen
        seen.add(printed)
        if copy or model is None or model.is_moe != moe or int(r["input_tokens"]) not in inputs or \
                r["expert_parallel"] == "1":
            continue
        tp, p, o = int(r["tensor_parallel"]), int(r["input_tokens"]), int(r["output_tokens"])
        opts = Options(runtime=r["runtime"], quant=r["quant"] or None, ctx=p + o, prompt_tokens=p, output_tokens=o,
                       tensor_parallel=tp if tp > 1 else None)
        label = f"{r['model']} {r['quant'] or 'native'} {r['gpu']} tp{tp} {p // 1000}K {r['flags']}".strip()
        out.append(Obs(_source(r), label, int(r["total_input_tokens"]) / float(r["duration_s"]), r["gpu"], tp,
                       r["model"], opts))
    return out


def prompt_log_error(catalog: Catalog, run: Obs) -> float | None:
    """log(the advisor's prefill rate for one prompt / the run's); None where the answer has no rate (the run's
    prompt does not fit the rig as asked)."""
    rig = rig_from_flags(catalog, [f"{run.tp}x{run.gpu}" if run.tp > 1 else run.gpu])
    got = evaluate(catalog, rig, catalog.models[run.model], run.options).speed.prefill_tokens_per_s
    return math.log(got / run.measured) if got else None


def with_table(catalog: Catalog, table: dict[str, float], key: str, section: str) -> Catalog:
    """The catalog whose rules/speed.toml [`section`] `key` is `table`, whole."""
    sec = dataclasses.replace(getattr(catalog.rules.speed, section), **{key: dict(table)})
    rules = dataclasses.replace(catalog.rules, speed=dataclasses.replace(catalog.rules.speed, **{section: sec}))
    return dataclasses.replace(catalog, rules=rules)


def with_fraction(catalog: Catalog, value: float, key: str = "family_efficiency", section: str = "prefill") -> Catalog:
    """The catalog with the paged family's factor `key` of rules/speed.toml [`section`] set to `value`."""
    return with_table(catalog, {**getattr(getattr(catalog.rules.speed, section), key), FAMILY: value}, key, section)


def predict(catalog: Catalog, o: Obs):
    """The advisor's serving answer for an observation's row."""
    rig = rig_from_flags(catalog, [f"{o.tp}x{o.gpu}" if o.tp > 1 else o.gpu])
    return evaluate(catalog, rig, catalog.models[o.model], o.options).serving


def _log_error(catalog: Catalog, o: Obs) -> float | None:
    got = o.read(predict(catalog, o))
    return None if got is None else math.log(got / o.measured)


_GRIDS: dict[int, tuple[Catalog, dict]] = {}


def _grid_errors(catalog: Catalog) -> dict[float, tuple]:
    """log(predicted / measured) of every observation at every grid value, None where an observation does not
    apply (kept per catalog object)."""
    if id(catalog) not in _GRIDS:
        obs = observations()
        _GRIDS[id(catalog)] = (catalog, {v: tuple(_log_error(with_fraction(catalog, v), o) for o in obs) for v in GRID})
    return _GRIDS[id(catalog)][1]


def fit(catalog: Catalog, leave_out: str | None = None) -> float:
    """The grid value with the least mean over the two measures (TPOT, TTFT) of each one's median |log error| on
    the observations not from `leave_out` (the lower on a tie): each measure one vote, as each page is one in the
    MoE fits. (One median over both measures lands where their errors interleave: after the decode step stopped
    multiplying the input embedding it picked 0.5, where TPOT's median is the same at 0.5, 0.55 and 0.6 and TTFT's
    is least at 0.55; tests/data/vllm_moe_tp_sweeps.md.)"""
    obs, grid = observations(), _grid_errors(catalog)

    def off(v: float) -> float:
        return statistics.fmean(statistics.median(abs(e) for e, o in zip(grid[v], obs)
                                                  if o.source != leave_out and e is not None and o.measure == m)
                                for m in MEASURES)

    return min(GRID, key=lambda v: (off(v), v))


def fit_moe(catalog: Catalog, leave_out: str | None = None) -> float:
    """The MoE factor: the grid value with the least median over sources of each source's median |log error| on the
    MoE prompt-heavy runs not from `leave_out` (`by_source`), the paged fraction fitted without it too (the lower
    on a tie)."""
    book = with_fraction(catalog, fit(catalog, leave_out=leave_out))
    runs = prompt_runs(catalog)
    key = (id(catalog), book.rules.speed.prefill.family_efficiency[FAMILY])
    if key not in _MOE:
        _MOE[key] = (catalog, {v: [prompt_log_error(with_fraction(book, v, MOE_KEY), r) for r in runs] for v in GRID})
    return _least_off(runs, _MOE[key][1], leave_out)


MOE_KEY = "family_moe_efficiency"
_MOE: dict[tuple, tuple[Catalog, dict]] = {}


def _steady(s) -> bool:
    """The requests queue behind --max-num-seqs: a steady stream."""
    return s.running == s.max_num_seqs < s.requested


def _steady_tpot(s):
    """The median TPOT of a steady stream, else nothing."""
    return _tpot(s) if _steady(s) else None


def _burst_throughput(s):
    """What the clients received where the runtime holds the whole burst (its TPOT is no steady figure)."""
    return None if _steady(s) else s.output_tokens_per_s


MOE_DECODE_FILES = ("vllm_moe_tp_sweeps.csv", "vllm_moe_tp_more.csv", "vllm_a100_context.csv",
                    "vllm_moe_sharegpt_more.csv", "vllm_moe_more_sources.csv")


def _loop_throughput(s):
    """What a closed loop's clients received per second (a run that printed no TPOT)."""
    return s.output_tokens_per_s


def _moe_decode(r: dict) -> list[Obs]:
    """A MoE run's figures: the median TPOT of a closed loop (`max_concurrency`; its output throughput where the
    source printed no TPOT) or of a steady stream, else (the runtime held the whole burst) the output throughput. A
    run without --max-model-len is asked at its prompt and output."""
    tp, loop, p, o = int(r["tensor_parallel"]), r.get("max_concurrency") or "", int(r["input_tokens"]), \
        int(r["output_tokens"])
    opts = Options(runtime=r["runtime"], quant=r.get("quant") or None, ctx=int(r["max_model_len"] or p + o),
                   prompt_tokens=p, output_tokens=o, concurrency=int(loop or r["num_prompts"]),
                   tensor_parallel=tp if tp > 1 else None)
    label = f"{r['model']} {r.get('quant') or 'native'} {r['gpu']} tp{tp}" + (f" c={loop}" if loop else "")
    out = Obs(_source(r), f"{label} output tok/s", float(r["output_tok_s"]), r["gpu"], tp, r["model"], opts,
              _loop_throughput if loop else _burst_throughput)
    if not r["median_tpot_ms"]:
        return [out] if loop else []
    tpot = Obs(_source(r), f"{label} TPOT", float(r["median_tpot_ms"]), r["gpu"], tp, r["model"], opts,
               _tpot if loop else _steady_tpot)
    return [tpot] if loop else [tpot, out]


def _step_key(catalog: Catalog, o: Obs) -> str:
    """The [decode] MoE key an observation's answer takes: the family's, or `family:kernel` where its experts' quant
    runs through a kernel of their own on its GPU (`advisor.engine.speed.moe_kernel`)."""
    rig = rig_from_flags(catalog, [f"{o.tp}x{o.gpu}" if o.tp > 1 else o.gpu])
    quant = evaluate(catalog, rig, catalog.models[o.model], o.options).quant
    kernel = moe_kernel(catalog.rules.speed.decode, quant.id, catalog.gpus[o.gpu].arch)
    return f"{FAMILY}:{kernel}" if kernel else FAMILY


_OBS: dict[int, tuple[Catalog, list[Obs]]] = {}


def moe_decode_observations(catalog: Catalog) -> list[Obs]:
    """The MoE decode runs of the catalog's models without expert parallel (MOE_DECODE_FILES: the GPUStack lab's
    ShareGPT runs, and the random-prompt closed loops of vllm_moe_more_sources.csv), each with its [decode] key
    (kept per catalog object)."""
    if id(catalog) not in _OBS:
        out = []
        for name in MOE_DECODE_FILES:
            for r in _rows(name):
                model = catalog.models.get(r["model"])
                if model is not None and model.is_moe and r.get("expert_parallel", "0") != "1":
                    out += _moe_decode(r)
        _OBS[id(catalog)] = (catalog, [dataclasses.replace(o, key=_step_key(catalog, o)) for o in out])
    return list(_OBS[id(catalog)][1])


STEP_KEY = "family_moe_compute"
STEP_GRID = tuple(round(0.20 + 0.05 * i, 2) for i in range(27))  # 0.20 .. 1.50: Marlin's MXFP4 experts exceed 1
_STEP: dict[tuple, tuple[Catalog, dict]] = {}


def with_steps(catalog: Catalog, values: dict[str, float]) -> Catalog:
    """The catalog whose [decode] family_moe_compute is `values` (a kernel key left out: its runs take the
    family's)."""
    return with_table(catalog, values, STEP_KEY, "decode")


def fit_step(catalog: Catalog, leave_out: str | None = None) -> dict[str, float]:
    """The MoE decode factor of each [decode] key (the family's, and each MoE kernel of its own that runs hold):
    the grid value with the least median over sources of each source's median |log error| on that key's MoE decode
    runs not from `leave_out`, the two prefill factors fitted without it too (the lower on a tie). A kernel key whose
    runs are all from `leave_out` is left out: its runs then take the family's."""
    book = with_fraction(with_fraction(catalog, fit(catalog, leave_out=leave_out)),
                         fit_moe(catalog, leave_out=leave_out), MOE_KEY)
    pre = book.rules.speed.prefill
    obs = moe_decode_observations(catalog)
    keys = sorted({o.key for o in obs} | {FAMILY})
    cached = (id(catalog), pre.family_efficiency[FAMILY], getattr(pre, MOE_KEY)[FAMILY])
    if cached not in _STEP:  # each run takes one key, so every key at one grid value scores them all
        _STEP[cached] = (catalog, {v: [_log_error(with_steps(book, dict.fromkeys(keys, v)), o) for o in obs]
                                   for v in STEP_GRID})
    errors = _STEP[cached][1]
    return {k: _least_off([o for o in obs if o.key == k],
                          {v: [e for o, e in zip(obs, errors[v]) if o.key == k] for v in STEP_GRID}, leave_out,
                          STEP_GRID)
            for k in keys if any(o.key == k and o.source != leave_out for o in obs)}


def _least_off(obs: list[Obs], errors: dict[float, list], leave_out: str | None,
               grid: tuple[float, ...] = GRID) -> float:
    """The grid value whose log errors (`errors[v]`, one per observation, None where it does not apply) are least
    off by source (`by_source`) over the observations not from `leave_out`, the lower on a tie."""
    return min(grid, key=lambda v: (by_source([(o.source, e) for o, e in zip(obs, errors[v])
                                                 if o.source != leave_out and e is not None]), v))


def by_source(errors: list[tuple[str, float]]) -> float:
    """The median over sources of each source's median |log error|: a page of 8 runs counts as one of 2."""
    sources = {s for s, _ in errors}
    return statistics.median(statistics.median(abs(e) for s, e in errors if s == src) for src in sources)


def held_out_catalog(catalog: Catalog, source: str) -> Catalog:
    """The catalog whose paged factors were fitted without `source`'s rows."""
    book = with_fraction(with_fraction(catalog, fit(catalog, leave_out=source)), fit_moe(catalog, leave_out=source),
                         MOE_KEY)
    return with_steps(book, fit_step(catalog, leave_out=source))


def _print_prompt_runs(catalog: Catalog) -> None:
    """Each prompt-heavy run against the advisor with the factors fitted without its source (dense: the check; the
    32,000-token prompts: attention's share, fitted on by nothing here)."""
    for moe, inputs in ((True, PROMPT_INPUTS), (False, PROMPT_INPUTS), (True, (32000,)), (False, (32000,))):
        for run in prompt_runs(catalog, moe, inputs):
            e = prompt_log_error(held_out_catalog(catalog, run.source), run)
            got = "does not fit as asked" if e is None else f"predicted {math.expm1(e):+.0%}"
            print(f"  {'MoE  ' if moe else 'dense'} {run.label}: {run.measured:.0f} tok/s, {got}")


def main() -> int:
    catalog = load_catalog()
    pre = catalog.rules.speed.prefill
    value, stored = fit(catalog), pre.family_efficiency.get(FAMILY)
    moe, moe_stored = fit_moe(catalog), getattr(pre, MOE_KEY).get(FAMILY)
    print(f"[prefill] family_efficiency.{FAMILY} fitted: {value} (rules/speed.toml: {stored})")
    print(f"[prefill] {MOE_KEY}.{FAMILY} fitted: {moe} (rules/speed.toml: {moe_stored})")
    obs = observations()
    for src in sorted({o.source for o in obs}):
        book = held_out_catalog(catalog, src)
        errs = [f"{o.label} {math.expm1(e):+.0%}" for o in obs if o.source == src
                and (e := _log_error(book, o)) is not None]
        print(f"{src[-60:]} (fit without it: {fit(catalog, src)}), predicted/measured - 1: {', '.join(errs)}")
    print("prompt-heavy runs (prompt tokens over the run's duration), each source held out:")
    _print_prompt_runs(catalog)
    step, step_stored = fit_step(catalog), getattr(catalog.rules.speed.decode, STEP_KEY)
    print(f"[decode] {STEP_KEY} fitted: {step} (rules/speed.toml: {step_stored}); MoE decode runs, each source held "
          "out:")
    for o in moe_decode_observations(catalog):
        if (e := _log_error(held_out_catalog(catalog, o.source), o)) is not None:
            print(f"  {o.source.split('performance-lab/')[-1]} {o.label} ({o.key}): {o.measured:g}, "
                  f"predicted {math.expm1(e):+.0%}")
    if "--check" in sys.argv[1:] and (stored, moe_stored, step_stored) != (value, moe, step):
        print(f"rules/speed.toml has {stored} / {moe_stored} / {step_stored}; the fits give {value} / {moe} / {step}: "
              "write them there", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
