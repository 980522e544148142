"""Fit llama.cpp's row-split synchronisation costs (rules/interconnect.toml [row_split]) and score them.

    python bench/row_split.py            # fit on the fit rows, print the constants and the errors
    python bench/row_split.py --check    # exit 1 unless rules/interconnect.toml holds what the fit gives

With `-sm row` every split matrix multiply is synchronised on its own (advisor.engine.interconnect
_row_split_times): a token pays, per split matrix, `sync_us` plus `per_gpu_us[peer|staged]` for each
GPU beyond the first. Everything else in the prediction is the engine as it is (the speed tables of
rules/speed.toml, never fitted on these rows), so the decode seconds of a row are

    t = t0 + matrices x (sync_us + (n - 1) x per_gpu_us[peer or staged]) x 1e-6

with t0 the engine's prediction with both constants at zero. The constants minimise the mean
|log(predicted / measured)| over the fit rows (XiongjieDai's Dec 2023 `./main` timings of LLaMA 2
models on 2-6 GPUs, when llama.cpp split every multi-GPU run by rows; its LLaMA 1 rows name models the
catalog does not have) by a fixed grid, so the result is deterministic. Out of sample: each GPU model
of that benchmark predicted by constants refitted without it, and the other sources of
tests/data/llamacpp_row_split.csv (other people, GPUs and builds), where the row/layer ratio is scored
(it cancels the single-GPU part both modes share).
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measurements import ROOT, Case, load_cases, placer_for  # noqa: E402

from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.catalog.rulebook import build_rulebook, rulebook_to_dict  # noqa: E402
from advisor.engine.check import decode_seconds  # noqa: E402
from advisor.engine.interconnect import slowest_link, split_matrices  # noqa: E402
from advisor.engine.options import Options  # noqa: E402
from advisor.engine.placement import Placer  # noqa: E402
from advisor.engine.scenario import Scenario  # noqa: E402
from advisor.probe.flags import rig_from_flags  # noqa: E402

FIT = "xiongjiedai_llama2_dec2023"
PAIRS = ROOT / "tests" / "data" / "llamacpp_row_split.csv"
TOML = ROOT / "rules" / "interconnect.toml"
GRID_SYNC = [x * 1.0 for x in range(0, 201)]
GRID_GPU = [x * 0.5 for x in range(0, 161)]


@dataclass
class Obs:
    label: str
    t0: float
    """Engine seconds per token with the row-split constants at zero."""
    matrices: int
    others: int
    """GPUs beyond the first."""
    peer: bool
    measured_s: float

    def predicted(self, sync: float, per_gpu: dict[str, float]) -> float:
        return self.t0 + self.matrices * (sync + self.others * per_gpu["peer" if self.peer else "staged"]) * 1e-6


def _zeroed(rules: dict) -> object:
    r = rulebook_to_dict(rules) if not isinstance(rules, dict) else rules
    r = {**r, "interconnect": {**r["interconnect"], "row_split": {**r["interconnect"]["row_split"], "sync_us": 0.0,
                                                                   "per_gpu_us": {"peer": 0.0, "staged": 0.0}}}}
    return build_rulebook(r)


def _obs_for(placer: Placer, ctx: int, depth: int, measured_tps: float, label: str, rules0) -> Obs | None:
    p = placer.at(ctx)
    if not p.fits or p.strategy != "tensor_parallel":
        return None
    used = [i for i, d in enumerate(p.devices) if d.total_bytes > 0]
    link = slowest_link(placer.rig, used, rules0)
    t0 = decode_seconds(replace(placer.scenario, rules=rules0, ctx=ctx), p, depth)
    return Obs(label, t0, split_matrices(placer.model, rules0), len(used) - 1,
               link is not None and link.kind in ("nvlink", "pcie_p2p"), 1 / measured_tps)


def benchmark_rows(dataset: str) -> list[Obs]:
    catalog = load_catalog(user=False)
    rules0 = _zeroed(rulebook_to_dict(catalog.rules))
    out = []
    for c in load_cases(catalog):
        if c.dataset != dataset or c.split != "row" or c.gpu_count < 2 or c.test != "tg" or c.measured is None:
            continue
        placer = placer_for(catalog, c)
        placer = Placer(replace(placer.scenario, rules=rules0))
        o = _obs_for(placer, c.ctx, c.depth + c.n_gen // 2, c.measured,
                     f"{c.gpu_count}x {c.gpu_id} {c.model_id} {c.quant}", rules0)
        if o is not None:
            out.append(o)
    return out


@dataclass
class Pair:
    """A row of tests/data/llamacpp_row_split.csv the catalog can ask about: the engine's row/layer ratio."""
    label: str
    row: Obs
    layer_s: float
    measured_ratio: float
    """Row split tokens/s over layer split tokens/s, as measured."""

    def predicted_ratio(self, sync: float, per_gpu: dict[str, float]) -> float:
        return self.layer_s / self.row.predicted(sync, per_gpu)


