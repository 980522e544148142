"""Paged-KV serving (vLLM): the pool, max concurrency, queueing, remedies; runtime x hardware rules."""

from __future__ import annotations

import json

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.plan import make_plan
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags

GIB = 1024**3


def _check(catalog, model, gpus, **kw):
    return evaluate(catalog, rig_from_flags(catalog, gpus), catalog.models[model], Options(runtime="vllm", **kw))


@pytest.mark.parametrize("model,gpus,kw", [
    ("llama-3.1-8b", ["h100-sxm"], dict(concurrency=64)),
    ("qwen3-32b", ["2xrtx-3090"], dict(quant="awq", concurrency=16)),
    ("qwen2.5-32b", ["2xrtx-3090"], dict(quant="awq", split="tensor", prompt_tokens=16384, ctx=32768, concurrency=8)),
])
def test_the_issues_examples_start_with_a_pool(catalog, model, gpus, kw):
    """Issue 15: these said DOES NOT RUN because concurrency x context was reserved like llama.cpp slots."""
    r = _check(catalog, model, gpus, **kw)
    s = r.serving
    assert r.runs and s is not None and s.starts
    assert s.kv_cache_tokens >= r.context_tokens
    assert s.max_concurrency == pytest.approx(s.kv_cache_tokens / r.context_tokens, abs=0.01)
    assert s.running + s.queued == kw["concurrency"]
    assert 1 <= s.running <= min(s.max_num_seqs, int(s.max_concurrency))
    assert s.aggregate_decode_tokens_per_s > s.per_stream_decode_tokens_per_s > 0
    assert s.ttft_s > 0


def test_pool_is_what_weights_and_overhead_leave_in_whole_pages(catalog):
    r = _check(catalog, "llama-3.1-8b", ["h100-sxm"])
    d = r.placement.devices[0]
    free = d.capacity_bytes - d.weights_bytes - d.overhead_bytes
    per_token = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads of 128, 16-bit
    assert d.kv_cache_bytes == per_token * r.context_tokens  # the placement holds one request
    assert r.serving.kv_cache_tokens == free // (per_token * 16) * 16
    assert r.serving.kv_cache_bytes == free


def test_concurrency_queues_beyond_the_pool_and_max_num_seqs(catalog):
    r = _check(catalog, "qwen2.5-32b", ["2xrtx-3090"], quant="awq", ctx=32768, concurrency=8)
    assert r.serving.running == int(r.serving.max_concurrency) < 8
    capped = _check(catalog, "llama-3.1-8b", ["h100-sxm"], concurrency=64, max_num_seqs=4)
    assert (capped.serving.running, capped.serving.queued) == (4, 60)


def test_eager_and_a_larger_fraction_grow_the_pool(catalog):
    base = _check(catalog, "llama-3.1-8b", ["rtx-4090"]).serving.kv_cache_tokens
    assert _check(catalog, "llama-3.1-8b", ["rtx-4090"], enforce_eager=True).serving.kv_cache_tokens > base
    assert _check(catalog, "llama-3.1-8b", ["rtx-4090"], memory_fraction=0.95).serving.kv_cache_tokens > base
    assert _check(catalog, "llama-3.1-8b", ["rtx-4090"], kv_type="fp8").serving.kv_cache_tokens > 1.9 * base


def test_70b_on_two_3090s_at_8k_is_on_the_edge_and_says_what_gives_room(catalog):
    """At 8k one AWQ 70B request is within vLLM's start-to-start spread of the pool (starting or not), so
    the answer names what gives it room either way (SRV002 when it does not start, SRV003 when barely)."""
    r = _check(catalog, "llama-3.1-70b", ["2xrtx-3090"])
    spread = int(r.runtime.pool_spread_mib * 1024**2)
    assert r.quant.id == "awq" and abs(r.serving.spare_bytes) < spread
    said = [f for f in r.findings if f.code in ("SRV002", "SRV003")]
    assert said and "--gpu-memory-utilization 0.95" in said[0].message and "--kv-cache-dtype fp8" in said[0].message


def test_70b_on_two_3090s_names_what_would_make_it_start(catalog):
    r = _check(catalog, "llama-3.1-70b", ["2xrtx-3090"], quant="awq", ctx=16384)
    assert not r.runs and not r.serving.starts
    options = {m.option: m for m in r.serving.remedies}
    assert "--kv-cache-dtype fp8" in options and "--gpu-memory-utilization 0.95" in options
    assert "--enforce-eager" in options
    assert any(m.option.startswith("--max-model-len ") and m.max_context_tokens < 16384 for m in r.serving.remedies)
    assert any(m.starts and m.kv_cache_tokens >= 16384 for m in r.serving.remedies)
    srv = [f for f in r.findings if f.code == "SRV002"]
    assert srv and "--gpu-memory-utilization 0.95" in srv[0].message


