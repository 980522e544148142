"""Serving under real traffic (issue 27): routed experts under tensor and pipeline parallel, requests of
their real lengths in the pool, time to first token for a queue."""

from __future__ import annotations

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags


def _check(catalog, model, gpus, **kw):
    return evaluate(catalog, rig_from_flags(catalog, gpus), catalog.models[model], Options(runtime="vllm", **kw))


@pytest.mark.parametrize("kw", [dict(), dict(split="layer")])
def test_tensor_and_pipeline_parallel_placements_record_their_experts(catalog, kw):
    """Every GPU of a TP group holds 1/tp of each expert (vLLM's FusedMoE shards every expert's matrices),
    every pipeline stage its own layers' experts; together they are all the model's routed experts."""
    r = _check(catalog, "qwen3-30b-a3b", ["2xa100-sxm4-80gb"], **kw)
    p = r.placement
    experts = sum(p.layout.expert_bytes)
    assert experts > 0.9 * p.layout.total_bytes  # (the A3B's 128 experts are nearly all of it)
    assert sum(d.expert_bytes for d in p.devices) == pytest.approx(experts, rel=1e-6)
    assert all(0 < d.expert_bytes <= d.weights_bytes for d in p.devices)


def test_moe_decode_under_tensor_parallel_reads_the_active_experts(catalog):
    """Before issue 27 a TP placement recorded no expert bytes, so a decode step read all 128 experts of
    Qwen3-30B-A3B: TP2 on two A100s came out at 43 tok/s against 148 on one of them. Reading k of E experts,
    two GPUs each reading half of them decode faster than one."""
    one = _check(catalog, "qwen3-30b-a3b", ["a100-sxm4-80gb"]).speed.decode_tokens_per_s
    two = _check(catalog, "qwen3-30b-a3b", ["2xa100-sxm4-80gb"]).speed.decode_tokens_per_s
    assert two > one


def test_a_batch_reads_the_union_of_its_experts(catalog):
    """32 streams choose more experts than one (1 - (1 - k/E)^streams of them): the step reads more bytes, so
    per-stream speed falls further than for a dense model of the same active size would."""
    r = _check(catalog, "qwen3-30b-a3b", ["2xa100-sxm4-80gb"], concurrency=32, prompt_tokens=256, ctx=1024)
    s = r.serving
    assert s.running == 32
    assert s.per_stream_decode_tokens_per_s < r.speed.decode_tokens_per_s
    assert s.aggregate_decode_tokens_per_s > 4 * r.speed.decode_tokens_per_s


def test_tp_and_pp_together_put_experts_on_every_gpu(catalog):
    r = _check(catalog, "qwen3-30b-a3b", ["4xa100-sxm4-80gb"], tensor_parallel=2, pipeline_parallel=2)
    p = r.placement
    assert all(d.expert_bytes > 0 for d in p.devices)
    assert sum(d.expert_bytes for d in p.devices) == pytest.approx(sum(p.layout.expert_bytes), rel=1e-6)


def test_short_chats_share_a_pool_that_holds_few_requests_of_the_full_context(catalog):
    """Issue 27: four short chats on a pool of a few full-context requests (here 3.36 of 131,072 tokens) were
    answered "3 at once, 1 queues"; a paged pool holds pages for the tokens a request has, so they all run."""
    kw = dict(ctx=131072, prompt_tokens=1000, concurrency=4)
    full = _check(catalog, "llama-3.1-8b", ["h100-sxm"], **kw).serving
    real = _check(catalog, "llama-3.1-8b", ["h100-sxm"], output_tokens=500, **kw).serving
    assert full.starts and full.max_concurrency < 4 and full.running == int(full.max_concurrency) < 4
    assert (real.running, real.queued) == (4, 0)
    assert real.request_length_tokens == 1500 and real.output_tokens == 500
    assert real.kv_cache_tokens == full.kv_cache_tokens  # the same pool


def test_clients_beyond_the_running_requests_wait_for_a_slot(catalog):
    """Median TTFT: at most the prefill plus a step while every client runs; beyond max_num_seqs each waiting
    client waits (c - running) / running slot times (Little's law)."""
    kw = dict(ctx=4096, prompt_tokens=1000, output_tokens=500, max_num_seqs=8)
    few = _check(catalog, "llama-3.1-8b", ["h100-sxm"], concurrency=8, **kw).serving
    many = _check(catalog, "llama-3.1-8b", ["h100-sxm"], concurrency=16, **kw).serving
    assert (few.running, few.queued, many.running, many.queued) == (8, 0, 8, 8)
    slot = few.ttft_p50_s + 500 / few.per_stream_decode_tokens_per_s
    assert many.ttft_p50_s == pytest.approx(few.ttft_p50_s + slot, rel=0.02)
    assert many.output_tokens_per_s == pytest.approx(few.output_tokens_per_s, rel=0.05)  # the same 8 slots


def test_traffic_in_text_and_json(catalog, capsys):
    from advisor.cli import main

    args = ["check", "qwen3-30b-a3b", "--gpu", "2xa100-sxm4-80gb", "--runtime", "vllm", "--ctx", "32768",
            "--prompt-tokens", "1000", "--output-tokens", "500", "--concurrency", "64"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "1,500 tokens (1,000 prompt + 500 output)" in text and "median TTFT, 64 clients" in text
    import json

    assert main(args + ["--json"]) == 0
    s = json.loads(capsys.readouterr().out)["serving"]
    assert (s["request_length_tokens"], s["output_tokens"], s["running"]) == (1500, 500, 64)
    assert s["ttft_p50_s"] > s["ttft_s"] > 0 and s["output_tokens_per_s"] > 0