def pair_rows() -> list[Pair]:
    catalog = load_catalog(user=False)
    rules0 = _zeroed(rulebook_to_dict(catalog.rules))
    out = []
    with PAIRS.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if not r["test"].startswith("tg") or r["model"] not in catalog.models or r["gpu"] not in catalog.gpus:
                continue
            ratio = float(r["row_over_layer"]) if r["row_over_layer"] else \
                float(r["tokens_per_s_row"]) / float(r["tokens_per_s_layer"])
            depth = int(r["depth"] or 0)
            ctx = max(4096, depth + 512)
            n = int(r["gpu_count"])
            rig = rig_from_flags(catalog, [f"{n}x{r['gpu']}"], ram=256)
            quant = catalog.quants[r["quant"]]
            layer_s = None
            row = None
            for split in ("layer", "row"):
                opts = Options(quant=quant.id, ctx=ctx, split=split)
                placer = Placer(Scenario.of(catalog.models[r["model"]], quant, catalog.runtimes["llama.cpp"], rig, opts,
                                            rules0).at_context(ctx))
                if split == "layer":
                    p = placer.at(ctx)
                    layer_s = decode_seconds(placer.scenario, p, depth)
                else:
                    row = _obs_for(placer, ctx, depth, 1.0, "", rules0)
            if row is None or layer_s is None:
                continue
            out.append(Pair(f"{n}x {r['gpu']} {r['model']} {r['quant']} ({r['links']}; {r['source_url']})",
                            replace(row, label=r["source_url"]), layer_s, ratio))
    return out


def mean_abs_log(rows: list[Obs], sync: float, per_gpu: dict[str, float]) -> float:
    return sum(abs(math.log(o.predicted(sync, per_gpu) / o.measured_s)) for o in rows) / max(len(rows), 1)


def fit(rows: list[Obs]) -> tuple[float, dict[str, float]]:
    """The grid point of least mean |log error|: sync_us, then per_gpu_us for peer and staged rigs,
    in turns until nothing moves (coordinate descent on a fixed grid from a fixed start)."""
    sync, per = 0.0, {"peer": 0.0, "staged": 0.0}
    for _ in range(20):
        before = (sync, dict(per))
        sync = min(GRID_SYNC, key=lambda s: (mean_abs_log(rows, s, per), s))
        for kind in ("peer", "staged"):
            if any(o.peer == (kind == "peer") and o.others for o in rows):
                per[kind] = min(GRID_GPU, key=lambda g: (mean_abs_log(rows, sync, {**per, kind: g}), g))
        if (sync, per) == before:
            break
    return sync, per


def errors(rows: list[Obs], sync: float, per: dict[str, float]) -> list[float]:
    return [abs(o.predicted(sync, per) / o.measured_s - 1) for o in rows]


def rig_of(o: Obs) -> str:
    return o.label.split()[1]


def leave_one_rig_out(rows: list[Obs]) -> list[float]:
    """Each GPU model's rows predicted by constants fitted without them."""
    out = []
    for rig in sorted({rig_of(o) for o in rows}):
        rest = [o for o in rows if rig_of(o) != rig]
        sync, per = fit(rest)
        out += errors([o for o in rows if rig_of(o) == rig], sync, per)
    return out


def stored() -> tuple[float, dict[str, float]]:
    text = TOML.read_text()
    block = text[text.index("[row_split]"):]
    sync = float(re.search(r"^sync_us = ([0-9.]+)", block, re.M).group(1))
    m = re.search(r"^per_gpu_us = \{ peer = ([0-9.]+), staged = ([0-9.]+) \}", block, re.M)
    return sync, {"peer": float(m.group(1)), "staged": float(m.group(2))}


def main() -> int:
    fit_rows = benchmark_rows(FIT)
    sync, per = fit(fit_rows)
    print(f"fit on {FIT}: {len(fit_rows)} rows -> sync_us = {sync:g}, per_gpu_us = {{ peer = {per['peer']:g}, "
          f"staged = {per['staged']:g} }}")
    e = errors(fit_rows, sync, per)
    print(f"  in sample: {len(e)} rows, median {statistics.median(e):.1%}, max {max(e):.1%}")
    e = leave_one_rig_out(fit_rows)
    print(f"  held out by rig (refitted without each GPU model): {len(e)} rows, median {statistics.median(e):.1%}, "
          f"max {max(e):.1%}")
    for p in pair_rows():
        print(f"  held out (other source) {p.label}: row/layer measured {p.measured_ratio:.2f}, "
              f"predicted {p.predicted_ratio(sync, per):.2f}")
    if "--check" in sys.argv[1:]:
        return 0 if stored() == (sync, per) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
