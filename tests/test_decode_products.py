"""A decode step multiplies what a token multiplies: not the input embedding (a token looks up one row), the output
head only for the rows the step samples, each matrix at its own width (issue 27, fifth pass)."""

from __future__ import annotations

import pytest

from advisor.engine import speed as spd
from advisor.engine.check import _pick, _scenario
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags


def placed(catalog, model: str, gpus: list[str], **opts):
    """(scenario, placement) the answer uses for the ask."""
    rig = rig_from_flags(catalog, gpus)
    pick = _pick(catalog, _scenario(catalog, rig, catalog.models[model], Options(**opts)), None, False)
    return pick.scenario, pick.placer.at(pick.scenario.ctx)


@pytest.mark.parametrize("gpus,opts", [
    (["2xrtx-3090"], {"runtime": "vllm", "quant": "awq"}),                                 # tensor parallel
    (["4xrtx-3090"], {"runtime": "vllm", "quant": "awq", "pipeline_parallel": 2, "tensor_parallel": 2}),  # staged
    (["2xrtx-3090"], {"runtime": "llama.cpp", "quant": "Q4_K_M"}),                         # layer split
    (["2xrtx-3090"], {"runtime": "llama.cpp", "quant": "Q4_K_M", "split": "row"}),         # row split
], ids=["tp", "tp-pp", "layer", "row"])
def test_every_placement_holds_the_embedding_and_head_once(catalog, gpus, opts):
    """The bytes each GPU records as embedding and head add up to the model's own: the head once, the embedding
    once where the runtime keeps it on the GPUs (llama.cpp keeps it in system RAM)."""
    sc, p = placed(catalog, "qwen3-32b", gpus, ctx=8192, **opts)
    lay = sc.layout
    on_gpu = 0 if sc.runtime.embeddings_on_host else lay.embed_bytes
    assert sum(d.head_bytes for d in p.devices) == pytest.approx(lay.output_bytes, rel=1e-3)
    assert sum(d.embed_bytes for d in p.devices) == pytest.approx(on_gpu, rel=1e-3)
    assert all(d.embed_bytes + d.head_bytes <= d.weights_bytes for d in p.devices)


def test_a_tied_embedding_is_the_head(catalog):
    """A PyTorch runtime holds one copy of a tied matrix: the head, multiplied where a row is sampled."""
    sc, p = placed(catalog, "qwen3-0.6b", ["rtx-3090"], runtime="vllm", ctx=4096)
    assert sc.model.tied_embeddings
    assert sum(d.embed_bytes for d in p.devices) == 0
    assert sum(d.head_bytes for d in p.devices) == sc.layout.output_bytes


def test_a_16_bit_embedding_beside_8_bit_layers_is_counted_at_its_width(catalog):
    """An FP8 checkpoint keeps its embedding and head in BF16 (rules/quants.toml fp8): the parameters a token
    multiplies are the model's less the embedding it looks up. Divided by the linear layers' byte, the two 16-bit
    matrices counted as twice their parameters."""
    sc, p = placed(catalog, "qwen3-32b", ["h100-sxm"], runtime="vllm", quant="fp8", ctx=8192)
    t = spd.token_params(sc, p)[0]
    m = sc.model
    embed = m.vocab_size * m.hidden_size
    assert t.head == pytest.approx(embed, rel=1e-3)
    assert t.body + t.experts + t.head == pytest.approx(m.params_total - embed, rel=0.01)


@pytest.mark.parametrize("model", ["qwen3.6-27b", "qwen3.6-35b-a3b"])
def test_nvfp4_mlps_beside_fp8_attention_are_counted_at_their_widths(catalog, model):
    """NVIDIA's Qwen3.6 checkpoints (rules/quants.toml nvfp4-mlp-fp8) store the MLPs and head in 4.5 bits and the
    attention in 8: divided by the attention's byte alone, the 27B's MLPs counted as 0.56 of their parameters and a
    prompt's FLOPs 30% short."""
    sc, p = placed(catalog, model, ["rtx-pro-6000"], runtime="vllm", quant="nvfp4-mlp-fp8", ctx=8192)
    t = spd.token_params(sc, p)[0]
    m = sc.model
    embed = m.vocab_size * m.hidden_size
    routed = m.experts * m.expert_matrices * m.hidden_size * m.moe_intermediate_size * m.layers if m.is_moe else 0
    assert t.head == pytest.approx(embed, rel=1e-3)
    assert t.body == pytest.approx(m.params_total - 2 * embed - routed, rel=0.01)


def test_prompt_tokens_in_a_step_skip_the_head(catalog):
    """The tokens of prompts riding in a decode step multiply every layer but not the head: vLLM computes logits at
    the sampled rows only (one a decoding stream)."""
    sc, p = placed(catalog, "qwen3-32b", ["h100-sxm"], runtime="vllm", ctx=8192)
    t = spd.token_params(sc, p)[0]
    with_prompts = spd.step_flops(t, tokens=300, samples=100)
    assert with_prompts == pytest.approx(2 * ((t.body + t.experts) * 300 + t.head * 100))
    assert with_prompts < 3 * spd.step_flops(t, tokens=100, samples=100)


def test_decode_does_not_stream_the_embedding(catalog):
    """One stream on vLLM reads every weight but the embedding each token: bytes read per token over the GPU's
    bandwidth, the embedding left out (Qwen3 32B's untied 0.78 B-parameter embedding is ~5% of its AWQ file)."""
    sc, p = placed(catalog, "qwen3-32b", ["h100-sxm"], runtime="vllm", quant="awq", ctx=8192)
    d = p.devices[0]
    step = spd.decode_step(sc, p, streams=1)
    g = sc.rig.gpus[0].spec
    bw = g.memory_bandwidth_gb_s * 1e9 * spd.decode_efficiency(g, sc.quant, sc.rules)
    assert d.embed_bytes > 0.04 * d.weights_bytes
    assert step.gpu_s == pytest.approx((d.weights_bytes - d.embed_bytes) / bw, rel=1e-6)
