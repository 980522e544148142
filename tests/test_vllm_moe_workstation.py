"""MoE decode under load on workstation GPUs, held out: `vllm bench serve` closed loops on an RTX 5090 and RTX PRO
6000 Max-Q cards, and 400-request runs on an RTX 4090, RTX 5090 and RTX PRO 6000
(tests/data/vllm_moe_workstation.csv), against the answer with the paged factors bench/paged_fit.py fits on
datacenter pages; nothing is fitted on these rows."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags

DATA = Path(__file__).parent / "data" / "vllm_moe_workstation.csv"
ROWS = list(csv.DictReader(DATA.open(encoding="utf-8")))
# median |TPOT error| over the 8 closed loops: 23.79%, the same as before issue 27's sixth pass (their experts take
# the fused-MoE kernel's factor and roofline). The single-GPU and TP 2 loops are predicted +4..+35% too long a TPOT
# (+31..+55% while the fused-MoE kernel's stream and products were added); Qwen3.5-122B-FP8 under TP 8 over PCIe
# -37.5% (too short: the worst). 23.99% since the catalog counts Qwen3.5 / 3.6's gated q_proj whole (0.08 B more
# active weights read per token on Qwen3.6 35B-A3B: its two loops +24.3% and +31.5%)
MEDIAN_MAX = 0.240
WORST_MAX = 0.376
# the 400-concurrency runs (the pool holds what it can, the rest queue), output throughput: RTX 4090 +7.2%, RTX 5090
# +35.9%, RTX PRO 6000 -2.1% (+9.8% and +36.1% when the bound was set; +10%, +55%, +13% with the fused-MoE factor at 0.35)
OUTPUT_WORST_MAX = 0.362


def _serving(catalog, r: dict):
    tp = int(r["tensor_parallel"])
    rig = rig_from_flags(catalog, [f"{tp}x{r['gpu']}" if tp > 1 else r["gpu"]])
    opts = Options(runtime=r["runtime"], quant=r["quant"], ctx=int(r["max_model_len"]),
                   prompt_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
                   concurrency=int(r["max_concurrency"]),
                   max_num_seqs=int(r["max_num_seqs"]) if r["max_num_seqs"] else None,
                   memory_fraction=float(r["memory_fraction"]) if r["memory_fraction"] else None,
                   tensor_parallel=tp if tp > 1 else None)
    return evaluate(catalog, rig, catalog.models[r["model"]], opts).serving


def _error(catalog, r: dict) -> float:
    """predicted / measured - 1 of the row's figure: its median TPOT, or its output throughput."""
    s = _serving(catalog, r)
    if r["figure"] == "tpot":
        return 1000 / s.per_stream_decode_tokens_per_s / float(r["median_tpot_ms"]) - 1
    return s.output_tokens_per_s / float(r["output_tok_s"]) - 1


def _label(r: dict) -> str:
    return f"{r['model']} {r['quant']} {r['tensor_parallel']}x{r['gpu']} c={r['max_concurrency']}"


def test_the_rows_are_cited():
    md = DATA.with_suffix(".md").read_text(encoding="utf-8")
    assert len(ROWS) >= 8
    for r in ROWS:
        assert r["source"].startswith(("https://github.com/cloudrift-ai/deplodock/blob/9da9d04",
                                       "https://github.com/cloudrift-ai/server-benchmark/blob/f8e34f1"))
        assert any(r["source"].startswith(line.split(" | ")[0].strip("| ")) for line in md.splitlines()
                   if line.startswith("| https://"))
        assert f"Median TPOT (ms): {r['median_tpot_ms']}" in r["notes"]
        assert f"Output token throughput (tok/s): {r['output_tok_s']}" in r["notes"]


def test_moe_closed_loops_on_workstation_gpus_held_out(catalog):
    errors = [(_label(r), _error(catalog, r)) for r in ROWS if r["figure"] == "tpot"]
    print("\nTPOT: " + "; ".join(f"{label} {e:+.1%}" for label, e in errors))
    median = statistics.median(abs(e) for _, e in errors)
    print(f"median |TPOT error| {median:.2%}")
    assert len(errors) >= 8 and median <= MEDIAN_MAX and max(abs(e) for _, e in errors) <= WORST_MAX


def test_saturated_runs_output_throughput_held_out(catalog):
    """400 requests at once on one card: the pool decides how many run and the rest queue, so the figure is the
    output throughput (the TPOT of a queue this long is no per-stream speed at the asked concurrency)."""
    errors = [(_label(r), _error(catalog, r)) for r in ROWS if r["figure"] == "output"]
    print("\noutput tok/s: " + "; ".join(f"{label} {e:+.1%}" for label, e in errors))
    assert len(errors) == 3 and max(abs(e) for _, e in errors) <= OUTPUT_WORST_MAX


@pytest.mark.parametrize("r", ROWS[:1], ids=["qwen3-coder-awq-5090-c4"])
def test_awq_experts_take_the_fused_moe_kernels_key(catalog, r):
    """AWQ experts are no MXFP4 kernel's: the family's factor and the roofline hold for them."""
    from advisor.engine import speed as spd
    from test_decode_products import placed

    sc, _ = placed(catalog, r["model"], [r["gpu"]], runtime="vllm", quant=r["quant"], ctx=8192)
    g = catalog.gpus[r["gpu"]]
    assert (spd.moe_decode_key(sc, g), spd.moe_decode_serial(sc, g)) == ("paged", 0.0)
