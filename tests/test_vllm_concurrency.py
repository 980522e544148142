"""Batched decode on a paged server (vLLM) against public concurrency sweeps.

tests/data/vllm_concurrency_sweeps.csv holds `vllm bench serve` results at several `--max-concurrency`
levels (cited; .md beside it): the median time per output token of a steady stream of requests. The
advisor's answer for the same GPU, model, checkpoint, parallel size, prompt and output lengths and
concurrency gives the per-stream decode speed (`serving.per_stream_decode_tokens_per_s`): one step reads
the weights once for every stream, each stream's own KV cache, and computes the decode tokens plus the
prompts of the requests that replace finished ones (vLLM's chunked prefill rides in the same steps), so
a large batch turns compute-bound. The paged family's matrix-product fraction is fitted on these rows
(bench/paged_fit.py), so each row is answered with the value fitted without its own source
(`held_out_catalog`): every figure below is out of sample.

Mixture-of-experts models (issue 27) take two more factors, fitted the same way: one on their prompt-heavy runs
(tests/data/vllm_prompt_heavy.csv) for their products, one on their decode runs (the MoE rows of
tests/data/vllm_moe_*.csv and vllm_a100_context.csv) for the products of a decode step; each run is answered with
all three fitted without its page.
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import sys

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from paged_fit import (GRID, MOE_KEY, STEP_GRID, STEP_KEY, by_source, fit, fit_moe, fit_step,  # noqa: E402
                       held_out_catalog, moe_decode_observations, predict, prompt_log_error, prompt_runs)

DATA = Path(__file__).parent / "data" / "vllm_concurrency_sweeps.csv"
ROWS = list(csv.DictReader(DATA.open(encoding="utf-8")))
# Reached with no constant fitted on these rows; the test fails if they grow. 20 rows from 5 sources since issue 27's
# second gathering (13 from 3 before, at 14.8% / 12.6% / 30.7%): the bounds follow the rows added, every closed-loop
# row of each new source, not a change to the model. What the new rows cost: an RTX PRO 6000 sweep of a 14B model
# whose large batches run faster than one factor on llama.cpp's Blackwell fraction allows (-53..-75% at 128-512
# streams, where 1,000 prompts give each client 2-8 requests, so ramp-up and drain weigh on the medians), and two
# chat-endpoint RTX 4090 rows near the completions ones (tests/data/vllm_concurrency_sweeps.md).
# Per-stream decode 16.2% and aggregate 16.4% held out since a decode step reads and multiplies no input embedding
# and multiplies the output head only for the rows it samples (19.2% and 19.2% before); issue 27's aggregate target
# is 20%.
MEDIAN_ABS_ERR_MAX = 0.164
# 11 of 20 within 25%: the same step moved the RTX PRO 6000's 32 and 64 streams from +24.2% and -22.0% to +26.5% and
# -25.1%, and the 2x A6000's 64 from +25.9% to +20.6% (12 before; 13 while gpt-oss-120b's MoE rows joined the dense
# fraction's fit: they are scored by the MoE factors now, fitted on by nothing else)
WITHIN_25PCT_MIN = 11  # of 20
# vLLM's "Output token throughput" (what the clients received per second, first tokens' waits included): 15.4% held
# out over 20 rows (20.1% while a step multiplied the input embedding; 12.6% over the first 13)
OUTPUT_THROUGHPUT_MEDIAN_MAX = 0.154
# median TTFT (issue 27: 30%): 23.3% over 20 rows (21.4% while a decode step multiplied the input embedding: the step a
# new prompt waits out is shorter now; 30.7% over the first 13), each source answered with the paged
# factor fitted without it (bench/paged_fit.py). A new prompt waits out the step under way, then rides a step with
# the running requests' decode tokens. Still off: the H100 source (-69..-44%: 60 ms at one stream for a 233-token
# prompt the advisor prefills in 17 ms; not its chat endpoint, which costs the RTX 4090 4 ms more than completions
# on the same server; SGLang's median on the same bench is 27 ms), the 2x A6000's 256 streams (-81%: a pool filled
# near its end by ShareGPT's spread of lengths queues requests) and the RTX PRO 6000's 64-256 streams (+43..+85%)
TTFT_MEDIAN_MAX = 0.233  # 23.28%
# MoE decode under load (issue 27), held out by page: 18.13% median over 16 pages, 34 of 51 figures within 25%, since
# MXFP4 experts take their own kernel's factor (Marlin on A100s, triton_kernels on H100/H200s: moe_kernels) and those
# kernels' steps add their weight stream and products (family_moe_serial); 20.23% and 29 with one factor and the
# roofline for every kernel (16.56% and 34 with the sum for the fused-MoE kernel too, which put the A100 steady rows
# at 5 of 6 and the workstation closed loops of tests/test_vllm_moe_workstation.py at +31..+55%); 24.94% and 27 while
# a step multiplied the input embedding at every token and the output head at its prompt tokens, and counted a FP8
# model's BF16 embedding and head at 8 bits a parameter (19.3% while a paged server's prompt attention ran at
# llama.cpp's plain fraction: the H100/H200 bursts' output throughput, which holds their prompts, then came out
# slower; the step as the answer computed it before issue 27's third pass, FLOPs over the file's average width and
# no MoE factor: 143%, 9 within 20%)
MOE_DECODE_MEDIAN_MAX = 0.1814  # 18.135%
MOE_DECODE_WITHIN_25PCT_MIN = 34
# the MoE prefill factor's runs held out by page, 35.0% over 10 pages; the dense runs of the same measure (prompt
# tokens over the run's duration, decode included) 22.4% with no MoE factor in them: the measure's own spread
MOE_PROMPT_MEDIAN_MAX = 0.3500
DENSE_PROMPT_MEDIAN_MAX = 0.2243
# 32,000-token prompts: the dense runs -21.6%, -23.1%, -15.6% (-45..-53% at the plain attention fraction); MoE 34.6%
# over pages (the A100 pages +37..+100%, as their shorter prompts)
LONG_DENSE_MAX = 0.231
LONG_MOE_MEDIAN_MAX = 0.3461


def _source(r: dict) -> str:
    return r["source"].split(" (")[0]


def _predicted_tpot_ms(catalog, r: dict) -> float:
    return 1000 / _serving(catalog, r).per_stream_decode_tokens_per_s


def _serving(catalog, r: dict):
    tp, c = int(r["tensor_parallel"]), int(r["concurrency"])
    rig = rig_from_flags(catalog, [f"{tp}x{r['gpu']}" if tp > 1 else r["gpu"]])
    prompt, out = int(r["input_tokens"]), int(r["output_tokens"])
    opts = Options(runtime=r["runtime"], quant=r["quant"], ctx=prompt + out, prompt_tokens=prompt, output_tokens=out,
                   concurrency=c,
                   tensor_parallel=tp if tp > 1 else None)
    s = evaluate(held_out_catalog(catalog, _source(r)), rig, catalog.models[r["model"]], opts).serving
    assert s is not None and s.running == c, r["source"]  # requests of their real length: all of them run
    return s


@pytest.fixture(scope="module")
def errors(catalog):
    """(row, predicted speed / measured speed - 1) for every row."""
    return [(r, float(r["median_tpot_ms"]) / _predicted_tpot_ms(catalog, r) - 1) for r in ROWS]


def test_the_paged_fraction_is_what_its_fit_gives(catalog):
    """rules/speed.toml holds bench/paged_fit.py's values, inside their grids and not at a grid's edge: the dense
    fraction, the MoE prefill factor and the MoE decode factor of the family and of each MoE kernel of its own."""
    speed = catalog.rules.speed
    stored = (speed.prefill.family_efficiency["paged"], getattr(speed.prefill, MOE_KEY)["paged"])
    steps = getattr(speed.decode, STEP_KEY)
    assert stored == (fit(catalog), fit_moe(catalog)) and steps == fit_step(catalog)
    assert set(steps) == {"paged", "paged:mxfp4-marlin", "paged:mxfp4-triton"}
    assert all(GRID[0] < v < GRID[-1] for v in stored)
    assert all(STEP_GRID[0] < v < STEP_GRID[-1] for v in steps.values())


def test_the_rows_are_cited_and_complete():
    assert len(ROWS) >= 12 and len({_source(r) for r in ROWS}) >= 3
    md = DATA.with_suffix(".md").read_text(encoding="utf-8")
    for r in ROWS:
        assert _source(r) in md
        assert int(r["concurrency"]) >= 1 and float(r["median_tpot_ms"]) > 0 and r["model"] and r["gpu"]
    assert any(int(r["tensor_parallel"]) > 1 for r in ROWS)


def test_per_stream_decode_out_of_sample(errors):
    errs = [abs(e) for _, e in errors]
    for src in sorted({_source(r) for r, _ in errors}):
        mine = [f"c={r['concurrency']} {e:+.1%}" for r, e in errors if _source(r) == src]
        print(f"\n{src[:70]}: {', '.join(mine)}")
    print(f"vLLM per-stream decode under load: median |error| {statistics.median(errs):.1%}, "
          f"{sum(e <= 0.25 for e in errs)}/{len(errs)} within 25%, worst {max(errs):.1%}")
    assert statistics.median(errs) <= MEDIAN_ABS_ERR_MAX
    assert sum(e <= 0.25 for e in errs) >= WITHIN_25PCT_MIN


def test_batching_shares_the_weight_read_until_the_batch_is_compute_bound(catalog):
    """Per-stream speed falls slowly while the weights dominate (8 streams: within 10% of one), and the
    aggregate stops growing once the step is compute-bound (the 2x A6000 sweep: 128 -> 256 streams)."""
    by = {(r["gpu"], int(r["concurrency"])): r for r in ROWS}
    one, eight = (_predicted_tpot_ms(catalog, by[("h100-sxm", c)]) for c in (1, 8))
    assert eight / one < 1.10
    t128, t256 = (_predicted_tpot_ms(catalog, by[("rtx-a6000", c)]) for c in (128, 256))
    assert 256 / t256 < 1.3 * (128 / t128)  # measured: 806 vs 795 tok/s


def _median_err(catalog, measured: str, predicted) -> float:
    errs = [predicted(_serving(catalog, r)) / float(r[measured]) - 1 for r in ROWS]
    print(f"\n{measured}: " + ", ".join(f"{r['gpu']} c={r['concurrency']} {e:+.0%}" for r, e in zip(ROWS, errs)))
    return statistics.median(abs(e) for e in errs)


def test_output_throughput_out_of_sample(catalog):
    """`vllm bench serve`'s Output token throughput: each client's request takes its time to first token and
    its output tokens at the per-stream speed; min(clients, running) of them at once."""
    assert _median_err(catalog, "output_tok_s", lambda s: s.output_tokens_per_s) <= OUTPUT_THROUGHPUT_MEDIAN_MAX


def test_aggregate_decode_out_of_sample(catalog):
    """Issue 27's aggregate decode (target: median within 20%): the streams together, measured as clients /
    median TPOT (every client runs: `_serving` asserts it), predicted `aggregate_decode_tokens_per_s`."""
    def measured(r: dict) -> float:
        return int(r["concurrency"]) * 1000 / float(r["median_tpot_ms"])
    errs = [abs(_serving(catalog, r).aggregate_decode_tokens_per_s / measured(r) - 1) for r in ROWS]
    assert statistics.median(errs) <= MEDIAN_ABS_ERR_MAX


def test_time_to_first_token_out_of_sample(catalog):
    assert _median_err(catalog, "median_ttft_ms", lambda s: 1000 * s.ttft_p50_s) <= TTFT_MEDIAN_MAX


def test_sglang_prefills_between_decode_steps(catalog):
    """SGLang runs a new prompt in a prefill batch of its own (`--enable-mixed-chunk` off by default), so its
    step carries no decode tokens: at 128 streams its median TTFT is below vLLM's, whose prompt step computes
    the 127 others' decode tokens too. Against the one cited SGLang run: the GPUStack H100 page's
    (https://github.com/gpustack/gpustack/blob/main/docs/performance-lab/qwen3-8b/h100-latency.md, section 1)
    `python3 -m
    sglang.launch_server --model-path Qwen/Qwen3-8B` under the same bench as the vLLM rows (c = 4, ShareGPT 233
    / 221 tokens: median TTFT 27.25 ms) within issue 27's 30%."""
    kw = dict(quant="BF16", ctx=4096, prompt_tokens=223, output_tokens=206, concurrency=128, tensor_parallel=2)
    rig = rig_from_flags(catalog, ["2xrtx-a6000"])
    sg, vl = (evaluate(catalog, rig, catalog.models["qwen3-32b"], Options(runtime=rt, **kw)).serving
              for rt in ("sglang", "vllm"))
    assert sg.ttft_p50_s < vl.ttft_p50_s and sg.ttft_s == vl.ttft_s
    h100 = evaluate(catalog, rig_from_flags(catalog, ["h100-sxm"]), catalog.models["qwen3-8b"],
                    Options(runtime="sglang", quant="BF16", ctx=454, prompt_tokens=233, output_tokens=221,
                            concurrency=4)).serving
    assert abs(1000 * h100.ttft_p50_s / 27.25 - 1) <= 0.30


def _ttft_rows(catalog, **kw):
    rig = rig_from_flags(catalog, ["rtx-4090"])
    opts = Options(runtime="vllm", quant="BF16", ctx=8192, output_tokens=200, **kw)
    return evaluate(catalog, rig, catalog.models["qwen2.5-7b"], opts).serving


def test_a_new_prompt_waits_out_the_step_under_way_then_rides_with_the_decodes(catalog):
    """A closed loop's new prompt arrives just after a step end (its client's last request finished there), so
    it waits a whole decode step, then its prefill runs in a step beside the other requests' decode tokens; one
    client alone is only its prefill."""
    one = _ttft_rows(catalog, prompt_tokens=200, concurrency=1)
    assert one.ttft_p50_s == one.ttft_s
    many = _ttft_rows(catalog, prompt_tokens=200, concurrency=8)
    step = 1 / many.per_stream_decode_tokens_per_s
    assert many.ttft_p50_s >= many.ttft_s + step - 0.001  # rounded to the millisecond
    assert many.ttft_p50_s <= many.ttft_s * 1.5 + step


def test_a_prompt_longer_than_the_step_budget_takes_a_step_per_chunk(catalog):
    """--max-num-batched-tokens 128 with 7 other requests decoding: a 2,000-token prompt goes through in
    ceil(2000 / 121) = 17 steps, each at least a decode step (it reads the weights once more); with a budget
    that holds the whole prompt it is one compute-bound step."""
    s = _ttft_rows(catalog, prompt_tokens=2000, concurrency=8, max_num_batched_tokens=128)
    step = 1 / s.per_stream_decode_tokens_per_s
    assert s.ttft_p50_s >= step + 17 * step - 0.001  # rounded to the millisecond
    big = _ttft_rows(catalog, prompt_tokens=2000, concurrency=8, max_num_batched_tokens=8192)
    assert big.ttft_p50_s < s.ttft_p50_s  # the same FLOPs; the weights read once instead of 17 times



def _by_source(pairs: list[tuple[str, float]]) -> float:
    """paged_fit's median over sources of each source's median |log error|, of fractional errors, as a fraction."""
    return math.expm1(by_source([(src, math.log1p(e)) for src, e in pairs]))


@pytest.fixture(scope="module")
def moe_errors(catalog):
    """(observation, predicted / measured - 1 of the figure it reads: TPOT of a closed loop or steady stream, else
    output throughput) of every MoE decode run without expert parallel (bench/paged_fit.py MOE_DECODE_FILES),
    each answered with the paged factors fitted without its source."""
    out = []
    for o in moe_decode_observations(catalog):
        got = o.read(predict(held_out_catalog(catalog, o.source), o))
        if got is not None:
            out.append((o, got / o.measured - 1))
    return out


def test_the_other_sources_rows_are_cited_and_scored(moe_errors):
    """Every row of tests/data/vllm_moe_more_sources.csv names its source in the .md beside it, and each of its
    sources is among the pages scored (no row is dropped by the loader unseen)."""
    data = DATA.parent / "vllm_moe_more_sources.csv"
    md = data.with_suffix(".md").read_text(encoding="utf-8")
    rows = list(csv.DictReader(data.open(encoding="utf-8")))
    assert rows and all(_source(r) in md for r in rows)
    assert {_source(r) for r in rows} <= {o.source for o, _ in moe_errors}


def test_moe_decode_out_of_sample(moe_errors):
    """Issue 27: MoE decode under load, 51 figures of 16 pages: 14 of the GPUStack lab (A100, H100, H200; gpt-oss,
    Qwen3-235B, GLM-4.5-Air/4.6, DeepSeek R1/V3.2), SemiAnalysis InferenceX PR 1061 (gpt-oss-120b on an MI300X) and
    vLLM issue 30326 (gpt-oss-120b TP 8 on H200s); none fitted on its own page. Each page counts once
    (`_by_source`)."""
    for src in sorted({o.source for o, _ in moe_errors}):
        mine = [f"{o.label} {e:+.0%}" for o, e in moe_errors if o.source == src]
        print(f"\n{src.split('performance-lab/')[-1]}: {', '.join(mine)}")
    median = _by_source([(o.source, e) for o, e in moe_errors])
    within = sum(abs(e) <= 0.25 for _, e in moe_errors)
    print(f"\nMoE decode under load: median over pages {median:.2%}, {within}/{len(moe_errors)} within 25%")
    assert median <= MOE_DECODE_MEDIAN_MAX and within >= MOE_DECODE_WITHIN_25PCT_MIN


def _prompt_errors(catalog, runs) -> list[tuple[str, float]]:
    """(page, predicted / measured - 1) of each run that fits as asked, the paged factors fitted without its page."""
    errors = [(r.source, prompt_log_error(held_out_catalog(catalog, r.source), r)) for r in runs]
    return [(src, math.expm1(e)) for src, e in errors if e is not None]


def test_long_prompts_run_at_the_fused_attention_fraction(catalog):
    """The 32,000-token prompt runs (attention about a third of a dense 32B model's FLOPs there): a paged server's
    attention is always fused, at the backend's flash-attention fraction (fitted on llama.cpp, not on these runs).
    At the plain fraction, as before, the dense runs were predicted 45-53% too slow."""
    dense = _prompt_errors(catalog, prompt_runs(catalog, moe=False, inputs=(32000,)))
    moe = _prompt_errors(catalog, prompt_runs(catalog, inputs=(32000,)))
    print(f"\n32k prompts: dense {', '.join(f'{e:+.2%}' for _, e in dense)}; MoE median over pages {_by_source(moe):.2%}")
    assert len(dense) >= 3 and all(abs(e) <= LONG_DENSE_MAX for _, e in dense)
    assert _by_source(moe) <= LONG_MOE_MEDIAN_MAX


def test_moe_prompt_heavy_out_of_sample(catalog):
    """The MoE prefill factor's own runs (random 2,000- and 4,000-token prompts), each answered with the factors
    fitted without its page; the dense runs of the same pages (no MoE factor in them) say how near the measure
    (prompt tokens over the whole run) comes to a prefill rate."""
    moe = _prompt_errors(catalog, prompt_runs(catalog))
    dense = _prompt_errors(catalog, prompt_runs(catalog, moe=False))
    print(f"\nMoE prompt-heavy runs: median over pages {_by_source(moe):.2%} ({len(moe)} runs); dense: "
          f"{_by_source(dense):.2%} ({len(dense)} runs)")
    assert _by_source(moe) <= MOE_PROMPT_MEDIAN_MAX and _by_source(dense) <= DENSE_PROMPT_MEDIAN_MAX


A100_STEADY = [r for name in ("vllm_moe_tp_sweeps.csv", "vllm_moe_tp_more.csv", "vllm_a100_context.csv")
               for r in csv.DictReader((DATA.parent / name).open(encoding="utf-8"))
               if r["gpu"].startswith("a100") and r["model"] != "qwen3-32b"]
MISSES: dict[tuple[str, str], str] = {}  # held out (the factors fitted without the row's page): (model, tp) -> why
# gpt-oss-120b TP 1 (-43%) and TP 2 (-33%) came in at +2.6% and +18.0% once MXFP4 experts took Marlin's factor and its
# step's stream and products added; GLM-4.6-FP8 TP 8 (+20.2%) at +14.4% once a step no longer multiplied the input
# embedding


@pytest.mark.parametrize("r", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason="issue 27: " + why))
                               if (why := MISSES.get((r["model"], r["tensor_parallel"]))) else r
                               for r in A100_STEADY],
                         ids=lambda r: f"{r['model']}-{r.get('quant') or 'native'}-tp{r['tensor_parallel']}")
def test_moe_under_tensor_parallel_within_20pct(catalog, r):
    """Issue 27's check: steady streams on A100s (1000 requests behind vLLM's 256 running), the median TPOT as a
    per-stream speed within 20%, the paged factors fitted without the row's page."""
    tp = int(r["tensor_parallel"])
    rig = rig_from_flags(catalog, [f"{tp}x{r['gpu']}" if tp > 1 else r["gpu"]])
    opts = Options(runtime="vllm", quant=r.get("quant") or None, ctx=int(r["max_model_len"]),
                   prompt_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
                   concurrency=int(r["num_prompts"]), tensor_parallel=tp if tp > 1 else None)
    s = evaluate(held_out_catalog(catalog, _source(r)), rig, catalog.models[r["model"]], opts).serving
    assert s.running == s.max_num_seqs == 256  # the steady stream the rows are
    err = float(r["median_tpot_ms"]) / (1000 / s.per_stream_decode_tokens_per_s) - 1
    print(f"{r['model']} tp{tp}: {err:+.1%}")
    assert abs(err) <= 0.20
