"""A paged server's MoE decode step by the kernel its experts take (issue 27, sixth pass): vLLM runs MXFP4 experts
through Marlin on Ampere and Ada and through triton_kernels on Hopper (rules/speed.toml [decode] moe_kernels), each
with a factor fitted on its own runs, and their steps' weight stream and products add (family_moe_serial); the fused-MoE
kernel keeps the roofline."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.engine import speed as spd
from test_decode_products import placed


@pytest.mark.parametrize("model,gpu,runtime,quant,key", [
    ("gpt-oss-20b", "a100-sxm4-80gb", "vllm", None, "paged:mxfp4-marlin"),
    ("gpt-oss-20b", "rtx-4090", "vllm", None, "paged:mxfp4-marlin"),      # Ada: Marlin too (triton_kernels: SM90+)
    ("gpt-oss-20b", "h100-sxm", "vllm", None, "paged:mxfp4-triton"),
    ("gpt-oss-20b", "h100-sxm", "sglang", None, "paged:mxfp4-triton"),    # the family's key: SGLang shares it
    ("gpt-oss-20b", "mi300x", "vllm", None, "paged"),                     # ROCm: no runs of its own, the family's
    ("gpt-oss-20b", "b200", "vllm", None, "paged"),                       # SM100: FlashInfer, no runs of its own
    ("qwen3-30b-a3b", "a100-sxm4-80gb", "vllm", None, "paged"),           # 16-bit experts: the fused-MoE kernel
    ("qwen3.6-35b-a3b", "h100-sxm", "vllm", "NVFP4", "paged"),            # MXFP4's kernel class, not its kernels
], ids=lambda v: str(v))
def test_the_experts_kernel_keys_the_decode_factor(catalog, model, gpu, runtime, quant, key):
    sc, _ = placed(catalog, model, [gpu], runtime=runtime, quant=quant, ctx=8192)
    g = catalog.gpus[gpu]
    assert spd.moe_decode_key(sc, g) == key
    table = catalog.rules.speed.decode
    assert spd.moe_decode_factor(sc, g) == table.family_moe_compute[key]
    # the MXFP4 kernels add stream and products; the fused-MoE kernel keeps the roofline
    assert spd.moe_decode_serial(sc, g) == (1.0 if ":" in key else 0.0) == table.family_moe_serial.get(key, 0.0)


def test_llama_cpp_keeps_its_own_moe_step(catalog):
    """llama.cpp's MXFP4 GGUF on an A100 takes none of the paged tables: factor 1, the longer of stream and
    products."""
    sc, _ = placed(catalog, "gpt-oss-20b", ["a100-sxm4-80gb"], runtime="llama.cpp", ctx=8192)
    g = catalog.gpus["a100-sxm4-80gb"]
    assert sc.quant.kernel == "mxfp4"
    assert (spd.moe_decode_factor(sc, g), spd.moe_decode_serial(sc, g)) == (1.0, 0.0)


def _with_serial(sc, share: float):
    dec = dataclasses.replace(sc.rules.speed.decode, family_moe_serial={"paged": share})
    rules = dataclasses.replace(sc.rules, speed=dataclasses.replace(sc.rules.speed, decode=dec))
    return dataclasses.replace(sc, rules=rules)


def test_a_moe_steps_stream_and_products_add(catalog):
    """At share 1 a step takes its weight stream plus its products; at 0 the longer of the two (the roofline); the
    difference is the shorter, here the stream of every expert 512 tokens choose."""
    sc, p = placed(catalog, "gpt-oss-20b", ["a100-sxm4-80gb"], runtime="vllm", ctx=8192)
    g = catalog.gpus["a100-sxm4-80gb"]
    added, longer = (spd.decode_step(_with_serial(sc, s), p, streams=512).gpu_s for s in (1.0, 0.0))
    stream = spd.active_device_bytes(p, sc.model, 512)[0] / (g.memory_bandwidth_gb_s * 1e9 *
                                                            spd.decode_efficiency(g, sc.quant, sc.rules))
    products = spd.step_flops(spd.token_params(sc, p)[0], 512, 512) / spd.decode_flops_per_s(sc, g)
    assert longer == pytest.approx(max(stream, products), rel=1e-9)
    assert added - longer == pytest.approx(min(stream, products), rel=1e-9) and min(stream, products) > 0


def test_a_dense_model_keeps_the_roofline(catalog):
    """The share is a MoE step's: a dense model's step is the longer of its stream and its products."""
    sc, p = placed(catalog, "qwen3-32b", ["a100-sxm4-80gb"], runtime="vllm", ctx=8192)
    assert spd.moe_decode_serial(sc, catalog.gpus["a100-sxm4-80gb"]) == 0.0
    assert spd.decode_step(_with_serial(sc, 1.0), p, streams=256).gpu_s == spd.decode_step(sc, p, streams=256).gpu_s
