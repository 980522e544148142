"""Where every byte goes: weights per layer, KV cache per layer, runtime buffers per GPU.

Pure arithmetic over catalog entries and the rulebook. Exact where the architecture makes it
exact (KV cache, F16 weights); whole-model bits per weight for quantized catalog models.
"""

from __future__ import annotations

import math
from functools import lru_cache

from advisor.record import Record, record
from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import GIB, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine import layers

MIB = 1024**2


@record
class WeightsLayout(Record):
    """A model's weights at one quantization, cut where the runtimes cut them."""

    total_bytes: int
    """All weights, as in the model file."""
    embed_bytes: int
    """Token-embedding matrix (input layer)."""
    output_bytes: int
    """Output head on its device (the embedding matrix again when tied: llama.cpp duplicates it)."""
    layer_bytes: tuple[int, ...]
    """Each repeating layer's weights (attention, norms, MLP or experts)."""
    expert_bytes: tuple[int, ...]
    """Each layer's routed-expert weights (0 for dense layers): what MoE offload moves to RAM."""
    unloaded_bytes: int = 0
    """In the file but not loaded by default: multi-token-prediction layers past the layer count."""

    @property
    def gpu_resident_total(self) -> int:
        """Bytes on GPUs when the input embedding stays on the host (llama.cpp)."""
        return sum(self.layer_bytes) + self.output_bytes


@lru_cache(maxsize=1024)
def weights_layout(model: ModelSpec, quant: QuantSpec) -> WeightsLayout:
    """Split the model's parameters into embedding, output head and per-layer shares.

    Per-layer parameters come from the total minus embedding and head, so the sum is exact to the
    catalog's parameter count. MoE layers carry their experts; leading dense layers their dense MLP.
    """
    bpw = quant.bits_per_weight
    embed = model.vocab_size * model.hidden_size
    head = 0 if model.tied_embeddings else embed
    ple = model.per_layer_embed_params  # Gemma 3n/4: looked up with the token embedding, on the host
    body = max(model.params_total - embed - head - ple, 0)
    n = model.layers
    expert_params = [0] * n
    extra = [0] * n
    if model.is_moe:
        per_moe = model.experts * model.expert_matrices * model.hidden_size * model.moe_intermediate_size
        dense_mlp = 3 * model.hidden_size * model.intermediate_size
        moe_layers = set(model.expert_layers)
        for il in range(n):
            if moe_layers and il not in moe_layers:
                continue  # a block without experts (Nemotron-H's Mamba/attention/MLP blocks): an even share
            if il < model.dense_layers and not moe_layers:
                extra[il] = dense_mlp
            else:
                expert_params[il] = per_moe
                extra[il] = per_moe
        if sum(extra) > body:  # inconsistent entry: fall back to an even split
            expert_params = [0] * n
            extra = [0] * n
    shared = (body - sum(extra)) / n
    body_bits = quant.linear_bits if quant.linear_bits is not None else bpw
    edge_bits = quant.embed_bits if quant.linear_bits is not None else bpw
    to_bytes = lambda p: int(round(p * body_bits / 8))  # noqa: E731
    edge = int(round(embed * edge_bits / 8))
    ple_bytes = int(round(ple * edge_bits / 8))
    layer_bytes = tuple(to_bytes(shared + extra[il]) for il in range(n))
    return WeightsLayout(
        total_bytes=to_bytes(body) + edge * (1 if model.tied_embeddings else 2) + ple_bytes,
        embed_bytes=edge + ple_bytes,
        output_bytes=edge,
        layer_bytes=layer_bytes,
        expert_bytes=tuple(to_bytes(p) for p in expert_params),
    )


def kv_cells(ctx: int, runtime: RuntimeSpec, rules: Rulebook) -> int:
    """KV cache length the runtime allocates for a context of `ctx` tokens."""
    pad = runtime.kv_pad_cells
    return int(math.ceil(ctx / pad) * pad) if pad > 0 else ctx


def kv_bytes_per_layer(model: ModelSpec, ctx_cells: int, kv_type: str, rules: Rulebook, sequences: int = 1) -> tuple[int, ...]:
    """KV cache bytes of each layer for `ctx_cells` tokens in each of `sequences` streams.

    Standard attention caches K and V: 2 x kv_heads x head_dim per token (grouped-query attention
    shrinks kv_heads). Multi-head latent attention caches one compressed latent of kv_lora_rank +
    qk_rope_head_dim per token (V is read from the same latent). Sliding-window layers hold at most
    the window. Layers without a KV cache of their own (advisor.engine.layers) hold their fixed
    recurrent state per sequence instead, or nothing.
    """
    elem = float(rules.memory.kv_cache.bytes_per_element[kv_type])
    state = float(rules.memory.recurrent.bytes_per_element)
    return _kv_bytes_per_layer(model, ctx_cells, elem, sequences, state)


