"""Checked integer fields, names and families shared by the GGUF and config.json readers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from advisor.modelfile.gguf_file import GgufArray
from advisor.modelfile.limits import bad_file

# Ranges far beyond any real model; a value outside is a corrupted or crafted file.
RANGES: dict[str, tuple[int, int]] = {
    "layers": (1, 4096),
    "hidden_size": (1, 1 << 20),
    "intermediate_size": (0, 1 << 24),
    "attention_heads": (1, 1 << 16),
    "kv_heads": (1, 1 << 16),
    "head_dim": (1, 1 << 16),
    "vocab_size": (1, 1 << 24),
    "max_context": (1, 1 << 28),
    "experts": (0, 1 << 16),
    "experts_active": (0, 1 << 16),
    "shared_experts": (0, 1 << 16),
    "moe_intermediate_size": (0, 1 << 24),
    "dense_layers": (0, 4096),
    "sliding_window": (0, 1 << 28),
    "kv_lora_rank": (0, 1 << 20),
    "qk_rope_head_dim": (0, 1 << 16),
    "any": (0, 1 << 32),
}


def as_int(value: Any, where: Path, key: str, field: str) -> int:
    """An integer (the largest item of a per-layer array), in the field's range."""
    if isinstance(value, GgufArray):
        if not value.values:
            bad_file(where, f"{key} is an empty or overlong array, expected a number")
        items = value.values
    elif isinstance(value, list):  # config.json per-layer list
        if not value or len(value) > 4096:
            bad_file(where, f"{key} is an empty or overlong list, expected a number")
        items = value
    else:
        items = (value,)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int):
            bad_file(where, f"{key} is {type(item).__name__} {str(item)[:40]}, expected an integer")
    out = max(items)
    lo, hi = RANGES[field]
    if not lo <= out <= hi:
        bad_file(where, f"{key} = {out} is out of range for {field.replace('_', ' ')} ({lo}..{hi})")
    return out


def pick(src: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    for k in keys:
        if src.get(k) is not None:
            return k, src[k]
    return keys[0], None


def get_int(src: dict[str, Any], keys: tuple[str, ...] | str, where: Path, field: str, default: int | None = None) -> int:
    keys = (keys,) if isinstance(keys, str) else keys
    key, value = pick(src, keys)
    if value is None:
        if default is None:
            bad_file(where, f"it does not say {key} (needed for {field.replace('_', ' ')})",
                     "a model file or config.json for a text LLM has it")
        return default
    return as_int(value, where, key, field)


def swa_layers_from_period(period: int, layers: int) -> int:
    """llama.cpp's `set_swa_pattern(n)`: layer il is windowed when n == 0 or il % n < n - 1."""
    return sum(1 for il in range(layers) if period == 0 or il % period < period - 1)


_FAMILIES = (
    ("llama", "llama"), ("qwen", "qwen"), ("gemma", "gemma"), ("mistral", "mistral"),
    ("mixtral", "mistral"), ("phi", "phi"), ("deepseek", "deepseek"), ("gpt-oss", "gpt-oss"),
    ("gpt_oss", "gpt-oss"), ("glm", "glm"), ("chatglm", "glm"), ("command-r", "command-r"),
    ("cohere", "command-r"),
)


def family_of(arch: str) -> str:
    low = arch.lower()
    for prefix, family in _FAMILIES:
        if low.startswith(prefix):
            return family
    return slug(low) or "unknown"


def slug(text: str) -> str:
    """Lower-case, hyphenated id made from a file or folder name."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")[:100] or "model"


def text_value(value: Any, limit: int = 200) -> str | None:
    if isinstance(value, str) and value.strip():
        return "".join(c if c.isprintable() else " " for c in value.strip())[:limit]
    return None
