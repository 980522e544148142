"""A model's architecture from GGUF metadata (llama.cpp's `{arch}.*` keys).

Keys as llama.cpp writes and reads them (gguf-py `Keys.LLM`, `Keys.Attention`, `Keys.Rope`):
`{arch}.block_count`, `.embedding_length`, `.feed_forward_length`, `.context_length`,
`.attention.head_count`, `.attention.head_count_kv`, `.attention.key_length`,
`.attention.sliding_window`, `.attention.sliding_window_pattern`, `.attention.kv_lora_rank`,
`.rope.dimension_count`, `.expert_count`, `.expert_used_count`, `.expert_shared_count`,
`.expert_feed_forward_length`, `.leading_dense_block_count`, `.vocab_size`. Per-layer arrays
(head counts, MLP widths) count by their largest value: the KV cache and buffers are sized for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.modelfile import hybrid
from advisor.modelfile.fields import get_int, swa_layers_from_period, text_value
from advisor.modelfile.gguf_file import GgufArray, Tensor
from advisor.modelfile.limits import bad_file

# Architectures whose loader in llama.cpp hard-codes the sliding-window period (set_swa_pattern)
# when the file has no `attention.sliding_window_pattern`.
SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "gemma-embedding": 6, "cohere2": 4, "gpt-oss": 2}


def architecture(meta: dict[str, Any], tensors: tuple[Tensor, ...], where: Path) -> tuple[str, dict[str, Any], list[str]]:
    """(architecture name, ModelSpec architecture fields, notes)."""
    arch = text_value(meta.get("general.architecture"), 64)
    if arch is None:
        bad_file(where, "GGUF metadata lacks general.architecture", "a llama.cpp model file always has it")
    p = arch + "."
    notes: list[str] = []
    blocks = get_int(meta, p + "block_count", where, "layers")
    # MTP layers (GLM-4.5+, Qwen3.5) are appended to the block count; llama.cpp does not load them by default
    mtp = min(get_int(meta, p + "nextn_predict_layers", where, "dense_layers", 0), blocks - 1)
    layers = blocks - mtp
    hidden = get_int(meta, p + "embedding_length", where, "hidden_size")
    heads = get_int(meta, p + "attention.head_count", where, "attention_heads")
    experts = get_int(meta, p + "expert_count", where, "experts", 0)
    ffn = get_int(meta, p + "feed_forward_length", where, "intermediate_size", 0)
    f: dict[str, Any] = {
        "layers": layers,
        "hidden_size": hidden,
        "intermediate_size": ffn,
        "attention_heads": heads,
        "kv_heads": get_int(meta, p + "attention.head_count_kv", where, "kv_heads", heads),
        "head_dim": get_int(meta, p + "attention.key_length", where, "head_dim", max(hidden // heads, 1)),
        "vocab_size": _vocab(meta, p, tensors, where),
        "experts": experts,
        "experts_active": get_int(meta, p + "expert_used_count", where, "experts_active", 0),
        "shared_experts": get_int(meta, p + "expert_shared_count", where, "shared_experts", 0),
        "moe_intermediate_size": get_int(meta, p + "expert_feed_forward_length", where, "moe_intermediate_size",
                                         ffn if experts else 0),
        "dense_layers": min(get_int(meta, p + "leading_dense_block_count", where, "dense_layers", 0), layers),
        "kv_lora_rank": get_int(meta, p + "attention.kv_lora_rank", where, "kv_lora_rank", 0),
    }
    if f["experts_active"] > experts:
        bad_file(where, f"{p}expert_used_count {f['experts_active']} is more than {p}expert_count {experts}")
    f["qk_rope_head_dim"] = get_int(meta, p + "rope.dimension_count", where, "qk_rope_head_dim", 0) if f["kv_lora_rank"] else 0
    ctx = get_int(meta, p + "context_length", where, "max_context", 0)
    if not ctx:
        ctx = 4096
        notes.append(f"the file does not say {p}context_length: 4096 assumed")
    f["max_context"] = ctx
    f["sliding_window"], f["sliding_window_layers"] = _sliding(meta, p, arch, layers, where, notes)
    assumed: list[str] = []
    f.update(hybrid.gguf_layer_fields(meta, p, layers, where, assumed))
    if f.get("compress_ratios"):  # DeepSeek V4: the window is every layer's, the note from _sliding does not apply
        notes[:] = [n for n in notes if not n.startswith("sliding window")]
    f["mtp_layers"] = mtp
    f["assumptions"] = tuple(assumed)
    return arch, f, notes


def _vocab(meta: dict[str, Any], p: str, tensors: tuple[Tensor, ...], where: Path) -> int:
    if meta.get(p + "vocab_size") is not None:
        return get_int(meta, p + "vocab_size", where, "vocab_size")
    for t in tensors:
        if t.name == "token_embd.weight" and len(t.shape) == 2:
            return get_int({"token_embd rows": t.shape[1]}, "token_embd rows", where, "vocab_size")
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, GgufArray) and tokens.count:
        return get_int({"tokenizer.ggml.tokens": tokens.count}, "tokenizer.ggml.tokens", where, "vocab_size")
    bad_file(where, "can't tell the vocabulary size (no vocab_size, token_embd.weight or tokenizer tokens)")


def _sliding(meta: dict[str, Any], p: str, arch: str, layers: int, where: Path, notes: list[str]) -> tuple[int, int]:
    window = get_int(meta, p + "attention.sliding_window", where, "sliding_window", 0)
    if not window:
        return 0, 0
    pattern = meta.get(p + "attention.sliding_window_pattern")
    if isinstance(pattern, GgufArray) and pattern.values is not None and pattern.item_type == 7:
        return window, sum(1 for v in pattern.values[:layers] if v)  # one bool per layer: true = windowed
    if pattern is not None:
        period = get_int(meta, p + "attention.sliding_window_pattern", where, "dense_layers")
        return window, swa_layers_from_period(period, layers)
    if arch in SWA_PERIOD:
        return window, swa_layers_from_period(SWA_PERIOD[arch], layers)
    notes.append(f"sliding window {window} declared, but which layers use it is unknown for {arch}: all counted as global")
    return window, 0
