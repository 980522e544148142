"""Score the tensor-parallel link model against public NVLink-vs-PCIe A/Bs on RTX 3090s.

    python bench/nvlink_tp.py            # every row, predicted and measured, errors by source
    python bench/nvlink_tp.py --fit      # also refit [allreduce] host_staged_factor on club3090_pr702

tests/data/nvlink_tp_measurements.csv holds same-rig A/Bs: arm A on an NVLink bridge, arm B over PCIe staged
through host memory (a GeForce pair without P2P), and the Reddit rig's TP=4 over all four cards. The engine's
compute model is not what is scored here (the rows run MTP speculative decoding, which it does not model):
each row's arm B is predicted from its measured arm A plus what the engine says changes between the arms, the
link time of the same step or prompt (advisor.engine.interconnect.link_times, with the step's tokens: streams x
(1 + MTP draft tokens), and 2 all-reduces per MTP layer pass besides the model's), plus for a different GPU
count the engine's compute difference (advisor.engine.speed). That isolates the constants in question:
rules/interconnect.toml [allreduce] latency_us, ring_step_us and host_staged_factor.

Only host_staged_factor is fitted, on the club3090_pr702 prefill rows (the newest vLLM, 0.25.0); every other
row is out of sample, and the errors are printed grouped by source.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.engine import speed as spd  # noqa: E402
from advisor.engine.check import evaluate  # noqa: E402
from advisor.engine.interconnect import link_times  # noqa: E402
from advisor.engine.options import Options  # noqa: E402
from advisor.engine.scenario import Scenario  # noqa: E402
from advisor.probe.flags import rig_from_flags  # noqa: E402

ROWS = ROOT / "tests" / "data" / "nvlink_tp_measurements.csv"
FIT_SOURCE = "club3090_pr702"
SCORED = ("itl_ms", "ttft_ms", "decode_tps", "prefill_tps")


@dataclass(frozen=True)
class Scored:
    source: str
    label: str
    metric: str
    measured_b: float
    predicted_b: float
    measured_a: float

    @property
    def error(self) -> float:
        """Error of arm B's time (per step, per token or per prompt), predicted over measured: positive is slower
        than measured (a rate's time is its inverse)."""
        if self.metric.endswith("_ms"):
            return self.predicted_b / self.measured_b - 1
        return self.measured_b / self.predicted_b - 1

    @property
    def measured_gain(self) -> float:
        return self.measured_b / self.measured_a if self.metric.endswith("_ms") else self.measured_a / self.measured_b

    @property
    def predicted_gain(self) -> float:
        return self.predicted_b / self.measured_a if self.metric.endswith("_ms") else self.measured_a / self.predicted_b


def _arm(catalog, row: dict, arm: str):
    """(scenario, placement) of one arm: an NVLink pair, or the same cards over PCIe, or the rig's TP=4."""
    tp, link = int(row[f"tp_{arm}"]), row[f"arm_{arm}"]
    rig = rig_from_flags(catalog, [f"{tp}x{row['gpu']}"], nvlink=link == "nvlink" or tp > 2, ram=128)
    prompt = int(row["prompt_tokens"]) or 512
    opts = Options(quant=row["quant"], runtime="vllm", prompt_tokens=prompt, ctx=max(8192, prompt + 1024))
    r = evaluate(catalog, rig, catalog.models[row["model"]], opts, table=False)
    assert r.placement.runs and r.placement.strategy == "tensor_parallel", (row, arm, r.placement.problem)
    sc = Scenario(r.model, r.quant, r.runtime, rig, opts, catalog.rules, r.context_tokens, r.placement.layout)
    return sc, r.placement


def _step_s(sc, placement, tokens: int, mtp: int) -> tuple[float, float]:
    """(compute, link) seconds of one decode step carrying `tokens`; the MTP drafts add 2 all-reduces each."""
    lt = link_times(sc, placement, sc.options.prompt_tokens, tokens)
    layers = sc.model.layers
    return spd.decode_step(sc, placement, streams=tokens).total_s, lt.decode_s * (layers + mtp) / layers


def _delta_s(catalog, row: dict) -> float:
    """What the engine says arm B adds over arm A: one step (decode metrics) or one prompt (prefill metrics)."""
    (sc_a, pl_a), (sc_b, pl_b) = _arm(catalog, row, "a"), _arm(catalog, row, "b")
    mtp = int(row["mtp_tokens"] or 0)
    if row["metric"] in ("itl_ms", "decode_tps"):
        tokens = int(row["concurrency"]) * (1 + mtp)
        (ca, la), (cb, lb) = _step_s(sc_a, pl_a, tokens, mtp), _step_s(sc_b, pl_b, tokens, mtp)
        return (cb - ca) * (pl_a.tp_size != pl_b.tp_size) + lb - la
    prompt = sc_a.options.prompt_tokens
    pre_a, pre_b = (link_times(sc, pl, prompt, 1).prefill_s for sc, pl in ((sc_a, pl_a), (sc_b, pl_b)))
    compute = 0.0
    if pl_a.tp_size != pl_b.tp_size:
        compute = spd.prefill_time(sc_b, pl_b, prompt).total_s - spd.prefill_time(sc_a, pl_a, prompt).total_s
    return compute + pre_b - pre_a


def score_row(catalog, row: dict) -> Scored:
    a, b, metric = float(row["value_a"]), float(row["value_b"]), row["metric"]
    delta = _delta_s(catalog, row)
    if metric.endswith("_ms"):
        predicted = a + delta * 1e3
    elif metric == "decode_tps":  # per token: a step's extra time over the tokens a step accepts
        predicted = 1 / (1 / a + delta / float(row["accept_len"]))
    else:  # prefill_tps: the prompt's extra time
        prompt = int(row["prompt_tokens"])
        predicted = prompt / (prompt / a + delta)
    label = f"{row['tp_b']}x {row['arm_b']} vs {row['tp_a']}x {row['arm_a']} c{row['concurrency']} {metric}" + \
        (f" p{row['prompt_tokens']}" if metric in ("ttft_ms", "prefill_tps") else "")
    return Scored(row["source"], label, metric, b, predicted, a)


def rows() -> list[dict]:
    with ROWS.open(encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["metric"] in SCORED and r["accept_len"]]


def scored(catalog=None) -> list[Scored]:
    catalog = catalog or load_catalog(False)
    return [score_row(catalog, r) for r in rows()]


def group(s: Scored) -> str:
    """The row's source, and `fitted` for the rows host_staged_factor was fitted on."""
    return s.source + (" fitted" if s.source == FIT_SOURCE and s.metric == "prefill_tps" else "")


def by_source(results: list[Scored]) -> dict[str, float]:
    """Median absolute error of arm B's time per source (the fitted rows apart)."""
    groups = sorted({group(s) for s in results})
    return {g: statistics.median(abs(s.error) for s in results if group(s) == g) for g in groups}


def fit_host_factor(catalog) -> float:
    """host_staged_factor that zeroes the median error of the club3090_pr702 prefill rows (bisection: a larger
    factor is a faster staged link, so a shorter predicted prompt)."""
    fit_rows = [r for r in rows() if r["source"] == FIT_SOURCE and r["metric"] == "prefill_tps"]
    lo, hi = 0.02, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        ar = replace(catalog.rules.interconnect.allreduce, host_staged_factor=mid)
        rules = replace(catalog.rules, interconnect=replace(catalog.rules.interconnect, allreduce=ar))
        cat = replace(catalog, rules=rules)
        med = statistics.median(score_row(cat, r).error for r in fit_rows)
        lo, hi = (mid, hi) if med > 0 else (lo, mid)  # predicted prompt too slow: the staged link is faster
    return round((lo + hi) / 2, 3)


def main() -> None:
    catalog = load_catalog(False)
    if "--fit" in sys.argv:
        print(f"host_staged_factor fitted on {FIT_SOURCE} prefill rows: {fit_host_factor(catalog)}")
    results = scored(catalog)
    print(f"{'source':26} {'row':48} {'meas B':>8} {'pred B':>8} {'err':>7} {'gain meas':>9} {'pred':>6}")
    for s in results:
        print(f"{s.source:26} {s.label:48} {s.measured_b:8.1f} {s.predicted_b:8.1f} {s.error:+7.1%} "
              f"{s.measured_gain:9.3f} {s.predicted_gain:6.3f}")
    for g, med in by_source(results).items():
        n = sum(1 for s in results if group(s) == g)
        print(f"{g}: median |error| {med:.1%} over {n} rows" + ("" if g.endswith("fitted") else " (out of sample)"))


if __name__ == "__main__":
    main()
