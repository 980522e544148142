"""The NVLink verdict on the scenarios the published evidence settles
(../shared/research/interconnect-evidence.md), and its properties."""

from __future__ import annotations


import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags


def verdict(catalog, model, gpus, pcie=None, nvlink=False, **opts):
    rig = rig_from_flags(catalog, gpus, nvlink=nvlink, pcie=pcie, ram=128)
    return evaluate(catalog, rig, catalog.models[model], Options(**opts))


@pytest.mark.parametrize("pcie", [None, "4x8", "3x4", "3x1", "2x1"])
def test_layer_split_never_needs_nvlink(catalog, pcie):
    r = verdict(catalog, "llama-3.1-70b", ["4xrtx-3090"], pcie=pcie, quant="Q4_K_M")
    assert r.placement.strategy == "layer_split"
    assert r.interconnect.nvlink == "not_needed" and r.interconnect.nvlink_speedup < 1.05


def test_one_stream_tensor_parallel_decode_gains_little(catalog):
    for model, quant in (("qwen2.5-32b", "awq"), ("qwen3-32b", "gptq")):
        r = verdict(catalog, model, ["2xrtx-3090"], quant=quant, runtime="vllm", ctx=4096)
        assert r.placement.strategy == "tensor_parallel" and r.fits
        assert r.interconnect.nvlink_speedup < 1.2


def test_llama_cpp_row_split_gains_only_the_peer_copies_from_nvlink(catalog):
    """llama.cpp -sm row synchronises every split matrix; NVLink turns the host-staged copies of a GeForce
    pair into peer copies (rules/interconnect.toml [row_split] per_gpu_us) and moves nothing else: a
    modest gain, never `needed` (tests/test_row_split.py holds the rest)."""
    r = verdict(catalog, "llama-3.1-70b", ["2xrtx-3090"], quant="Q4_K_M", split="row")
    assert r.interconnect.nvlink in ("not_needed", "helps")
    assert 1.0 < r.interconnect.nvlink_speedup < 1.25


@pytest.mark.parametrize("opts", [{"prompt_tokens": 8192}, {"concurrency": 16, "ctx": 2048}])
def test_long_prompts_and_concurrency_make_it_help(catalog, opts):
    r = verdict(catalog, "qwen3-32b", ["2xrtx-3090"], quant="gptq", runtime="vllm", **opts)
    assert r.fits and r.interconnect.nvlink in ("helps", "needed")
    assert r.interconnect.nvlink_speedup >= 1.1


def test_tensor_parallel_over_x1_risers_spends_its_time_on_the_link(catalog):
    r = verdict(catalog, "qwen3-32b", ["4xrtx-3090"], pcie="3x1", quant="gptq", runtime="vllm")
    assert r.interconnect.link_time_share > 0.3
    assert r.interconnect.nvlink in ("helps", "needed")
    assert any(f.code == "NVL004" and "x4/x1" in f.message for f in r.findings)


def test_a_bridged_pair_is_not_told_to_patch_in_p2p_instead(catalog):
    """P2P is the cheap stand-in for a bridge: a pair that has NVLink is not sent after it, a pair without is."""
    bridged = verdict(catalog, "qwen3.6-27b", ["2xrtx-3090"], nvlink=True, quant="awq", runtime="vllm", concurrency=4)
    bare = verdict(catalog, "qwen3.6-27b", ["2xrtx-3090"], quant="awq", runtime="vllm", concurrency=4)
    said = {name: " ".join(f.message for f in r.findings if f.code == "NVL004") for name, r in
            (("bridged", bridged), ("bare", bare))}
    assert "P2P" not in said["bridged"] and "P2P" in said["bare"], said


def test_full_finetune_over_pcie_wants_nvlink(catalog):
    r = verdict(catalog, "llama-3.1-8b", ["4xrtx-a6000"], workload="full-finetune")
    assert r.interconnect.nvlink in ("helps", "needed")


def test_lora_ddp_does_not_need_it(catalog):
    r = verdict(catalog, "llama-3.1-8b", ["2xrtx-4090"], workload="lora")
    assert r.interconnect.nvlink == "not_needed"


def test_fsdp_qlora_70b_on_two_3090s_is_helped_by_nvlink(catalog):
    # FSDP+QLoRA gathers the 4-bit weights every step (issue 17; it was a layer split before); Answer.AI's
    # own 2x 3090 benchmarks conclude "If you have two 3090s and a non-workstation motherboard, you'll want
    # NVLink" (fsdp_qlora benchmarks_03_2024.md)
    r = verdict(catalog, "llama-3.1-70b", ["2xrtx-3090"], workload="qlora")
    assert "FSDP+QLoRA" in r.training.strategy and r.interconnect.nvlink in ("helps", "needed")


def test_one_gpu_is_not_applicable(catalog):
    for workload in ("inference", "full-finetune"):
        assert verdict(catalog, "llama-3.1-8b", ["rtx-4090"], workload=workload).interconnect.nvlink == "not_applicable"


def test_a_rig_with_nvlink_is_judged_against_pcie(catalog):
    with_bridge = verdict(catalog, "qwen3-32b", ["2xrtx-3090"], nvlink=True, quant="gptq", runtime="vllm",
                          prompt_tokens=8192)
    without = verdict(catalog, "qwen3-32b", ["2xrtx-3090"], quant="gptq", runtime="vllm", prompt_tokens=8192)
    assert with_bridge.interconnect.nvlink == without.interconnect.nvlink
    assert with_bridge.speed.prefill_tokens_per_s > without.speed.prefill_tokens_per_s


