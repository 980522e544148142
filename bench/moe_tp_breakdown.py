"""Where the advisor's vLLM decode step goes, row by row, against the measured median TPOT (issue 27).

    python bench/moe_tp_breakdown.py

For the steady-stream `vllm bench serve` rows on A100s (tests/data/vllm_moe_tp_more.csv, the A100 rows of
vllm_moe_tp_sweeps.csv, and vllm_a100_context.csv: GLM-4.6-FP8 under TP 8 and the dense Qwen3-32B on one GPU), the
step the serving answer computes (advisor.engine.serving._with_speeds): the running decodes plus the prompts that
replace finished requests, what one GPU reads (weights, of them the routed experts, and KV cache) at the decode
fraction, its FLOPs (each part's parameters at its own width, advisor.engine.speed.token_params) at the paged
matrix-product fraction with the MoE factor of a decode step for its experts' kernel (rules/speed.toml), the share
of the shorter of the read and the compute that adds to the longer, the fixed cost and the all-reduces (at the
decode tokens and at every token the step computes, as the answer counts them). Nothing is fitted or changed here; the measured-to-predicted ratio of each row is what tests/data/vllm_moe_tp_sweeps.md
discusses.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from advisor.catalog.load import load_catalog
from advisor.catalog.types import Catalog
from advisor.engine import speed as spd
from advisor.engine.check import _pick, _scenario, evaluate
from advisor.engine.interconnect import link_times
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
FILES = ("vllm_moe_tp_more.csv", "vllm_moe_tp_sweeps.csv", "vllm_a100_context.csv")


def rows() -> list[dict]:
    """The A100 rows of the three files (the H100 rows of vllm_moe_tp_sweeps.csv are bursts, not steady streams)."""
    out = []
    for name in FILES:
        out += [r for r in csv.DictReader((DATA / name).open(encoding="utf-8")) if r["gpu"].startswith("a100")]
    return out


def _ask(catalog: Catalog, r: dict):
    """(scenario, placement, serving answer) of one row, asked as tests/test_vllm_concurrency.py asks it."""
    tp = int(r["tensor_parallel"])
    rig = rig_from_flags(catalog, [f"{tp}x{r['gpu']}" if tp > 1 else r["gpu"]])
    opts = Options(runtime=r["runtime"], quant=r.get("quant") or None, ctx=int(r["max_model_len"]),
                   prompt_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
                   concurrency=int(r["num_prompts"]), tensor_parallel=tp if tp > 1 else None)
    model = catalog.models[r["model"]]
    pick = _pick(catalog, _scenario(catalog, rig, model, opts), None, False)
    sc = pick.scenario
    return sc, pick.placer.at(sc.ctx), evaluate(catalog, rig, model, opts).serving


def step_parts(sc, placement, serving) -> dict[str, float]:
    """One GPU's share of the serving answer's decode step, in milliseconds (and the step's token count)."""
    model, g = sc.model, sc.rig.gpus[0].spec
    running, prompt = serving.running, sc.options.prompt_tokens
    output = max(serving.request_length_tokens - prompt, 1)
    tokens = running + (running - 1) * prompt / output
    d = placement.devices[0]
    kv = d.kv_cache_bytes * running * (prompt + output / 2) / sc.ctx
    reads = spd.active_device_bytes(placement, model, round(tokens))[0]
    params = spd.token_params(sc, placement)[0]
    bw = g.memory_bandwidth_gb_s * 1e9 * spd.decode_efficiency(g, sc.quant, sc.rules)
    rate = spd.decode_flops_per_s(sc, g)
    step = spd.decode_step(sc, placement, kv_depth_bytes=[int(kv)] * len(placement.devices), streams=running,
                           tokens=tokens)
    links = [link_times(sc, placement, prompt, n) for n in (running, math.ceil(tokens))]
    return {"tokens": tokens, "weights GB": d.weights_bytes / 1e9, "experts GB": d.expert_bytes / 1e9,
            "read ms": 1e3 * (reads + kv) / bw,
            "compute ms": 1e3 * spd.step_flops(params, tokens, running) / rate,
            "share of the shorter added": spd.moe_decode_serial(sc, g),
            "fixed ms": 1e3 * step.overhead_s,
            "links ms": 1e3 * (links[0].decode_s if links[0] else 0.0),
            "links at all tokens ms": 1e3 * (links[1].decode_s if links[1] else 0.0),
            "step ms": 1e3 / serving.per_stream_decode_tokens_per_s}


def main() -> int:
    catalog = load_catalog()
    for r in rows():
        sc, placement, serving = _ask(catalog, r)
        parts = step_parts(sc, placement, serving)
        measured = float(r["median_tpot_ms"])
        print(f"{r['model']} {sc.quant.id} {r['gpu']} tp{r['tensor_parallel']}: {serving.running} running of "
              f"{serving.max_num_seqs}, {parts.pop('tokens'):.0f} tokens a step; measured {measured:.1f} ms, "
              f"predicted {parts['step ms']:.1f} ms ({measured / parts['step ms']:.2f}x)")
        print("   " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
