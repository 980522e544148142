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