ORDER = {"not_applicable": 0, "not_needed": 0, "helps": 1, "needed": 2}


@pytest.mark.parametrize("model,quant,runtime", [("qwen3-32b", "gptq", "vllm"), ("llama-3.1-70b", "Q4_K_M", "llama.cpp")])
def test_a_faster_link_never_makes_the_verdict_worse(catalog, model, quant, runtime):
    links = ["3x1", "3x4", "3x8", "4x8", "4x16", "5x16"]
    seen = []
    for pcie in links:
        r = verdict(catalog, model, ["2xrtx-3090"], pcie=pcie, quant=quant, runtime=runtime, prompt_tokens=4096)
        seen.append((ORDER[r.interconnect.nvlink], r.interconnect.link_time_share))
    assert [s[0] for s in seen] == sorted((s[0] for s in seen), reverse=True)
    assert [s[1] for s in seen] == sorted((s[1] for s in seen), reverse=True)


def _two_boxes(tmp_path, gpu="rtx-3090", network="10gbe"):
    path = tmp_path / "two.toml"
    path.write_text(f'[rig]\nram_gib = 64\nnetwork = "{network}"\n'
                    f'[[gpu]]\nid = "{gpu}"\ncount = 2\nnode = 0\n[[gpu]]\nid = "{gpu}"\ncount = 2\nnode = 1\n')
    return path


def test_layer_split_across_machines_is_fine(catalog, tmp_path):
    from advisor.probe.rigfile import load_rig

    rig = load_rig(catalog, _two_boxes(tmp_path))
    r = evaluate(catalog, rig, catalog.models["llama-3.1-70b"], Options(quant="Q8_0"))
    assert r.placement.strategy == "layer_split" and r.interconnect.link_time_share < 0.02
    assert any(f.code == "NVL005" and f.severity == "info" for f in r.findings)


def test_vllm_keeps_tensor_parallel_inside_each_machine_by_default(catalog, tmp_path):
    """vLLM's docs: tensor_parallel_size = GPUs per node, pipeline_parallel_size = nodes (was TP over all four)."""
    from advisor.probe.rigfile import load_rig

    rig = load_rig(catalog, _two_boxes(tmp_path))
    r = evaluate(catalog, rig, catalog.models["qwen2.5-72b"], Options(quant="awq", runtime="vllm"))
    assert r.placement.tp_size == 2 and r.interconnect.link_time_share < 0.2
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 2" in r.launch.command


def test_tensor_parallel_across_machines_is_warned_against(catalog, tmp_path):
    from advisor.probe.rigfile import load_rig

    rig = load_rig(catalog, _two_boxes(tmp_path))
    r = evaluate(catalog, rig, catalog.models["qwen2.5-72b"], Options(quant="awq", runtime="vllm", tensor_parallel=4))
    assert r.placement.strategy == "tensor_parallel" and r.interconnect.link_time_share > 0.2
    assert any(f.code == "NVL005" and f.severity == "warning" and "pipeline" in f.message for f in r.findings)


def test_a_rig_file_spanning_machines_must_name_its_network(catalog, tmp_path):
    from advisor.errors import AdvisorError
    from advisor.probe.rigfile import load_rig

    path = tmp_path / "bad.toml"
    path.write_text('[[gpu]]\nid = "rtx-3090"\nnode = 0\n[[gpu]]\nid = "rtx-3090"\nnode = 1\n')
    with pytest.raises(AdvisorError, match="network"):
        load_rig(catalog, path)


def test_gpus_across_cpu_sockets_get_a_slower_link(catalog):
    from dataclasses import replace as _replace

    from advisor.engine.interconnect import gpu_link

    rig = rig_from_flags(catalog, ["2xa100-pcie-80gb"], ram=256)
    near = gpu_link(_replace(rig, topology=(("X", "PIX"), ("PIX", "X"))), 0, 1, catalog.rules)
    far = gpu_link(_replace(rig, topology=(("X", "SYS"), ("SYS", "X"))), 0, 1, catalog.rules)
    assert near.kind == "pcie_p2p" and far.kind == "pcie_host" and far.gb_s < near.gb_s
    assert "sockets" in far.label


def test_cpu_offload_copies_do_not_ride_nvlink(catalog):
    """FSDP with CPU offload copies each GPU's shard from system RAM over its own PCIe link before the layers are
    gathered between the GPUs: NVLink speeds up the gather only, so it buys less than for the same sharding
    without offload (issue 26: offload claimed the whole transfer as NVLink's gain)."""
    off = verdict(catalog, "llama-3.1-70b", ["2xrtx-3090"], workload="qlora", sharding="fsdp-offload")
    full = verdict(catalog, "llama-3.1-70b", ["2xrtx-3090"], workload="qlora", sharding="fsdp")
    assert off.training.sharding == "offload" and full.training.sharding == "zero3"
    assert 1.0 < off.interconnect.nvlink_speedup < full.interconnect.nvlink_speedup
    assert "copies the shards from system RAM" in off.interconnect.summary


def test_cpu_offload_gain_is_bounded_by_the_host_link(catalog):
    """With CPU offload the step waits for the shards' copies over each GPU's own PCIe link whatever joins the
    GPUs: the verdict states that bound, and its NVLink speedup stays under it (issue 26)."""
    import re

    off = verdict(catalog, "llama-3.1-70b", ["2xrtx-3090"], workload="qlora", sharding="fsdp-offload")
    said = off.interconnect.summary
    bound = float(re.search(r"more than ([0-9.]+)x as fast", said).group(1))
    assert "host link bounds the step" in said
    assert 1.0 < off.interconnect.nvlink_speedup <= bound
