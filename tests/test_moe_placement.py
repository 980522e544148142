"""MoE models as people run them on llama.cpp today (issue 14): experts fill every GPU first, decode reads
what a token touches, gpt-oss keeps its MXFP4 experts."""

from __future__ import annotations

import pytest

from advisor.catalog.types import GIB
from advisor.engine import memory as mem
from advisor.engine.check import evaluate, resolve_quant
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags


def check(catalog, model, gpus, ram=64, **opts):
    rig = rig_from_flags(catalog, gpus, ram=ram)
    return evaluate(catalog, rig, catalog.models[model], Options(**opts))


def test_qwen3_235b_on_four_3090s_fills_every_gpu(catalog):
    r = check(catalog, "qwen3-235b-a22b", ["4xrtx-3090"], ram=128, quant="Q4_K_M")
    one = check(catalog, "qwen3-235b-a22b", ["rtx-3090"], ram=128, quant="Q4_K_M")
    assert r.placement.strategy == "moe_offload" and r.runs
    assert all(d.total_bytes >= 20 * GIB for d in r.placement.devices), [d.total_bytes / GIB for d in r.placement.devices]
    assert r.speed.decode_tokens_per_s > one.speed.decode_tokens_per_s


def test_gpt_oss_120b_on_two_3090s_fills_both(catalog):
    r = check(catalog, "gpt-oss-120b", ["2xrtx-3090"], ram=64, quant="MXFP4")
    assert r.runs and all(d.total_bytes >= 20 * GIB for d in r.placement.devices)


def test_kimi_k2_on_eight_pro_6000s_fills_all_eight(catalog):
    """Each GPU is left with less than one more layer's experts free (the step it fills in)."""
    r = check(catalog, "kimi-k2", ["8xrtx-pro-6000"], ram=1024, quant="Q8_0")
    step = max(r.placement.layout.expert_bytes)
    assert r.runs and all(0 <= d.free_bytes < step for d in r.placement.devices)


def test_gpt_oss_120b_mxfp4_is_the_files_size(catalog):
    """llama.cpp prints 59.02 GiB for gpt-oss-120b MXFP4 and 11.27 GiB for the 20b (rules/quants.toml)."""
    for model, gib in (("gpt-oss-120b", 59.02), ("gpt-oss-20b", 11.27)):
        layout = mem.weights_layout(catalog.models[model], catalog.quants["MXFP4"])
        assert abs(layout.total_bytes / GIB / gib - 1) < 0.01, (model, layout.total_bytes / GIB)


def test_gpt_oss_requants_keep_mxfp4_experts(catalog):
    m = catalog.models["gpt-oss-120b"]
    mx = mem.weights_layout(m, catalog.quants["MXFP4"])
    for q in ("IQ1_S", "Q2_K", "Q4_K_M"):
        layout = mem.weights_layout(m, resolve_quant(catalog, q))
        assert layout.expert_bytes == mx.expert_bytes
        assert layout.total_bytes > 0.95 * mx.total_bytes


def test_gpt_oss_120b_long_context_on_one_h100_is_mxfp4(catalog):
    r = check(catalog, "gpt-oss-120b", ["h100-sxm"], ctx=131072)
    assert r.quant.id == "MXFP4" and r.fits


def test_gpt_oss_120b_fits_three_3090s(catalog):
    r = check(catalog, "gpt-oss-120b", ["3xrtx-3090"], quant="MXFP4")
    assert r.fits and r.placement.strategy == "layer_split"


CPU_MODELS = ["qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b", "mixtral-8x7b", "llama-3.1-8b", "qwen3-8b",
              "deepseek-v3", "glm-4.5-air", "llama-4-scout"]


@pytest.mark.parametrize("model", CPU_MODELS)
@pytest.mark.parametrize("bw", [25.0, 45.0, 90.0, 460.0])
def test_cpu_only_decode_never_beats_ram_bandwidth(catalog, model, bw):
    """Property: a CPU-only decode cannot read a token's bytes faster than the RAM delivers them:
    attention, dense and shared weights always, k of E routed experts, not the input embedding."""
    rig = rig_from_flags(catalog, [], ram=2048, ram_bandwidth_gb_s=bw)
    m = catalog.models[model]
    r = evaluate(catalog, rig, m, Options(quant="Q4_K_M", ctx=4096))
    if not r.runs:
        return
    layout = r.placement.layout
    experts = sum(layout.expert_bytes)
    per_token = layout.total_bytes - layout.embed_bytes - experts * (1 - (m.experts_active / m.experts if m.experts else 1))
    assert r.speed.decode_tokens_per_s <= bw * 1e9 / per_token * 1.0001


def test_a_batch_reads_the_union_of_chosen_experts(catalog):
    """Eight streams on a CPU read about 1 - (1 - k/E)^8 of the experts, not k/E each: far from 8x."""
    rig = rig_from_flags(catalog, [], ram=128)
    r = evaluate(catalog, rig, catalog.models["qwen3-30b-a3b"], Options(quant="Q4_K_M", concurrency=8, ctx=4096))
    assert r.speed.aggregate_decode_tokens_per_s < 4 * r.speed.decode_tokens_per_s


def test_two_macs_each_keep_their_own_unified_memory(catalog, tmp_path):
    """Two M3 Ultra 512 GB joined by Thunderbolt: the embedding's host RAM is the first Mac's, less what
    its own GPU holds, not less what both GPUs hold (DeepSeek R1 Q6_K was 'does not run' with ~100 GiB
    free per machine)."""
    from advisor.probe.rigfile import load_rig

    path = tmp_path / "macs.toml"
    path.write_text('[rig]\nnetwork = "thunderbolt5"\n\n[[gpu]]\nid = "m3-ultra-512gb"\nnode = 0\n\n'
                    '[[gpu]]\nid = "m3-ultra-512gb"\nnode = 1\n')
    rig = load_rig(catalog, path)
    r = evaluate(catalog, rig, catalog.models["deepseek-r1"], Options(quant="Q6_K"))
    assert r.runs and r.fits, r.placement.problem
