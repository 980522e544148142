"""SGLang's KV pools by attention kind (advisor/engine/kv_kinds.py) against its source and cited start-up logs.

tests/data/sglang_kind_pool_logs.md holds the logs: a hybrid Mamba2 model's state slots and KV tokens from the
memory its pools logged, and the sliding-window pool's share. Models with no public log are held to SGLang's
formula (pool_configurator.py @003fca80) computed here from their config values, independently of the engine.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine import kv_kinds
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.scenario import Scenario
from advisor.engine.serving import tensor_parallel
from advisor.probe.flags import rig_from_flags

GIB = 1024**3


def _scenario(catalog, model: str, gpus: str, runtime: str = "sglang", **kw) -> Scenario:
    m = catalog.models[model]
    opts = Options(runtime=runtime, **{"ctx": 4096, **kw})
    return Scenario.of(m, catalog.quants["BF16"], catalog.runtimes[runtime], rig_from_flags(catalog, [gpus]), opts,
                       catalog.rules)


def test_hybrid_mamba_pools_from_the_logged_budget(catalog):
    """Nemotron 3 Nano, TP 4, fp8 KV: the 53.38 GiB its pools logged split into 2,211 state slots and 19,644,177
    tokens (search-index file id 70117488909)."""
    sc = _scenario(catalog, "nemotron-3-nano-30b-a3b", "4xh100-sxm", kv_type="fp8", tensor_parallel=4)
    budget = (0.44 + 24.84 + 2 * 14.05) * GIB
    p = kv_kinds.pools(sc, 4, budget)
    assert p.state_slots == 2211
    assert abs(p.tokens / 19644177 - 1) < 0.001
    # what one slot and one token cost, against the logged sizes (two decimals of GiB)
    assert abs(p.slot_bytes * 2212 - (24.84 + 0.44) * GIB) < 0.01 * GIB
    assert abs(p.token_bytes / 2 * 19644177 - 14.05 * GIB) < 0.01 * GIB


def test_gated_deltanet_pools_from_the_logged_budget(catalog):
    """Qwen3.5 397B-A17B, TP 2 on two RTX 4090s: 15.72 GiB of pools hold 82 state slots and 580,364 tokens
    (kvcache-ai/ktransformers#1870)."""
    sc = _scenario(catalog, "qwen3.5-397b-a17b", "2xrtx-4090", tensor_parallel=2)
    p = kv_kinds.pools(sc, 2, (0.13 + 7.29 + 2 * 4.15) * GIB)
    assert p.state_slots == 82
    assert abs(p.tokens / 580364 - 1) < 0.001
    assert abs(p.slot_bytes * 83 - (7.29 + 0.13) * GIB) < 0.01 * GIB


def test_a_bfloat16_scan_state_halves_the_slot(catalog):
    """Case 04 of the same log: --mamba-ssm-dtype bfloat16, ssm_state 24.42 GiB over 4,349 slots."""
    sc = _scenario(catalog, "nemotron-3-nano-30b-a3b", "4xh100-sxm", kv_type="fp8", tensor_parallel=4)
    bf16 = replace(sc, runtime=replace(sc.runtime, recurrent_scan_bytes={"default": 2.0}))
    # the convolution state is the same in both; the scan state halves: f32 slot - bf16 slot = the bf16 scan state
    scan = kv_kinds.pools(sc, 4, GIB).slot_bytes - kv_kinds.pools(bf16, 4, GIB).slot_bytes
    assert abs(scan * 4349 / GIB - 24.42) < 0.02


def test_window_pools_from_the_logged_budget(catalog):
    """Gemma 4 26B-A4B, fp8 KV: the 3.18 GiB its pools logged hold 37,081 full tokens and 29,664 sliding ones
    (search-index file id 70350793512); the 0.80 run's pools are 66,235 and 52,988."""
    sc = _scenario(catalog, "gemma-4-26b-a4b", "rtx-5090", kv_type="fp8")
    p = kv_kinds.pools(sc, 1, 3.18 * GIB)
    assert kv_kinds.window_pool(sc)
    assert p.token_bytes == 5 * 2 * 2 * 512 + 0.8 * 25 * 2 * 8 * 256
    assert abs(p.tokens - 37081) <= 0.005 * GIB / p.token_bytes  # the logged GB have two decimals
    ratio = catalog.runtimes["sglang"].swa_full_tokens_ratio
    assert int(37081 * ratio) == 29664 and int(66235 * ratio) == 52988


def test_the_window_pool_share_is_sglangs_default(catalog):
    """Gemma 4 12B logs full_layer_tokens=1710, swa_layer_tokens=1368 (search-index file id 55801756965)."""
    assert int(1710 * catalog.runtimes["sglang"].swa_full_tokens_ratio) == 1368


@pytest.mark.parametrize("model,gpus,full_layers,window_layers,token_bytes", [
    # gpt-oss-120b: 36 layers, 18 sliding (layer_types), 8 KV heads x 64, bf16: 2 x 8 x 64 x 2 = 2,048 bytes a layer
    ("gpt-oss-120b", "h100-sxm", 18, 18, 2048),
    # Llama 4 Scout, TP 4: 48 layers, 3 of 4 chunked (get_hybrid_layer_ids), 8 KV heads // 4 x 128 x 2 x 2
    ("llama-4-scout", "4xh100-sxm", 12, 36, 2 * 2 * 128 * 2),
])
def test_window_pool_models_pay_the_ratio_on_window_layers(catalog, model, gpus, full_layers, window_layers,
                                                           token_bytes):
    """HybridSWAPoolConfigurator: cell = full x F + 0.8 x window x S; the full pool holds budget // cell."""
    sc = _scenario(catalog, model, gpus)
    free = 20 * GIB
    p = kv_kinds.pools(sc, tensor_parallel(sc), free)
    assert kv_kinds.window_pool(sc)
    assert p.tokens == int(free // ((full_layers + 0.8 * window_layers) * token_bytes))


def test_gemma_3_windows_are_a_mask_only(catalog):
    """Gemma 3 is not in is_hybrid_swa_model: all 62 layers hold the whole length (16 KV heads x 128, bf16)."""
    sc = _scenario(catalog, "gemma-3-27b", "h100-sxm")
    free = 20 * GIB
    assert not kv_kinds.window_pool(sc)
    assert kv_kinds.pools(sc, 1, free).tokens == int(free // (62 * 2 * 16 * 128 * 2))


def test_the_answer_uses_the_pools_by_kind(catalog):
    """End to end: SGLang's pool for a hybrid model is its full-attention tokens (not vLLM's groups), its basis
    says so, and its running requests are capped by the state slots (5 a request); vLLM keeps its groups."""
    rig = rig_from_flags(catalog, ["2xh100-sxm"])
    m = catalog.models["qwen3-next-80b-a3b"]
    sg = evaluate(catalog, rig, m, Options(runtime="sglang", ctx=32768, concurrency=4000)).serving
    sc = _scenario(catalog, "qwen3-next-80b-a3b", "2xh100-sxm", ctx=32768)
    p = kv_kinds.pools(sc, 2, min(d.pool_bytes for d in sg.devices))
    assert sg.kv_cache_tokens == p.tokens
    per = catalog.runtimes["sglang"].recurrent_slots_per_request
    assert per == 3 + 2  # the base ratio and the extra buffer's ping-pong pair under the overlap schedule
    assert sg.max_num_seqs <= p.state_slots // per < 4000
    assert "recurrent-state slots" in sg.basis
    asked = evaluate(catalog, rig, m, Options(runtime="sglang", ctx=32768, concurrency=4000, max_num_seqs=3000))
    assert asked.serving.max_num_seqs == p.state_slots // per  # an asked --max-running-requests is capped alike
    vl = evaluate(catalog, rig, m, Options(runtime="vllm", ctx=32768)).serving
    assert "hybrid KV cache manager" in vl.basis and "recurrent-state slots" not in vl.basis


def test_mla_is_one_latent_a_token_on_every_gpu(catalog):
    """DefaultPoolConfigurator with use_mla_backend: a token costs (kv_lora_rank + qk_rope_head_dim) x layers x the
    cache dtype's bytes on each GPU, not split over the tensor-parallel ranks (DeepSeek V3: 512 + 64, 61 layers)."""
    rig = rig_from_flags(catalog, ["8xh200-sxm"])
    sg = evaluate(catalog, rig, catalog.models["deepseek-v3"], Options(runtime="sglang", quant="fp8", ctx=4096)).serving
    d = min(sg.devices, key=lambda x: x.pool_bytes)
    assert sg.kv_cache_tokens == int(d.pool_bytes // ((512 + 64) * 61 * 2))


def test_full_attention_models_are_unchanged(catalog):
    """A model with one kind of layer keeps the one pool the cited full-attention logs score."""
    sc = _scenario(catalog, "qwen3-8b", "h100-sxm")
    assert not kv_kinds.applies(sc)
