"""What each layer of a model keeps per sequence: a KV cache, a fixed recurrent state, or nothing.

Hybrid models mix kinds: Qwen3-Next / Qwen3.5 / 3.6 keep a KV cache only on every fourth (full
attention) layer and a Gated DeltaNet state on the rest; Granite 4.0-H, Nemotron-H and Jamba keep a
Mamba state on most layers; Gemma 3n / 4 reuse the KV cache of earlier layers in their last
`num_kv_shared_layers`. llama.cpp sizes them the same way: `llama_memory_hybrid` holds a KV cache for
the layers where `!hparams.is_recurrent(il)` (and `has_kv(il)`), and a recurrent memory of one cell per
sequence for the others, (n_embd_r + n_embd_s) values each (src/llama-hparams.cpp).
"""

from __future__ import annotations

from typing import NamedTuple

from advisor.catalog.rulebook import CompressedKvRules
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


class CompressedEntry(NamedTuple):
    """Bytes of one cached DeepSeek V4 entry as a runtime stores it, for one KV cache type."""
    entry: float
    """One shared K=V vector of head_dim."""
    indexer: float
    """One lightning-indexer key of indexer_head_dim."""
    indexer_ratio: int
    """The compress ratio whose layers carry the indexer."""
    state: float
    """Bytes per value of the compressors' decode state."""


def compressed_entry_bytes(model: ModelSpec, kv_type: str, elem: float, rules: CompressedKvRules) -> CompressedEntry:
    """A cache type that packs entries (SGLang's fp8: 448 fp8 values, 64 RoPE values in bf16, 8 scale
    bytes = 584 bytes for head_dim 512) keeps the RoPE part at its own width and adds scale bytes; any
    other stores head_dim values of `elem` bytes (rules/memory.toml [compressed_kv])."""
    rope = model.qk_rope_head_dim
    if kv_type in rules.rope_bytes_per_element:
        entry = (model.head_dim - rope) * elem + rope * rules.rope_bytes_per_element[kv_type]
    else:
        entry = model.head_dim * elem
    entry += rules.entry_scale_bytes.get(kv_type, 0)
    indexer = model.indexer_head_dim * elem + rules.indexer_scale_bytes.get(kv_type, 0)
    return CompressedEntry(entry, indexer, rules.indexer_ratio, rules.state_bytes_per_element)


def compressor_state_elements(model: ModelSpec, ratio: int, ckv: CompressedEntry) -> int:
    """Values of a compressed layer's fixed decode state per sequence: kv_state and score_state of
    2 x ratio x coff x head_dim (coff 2 for the overlapping windows of the indexer-ratio layers), plus the
    indexer's own compressor on those layers."""
    overlap = 2 if ratio == ckv.indexer_ratio else 1
    values = 2 * ratio * overlap * model.head_dim
    if ratio == ckv.indexer_ratio and model.indexer_head_dim:
        values += 2 * ratio * 2 * model.indexer_head_dim
    return values
