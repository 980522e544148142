"""Issue 16's catalog gaps (Granite 4.0-H, Nemotron-H, Gemma 3n, GLM-4.7, Qwen2.5-VL, Kimi K2 Thinking and
the GPUs users asked about): listed by the CLI, each sourced, the hybrids' layer kinds as their configs say,
and the computed weights against published file sizes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.catalog.load import load_catalog
from advisor.engine import layers
from advisor.engine import memory as mem
from advisor.engine.check import resolve_quant

NEW_MODELS = ["granite-4.0-h-small", "granite-4.0-h-tiny", "granite-4.0-h-micro", "nemotron-h-8b", "nemotron-h-47b",
              "nemotron-h-56b", "gemma-3n-e2b", "gemma-3n-e4b", "glm-4.7", "qwen2.5-vl-7b", "qwen2.5-vl-72b",
              "kimi-k2-thinking"]

NEW_GPUS = ["mi50-32gb", "m5-32gb", "radeon-780m-32gb", "a10g", "radeon-890m-64gb"]

CAT = load_catalog(False)


def _ids(kind: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "advisor", kind, "--json"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return {row["id"] for row in json.loads(out)}


def test_new_models_are_listed_and_sourced() -> None:
    assert set(NEW_MODELS) <= _ids("models")
    for mid in NEW_MODELS:
        spec = CAT.models[mid]
        assert spec.sources and all(s.strip() for s in spec.sources), mid
        assert any("http" in s or s.startswith(("github:", "search-index")) for s in spec.sources), mid


@pytest.mark.parametrize("mid, kv, rec", [
    ("granite-4.0-h-small", 4, 36), ("granite-4.0-h-tiny", 4, 36), ("granite-4.0-h-micro", 4, 36),  # card: 4 attention / 36 Mamba2
    ("nemotron-h-56b", 10, 54), ("nemotron-h-47b", 5, 45), ("nemotron-h-8b", 4, 24),  # hybrid_override_pattern's * and M
])
def test_hybrids_keep_kv_only_on_their_attention_layers(mid: str, kv: int, rec: int) -> None:
    spec = CAT.models[mid]
    assert (layers.kv_layer_count(spec), layers.recurrent_layer_count(spec)) == (kv, rec)
    assert spec.recurrent is not None and spec.recurrent.kind == "mamba2"


def test_gemma_3n_shares_kv_and_keeps_per_layer_embeddings() -> None:
    e4b, e2b = CAT.models["gemma-3n-e4b"], CAT.models["gemma-3n-e2b"]
    assert e4b.layer_pattern.count("-") == 15 and e2b.layer_pattern.count("-") == 10  # num_kv_shared_layers
    assert e4b.per_layer_embed_params == 262144 * 35 * 256 and e2b.per_layer_embed_params == 262144 * 30 * 256


def test_glm_4_7_is_glm_4_6_shaped_with_its_own_name() -> None:
    a, b = CAT.models["glm-4.7"], CAT.models["glm-4.6"]
    for field in ("params_total", "params_active", "layers", "hidden_size", "experts", "max_context"):
        assert getattr(a, field) == getattr(b, field), field


def test_kimi_k2_thinking_is_its_own_release() -> None:
    thinking, instruct = CAT.models["kimi-k2-thinking"], CAT.models["kimi-k2"]
    assert thinking.max_context == 262144 and instruct.max_context == 131072
    assert thinking.native_quant == "int4-g32-experts" and not instruct.native_quant
    assert "moonshotai/Kimi-K2-Thinking" in thinking.aliases
    assert "moonshotai/Kimi-K2-Thinking" not in instruct.other_releases
    assert "moonshotai/Kimi-K2-Instruct-0905" in instruct.other_releases
    # routed experts at 4 + 16/32 bits, everything else BF16: 1,014,686,023,680 x 4.5 + 11,722,208,768 x 16 bits
    layout = mem.weights_layout(thinking, resolve_quant(CAT, "int4-g32-experts"))
    assert abs(layout.total_bytes - 594_205_305_856) / 594_205_305_856 < 0.001


# Published GGUF sizes (Ollama library pages, decimal GB as shown, 2 significant figures).
@pytest.mark.parametrize("mid, quant, published_gb, source", [
    ("granite-4.0-h-small", "Q6_K", 26, "https://ollama.com/ibm/granite4:small-h-q6_K/blobs/a15d0868faf9"),
    ("granite-4.0-h-tiny", "Q4_K_M", 4.2, "https://ollama.com/library/granite4:tiny-h/blobs/9811e90b0eec"),
])
def test_weights_match_published_file_sizes(mid: str, quant: str, published_gb: float, source: str) -> None:
    layout = mem.weights_layout(CAT.models[mid], resolve_quant(CAT, quant))
    gb = layout.total_bytes / 1e9
    assert abs(gb - published_gb) / published_gb < 0.05, f"{mid} {quant}: {gb:.2f} GB vs {published_gb} GB ({source})"


def test_new_gpus_are_listed_and_sourced() -> None:
    assert set(NEW_GPUS) <= _ids("gpus")
    for gid in NEW_GPUS:
        spec = CAT.gpus[gid]
        assert spec.sources and spec.fp16_tflops_basis, gid


def test_gpu_capacities_as_the_driver_reports_them() -> None:
    # amdgpu mem_info_vram_total of a Radeon Instinct MI50 32GB: 34,359,738,368 bytes
    assert CAT.gpus["mi50-32gb"].vram_gib * 2**30 == 34_359_738_368
    # the iGPU and Apple entries hold the whole unified memory, as the other unified entries do
    for gid in ("m5-32gb", "radeon-780m-32gb"):
        assert CAT.gpus[gid].unified_memory and CAT.gpus[gid].vram_gib == 32
    # dual-channel DDR5-5600: 2 x 8 bytes x 5600 MT/s
    assert CAT.gpus["radeon-780m-32gb"].memory_bandwidth_gb_s == 2 * 8 * 5600 / 1000


def test_a10g_is_the_aws_variant_of_the_a10() -> None:
    g, a10 = CAT.gpus["a10g"], CAT.gpus["a10"]
    # nvidia-smi -q -x of an A10G (shared/data/nvidia_smi/telegraf_a10g_drv515.xml): 23028 MiB, 300 W
    assert g.vram_gib * 1024 == 23028 and g.power_w == 300
    # the same 384-bit GDDR6 at 12.5 Gbps as the A10 (Baseten: 600 GB/s for both)
    assert abs(g.memory_bandwidth_gb_s - a10.memory_bandwidth_gb_s) < 1
    # 80 SMs x 512 dense FP16 FLOP/clk/SM x 1.71 GHz: half the A10's per-SM tensor rate
    assert abs(g.fp16_tflops - 80 * 512 * 1.71e9 / 1e12) < 0.1
    assert abs(a10.fp16_tflops - 72 * 1024 * 1.695e9 / 1e12) < 0.1


def test_radeon_890m_is_a_real_hx_370_machine() -> None:
    g = CAT.gpus["radeon-890m-64gb"]
    # Framework Laptop 13, Ryzen AI 9 HX 370: 2 x 32 GB DDR5-5600 SO-DIMMs on the 128-bit bus
    assert g.unified_memory and g.vram_gib == 64
    assert g.memory_bandwidth_gb_s == 2 * 8 * 5600 / 1000
    # 16 RDNA 3.5 CUs at 2.9 GHz x 512 dense FP16 FLOP/clk/CU, the per-CU rate of the Strix Halo entry
    halo = CAT.gpus["ryzen-ai-max-395-128gb"]
    assert abs(g.fp16_tflops - 16 * 512 * 2.9e9 / 1e12) < 0.01
    assert abs(halo.fp16_tflops / 40 - g.fp16_tflops / 16) < 0.01