@lru_cache(maxsize=4096)
def _kv_bytes_per_layer(model: ModelSpec, ctx_cells: int, elem: float, sequences: int,
                        state_elem: float = 4.0) -> tuple[int, ...]:
    out = []
    state = int(layers.state_elements(model) * state_elem) * sequences
    for il in range(model.layers):
        kind = layers.layer_kind(model, il)
        if kind != layers.ATTENTION:
            out.append(state if kind == layers.RECURRENT else 0)
            continue
        cells = ctx_cells
        swa = bool(model.sliding_window) and _is_swa_layer(model, il)
        if swa:
            cells = min(ctx_cells, model.sliding_window)
        per_token = layers.kv_elements_per_token(model, swa) * elem
        out.append(int(round(per_token * cells * sequences)))
    return tuple(out)


def _is_swa_layer(model: ModelSpec, il: int) -> bool:
    """Spread the sliding-window layers evenly (their exact position does not change totals)."""
    if model.sliding_window_layers >= model.layers:
        return True
    if model.sliding_window_layers <= 0:
        return False
    # layer il is global when it completes a group: e.g. Gemma 3's 5 local : 1 global.
    ratio = model.layers / (model.layers - model.sliding_window_layers)
    return int((il + 1) / ratio) == int(il / ratio)


def compute_buffer_bytes(
    model: ModelSpec,
    runtime: RuntimeSpec,
    ctx_cells: int,
    *,
    holds_output: bool,
    flash_attention: bool,
    heads_on_device: int | None = None,
    ubatch: int | None = None,
    sequences: int = 0,
) -> int:
    """A runtime's compute (scratch) buffer on one GPU, in bytes.

    llama.cpp reserves its graph for one micro-batch of `ub = min(n_ubatch, n_ctx)` tokens and keeps
    the largest step (all f32, 4 bytes):
      - output logits on the GPU that holds the output head: (vocab + hidden) x ub x 4;
      - without flash attention, the attention scores for the whole context:
        (heads x ctx + ctx + 4 x hidden) x ub x 4; with it, only the mask and activations:
        (ctx + 4 x hidden) x ub x 4.
    This reproduces llama.cpp's logged "CUDA0 compute buffer size" for Llama 3 8B (258.50 and
    560.00 MiB), Llama 2 7B (296), Mistral (164, 2144), Llama 3.2 3B (1983.38), 70B (1104) and
    Gemma 2 (507) in tests/data/llamacpp_memory_logs.csv. Builds since 2025 reserve one output
    token instead of ub, so this is the conservative (larger) side.
    """
    ub = ubatch or runtime.ubatch
    if runtime.kv_pool != "paged":  # a paged runtime profiles its full token budget whatever the context
        ub = min(ub, max(ctx_cells, 1))
    heads = model.attention_heads if heads_on_device is None else heads_on_device
    h = model.hidden_size
    if runtime.compute_buffers != "ggml_graph":
        return int(runtime.compute_fixed_mib * MIB) + _torch_activations(model, runtime, ub, ctx_cells, heads,
                                                                          holds_output, sequences)
    logits = (model.vocab_size + h) * ub * 4 if holds_output else 0
    if flash_attention:
        attention = (ctx_cells + 4 * h) * ub * 4
    else:
        attention = (heads * ctx_cells + ctx_cells + 4 * h) * ub * 4
    return int(runtime.compute_fixed_mib * MIB) + max(logits, attention)


def _torch_activations(model: ModelSpec, runtime: RuntimeSpec, ub: int, ctx_cells: int, heads: int,
                       holds_output: bool, sequences: int = 0) -> int:
    """PyTorch runtimes (vLLM, ExLlamaV2, MLX, transformers): the activation peak of one chunk of `ub`
    tokens: f32 logits for the whole chunk (vocab x ub x 4, which dominates), the 16-bit residual,
    norms and MLP activations, and for transformers' eager attention the 16-bit score matrix.

    vLLM's logged "PyTorch activation peak" matches this: 4.76 GiB for Llama 3.1 8B and 5.56-5.64 GiB
    for Qwen3 0.6B/32B at 8192 batched tokens on H100, ~1.2-1.45 GiB for 7-32B at 2048
    (tests/data/vllm_memory_logs.csv rows 1, 6, 9, 19-23, 26). Fixed costs (CUDA graphs) are
    `compute_fixed_mib`."""
    share = heads / max(model.attention_heads, 1)  # tensor parallel shards the MLP like the heads
    width = model.moe_intermediate_size * max(model.experts_active, 1) if model.is_moe else model.intermediate_size
    act = ub * (4 * model.hidden_size + 3 * width * share) * 2
    if runtime.sampler_copies and sequences:
        # vLLM V1 computes logits only for the sampled rows of its profile batch and warms the sampler up
        # with max_num_seqs requests: a few f32 copies of (sequences x vocab) (runtimes.toml sampler_copies).
        logits = int(runtime.sampler_copies * model.vocab_size * sequences * 4) if holds_output else 0
    else:
        logits = model.vocab_size * ub * 4 if holds_output else 0
    scores = heads * ctx_cells * ub * 2 if runtime.eager_attention else 0
    return int(act + logits + scores)


def context_bytes(runtime: RuntimeSpec) -> int:
    return int(runtime.context_mib * MIB)


def apple_working_set(vram_bytes: int, rules: Rulebook) -> int:
    """Metal's recommendedMaxWorkingSetSize for a Mac with this much unified memory."""
    apple = rules.memory.apple
    small = vram_bytes <= apple.small_max_gib * GIB
    return int(vram_bytes * (apple.small_fraction if small else apple.large_fraction))