def test_pipeline_stages_are_checked_on_their_own_cards(catalog):
    """vLLM cuts equal stages: the 12 GB card's stage decides, not the pooled 36 GB."""
    r = _check(catalog, "qwen2.5-14b", ["rtx-3090", "rtx-3060-12gb"], quant="awq", pipeline_parallel=2)
    assert r.placement.strategy == "layer_split"
    layers = [d.layers for d in r.placement.devices]
    assert layers == [24, 24]
    tokens = [d.pool_tokens for d in r.serving.devices]
    assert r.serving.kv_cache_tokens == min(tokens) == tokens[1] < tokens[0]


def test_options_a_runtime_lacks_are_refused(catalog):
    rig = rig_from_flags(catalog, ["2xrtx-3090"])
    with pytest.raises(AdvisorError):
        evaluate(catalog, rig, catalog.models["llama-3.1-8b"], Options(tensor_parallel=2))
    with pytest.raises(AdvisorError):
        evaluate(catalog, rig, catalog.models["llama-3.1-8b"], Options(runtime="vllm", tensor_parallel=4))


def test_vllm_refuses_pascal_with_the_rule_and_the_alternative(catalog):
    r = _check(catalog, "llama-3.1-70b", ["4xtesla-p40"])
    assert not r.runs and r.serving is None
    cmp = [f for f in r.findings if f.code == "CMP001"]
    assert len(cmp) == 1 and cmp[0].severity == "error"
    assert "compute capability 7" in cmp[0].message and "6.1" in cmp[0].message and "llama.cpp" in cmp[0].message
    assert not any(f.code in ("FIT002", "QNT001") for f in r.findings)


def test_vllm_refuses_a_gpu_without_its_back_ends(catalog):
    """A Radeon 780M is AMD but driven through Vulkan: vLLM has CUDA and ROCm back-ends only, so it is
    refused with the back-end named, and vLLM is not offered on it; an RX 7900 XTX (ROCm) still runs."""
    r = _check(catalog, "qwen3-8b", ["radeon-780m-32gb"])
    assert not r.runs and "vulkan" in r.refusal and "vllm" not in r.refusal.split("--runtime", 1)[1]
    assert _check(catalog, "qwen3-8b", ["rx-7900-xtx"]).runs


def test_quant_kernels_below_their_minimum_are_never_chosen(catalog):
    """V100 is 7.0: vLLM's AWQ kernels need 7.5, so the ladder skips awq; asked for, it is refused."""
    r = _check(catalog, "llama-3.1-8b", ["v100-sxm2-32gb"])
    assert r.quant.id != "awq"
    asked = _check(catalog, "llama-3.1-8b", ["v100-sxm2-32gb"], quant="awq")
    assert not asked.runs and "7.5" in asked.refusal


def test_exllamav2_refuses_gpt_oss(catalog):
    rig = rig_from_flags(catalog, ["4xrtx-3090"])
    r = evaluate(catalog, rig, catalog.models["gpt-oss-120b"], Options(runtime="exllamav2"))
    assert not r.runs and "gpt-oss" in r.refusal and "llama.cpp" in r.refusal


def test_plan_never_proposes_what_the_runtime_cannot_run(catalog):
    p = make_plan(catalog, catalog.models["llama-3.1-70b"], Options(runtime="vllm"), min_tps=20, used=True, top=50)
    assert p.options
    assert not any(g[1] == "tesla-p40" for o in p.options for g in o.gpus)


def test_serving_json_and_options_on_the_cli(run_cli):
    out = run_cli("check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--max-model-len", "8192",
                  "--kv-cache-dtype", "fp8", "--gpu-memory-utilization", "0.95", "--enforce-eager",
                  "--concurrency", "4", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    s = d["serving"]
    for key in ("kv_cache_tokens", "kv_cache_bytes", "max_concurrency", "queued", "running"):
        assert key in s
    assert d["context_tokens"] == 8192 and d["kv_cache_type"] == "fp8" and s["memory_fraction"] == 0.95
    assert s["running"] + s["queued"] == 4
    bad = run_cli("check", "llama-3.1-8b", "--gpu", "rtx-3090", "--tensor-parallel-size", "2")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_vllm_quant_kernels_follow_the_gpu_backend(catalog):
    """vLLM has no AWQ kernels on ROCm (its quantization hardware table): AMD rigs are never planned with
    AWQ and an explicit --quant awq is refused with the reason."""
    r = _check(catalog, "llama-3.1-70b", ["2xrx-7900-xtx"])
    assert r.quant.id != "awq" and not r.refusal
    asked = _check(catalog, "llama-3.1-70b", ["2xrx-7900-xtx"], quant="awq")
    assert not asked.runs and "rocm" in asked.refusal
    p = make_plan(catalog, catalog.models["llama-3.1-70b"], Options(runtime="vllm"), min_tps=20, used=True, top=50)
    assert p.options and not any(g[1] == "rx-7900-xtx" for o in p.options for g in o.gpus)
