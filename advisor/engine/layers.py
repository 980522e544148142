"""What each layer of a model keeps per sequence: a KV cache, a fixed recurrent state, or nothing.

Hybrid models mix kinds: Qwen3-Next / Qwen3.5 / 3.6 keep a KV cache only on every fourth (full
attention) layer and a Gated DeltaNet state on the rest; Granite 4.0-H, Nemotron-H and Jamba keep a
Mamba state on most layers; Gemma 3n / 4 reuse the KV cache of earlier layers in their last
`num_kv_shared_layers`. llama.cpp sizes them the same way: `llama_memory_hybrid` holds a KV cache for
the layers where `!hparams.is_recurrent(il)` (and `has_kv(il)`), and a recurrent memory of one cell per
sequence for the others, (n_embd_r + n_embd_s) values each (src/llama-hparams.cpp).
"""

from __future__ import annotations

from advisor.catalog.types import LAYER_KINDS, ModelSpec

ATTENTION, RECURRENT, NONE = LAYER_KINDS


def layer_kind(model: ModelSpec, il: int) -> str:
    """`a` (own KV cache), `r` (recurrent state) or `-` (nothing of its own) for layer `il`."""
    pattern = model.layer_pattern
    return pattern[il] if il < len(pattern) else ATTENTION


def kv_layer_count(model: ModelSpec) -> int:
    return sum(1 for il in range(model.layers) if layer_kind(model, il) == ATTENTION)


def recurrent_layer_count(model: ModelSpec) -> int:
    return sum(1 for il in range(model.layers) if layer_kind(model, il) == RECURRENT)


def kv_elements_per_token(model: ModelSpec, sliding: bool) -> int:
    """Cached values per token in one attention layer.

    Standard attention caches K and V: 2 x kv_heads x head_dim (Gemma 4's full-attention layers use
    their own `global_kv_heads` x `global_head_dim`). Multi-head latent attention caches one latent of
    kv_lora_rank + qk_rope_head_dim, plus DeepSeek V3.2's indexer key of `indexer_head_dim`."""
    if model.is_mla:
        return model.kv_lora_rank + model.qk_rope_head_dim + model.indexer_head_dim
    heads, dim = model.kv_heads, model.head_dim
    if not sliding and (model.global_kv_heads or model.global_head_dim):
        heads = model.global_kv_heads or heads
        dim = model.global_head_dim or dim
    return 2 * heads * dim


def state_elements(model: ModelSpec) -> int:
    """Recurrent-state values per recurrent layer and sequence (0 without recurrent layers)."""
    return model.recurrent.elements if model.recurrent is not None else 0
