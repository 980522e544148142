"""Exact weights layout from a list of tensors: where each byte sits, by tensor name.

GGUF names: `token_embd.*` (input embedding), `output.*` (output head), `blk.{i}.*` (layer i),
routed experts `blk.{i}.ffn_{gate,up,down,gate_up}_exps.*` (shared experts are `_shexp`, not
counted as routed). Safetensors names (after a `model.`, `model.language_model.` or
`language_model.model.` prefix): `embed_tokens.*`, `lm_head.*`, `layers.{i}.*`, routed experts
`layers.{i}.mlp.experts.*` / `block_sparse_moe.experts.*` / DeepSeek V4's `layers.{i}.ffn.experts.*` (not
`shared_experts`); DeepSeek V4's reference names `embed.weight` and `head.weight`. Per-layer
embeddings (Gemma 3n/4 `per_layer_token_embd`, `embed_tokens_per_layer`) sit with the input
embedding. Layers past the layer count and `mtp.*` tensors are multi-token-prediction layers, in the
file but not loaded by default (`unloaded_bytes`). Everything else (final norm, rope tables) counts in
the total only; a vision tower's tensors are taken out before (advisor.modelfile.vision).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from advisor.engine.memory import WeightsLayout
from advisor.modelfile.gguf_file import Tensor

_GGUF_LAYER = re.compile(r"blk\.(\d{1,6})\.")
_GGUF_EXPERT = re.compile(r"_exps(?:\.|$)")
_ST_LAYER = re.compile(r"layers\.(\d{1,6})\.")
_ST_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.")


@dataclass(frozen=True)
class Tally:
    layout: WeightsLayout
    output_present: bool
    params: int
    expert_params: int
    kernel: str
    """Kernel class holding the most bytes."""
    dominant_dtype: str
    dominant_share: float
    """Share of all bytes in the dominant dtype."""


def tally(tensors: tuple[Tensor, ...], layers: int, scheme: str) -> Tally:
    embed = output = total = params = expert_params = unloaded = 0
    output_present = False
    layer_bytes = [0] * layers
    expert_bytes = [0] * layers
    by_kernel: dict[str, int] = defaultdict(int)
    by_dtype: dict[str, int] = defaultdict(int)
    for t in tensors:
        total += t.n_bytes
        params += t.n_elements
        by_kernel[t.kernel] += t.n_bytes
        by_dtype[t.dtype] += t.n_bytes
        kind, il, expert = _classify(t.name, scheme)
        if kind == "embed":
            embed += t.n_bytes
        elif kind == "output":
            output += t.n_bytes
            output_present = True
        elif kind == "layer" and il < layers:
            layer_bytes[il] += t.n_bytes
            if expert:
                expert_bytes[il] += t.n_bytes
                expert_params += t.n_elements
        elif kind == "mtp" or kind == "layer":
            unloaded += t.n_bytes
    dominant = max(by_dtype, key=by_dtype.__getitem__, default="")
    layout = WeightsLayout(
        total_bytes=total,
        embed_bytes=embed,
        output_bytes=output if output_present else embed,
        layer_bytes=tuple(layer_bytes),
        expert_bytes=tuple(expert_bytes),
        unloaded_bytes=unloaded,
    )
    return Tally(
        layout=layout,
        output_present=output_present,
        params=params,
        expert_params=expert_params,
        kernel=max(by_kernel, key=by_kernel.__getitem__, default="f16"),
        dominant_dtype=dominant,
        dominant_share=by_dtype[dominant] / total if total else 0.0,
    )


def _classify(name: str, scheme: str) -> tuple[str, int, bool]:
    if scheme == "gguf":
        if name.startswith(("token_embd.", "per_layer_token_embd.")):
            return "embed", 0, False
        if name.startswith("output."):
            return "output", 0, False
        m = _GGUF_LAYER.match(name)
        if m:
            return "layer", int(m.group(1)), bool(_GGUF_EXPERT.search(name))
        return "other", 0, False
    key = name
    if name.startswith(_ST_PREFIXES):
        for prefix in _ST_PREFIXES:
            if name.startswith(prefix):
                key = name[len(prefix):]
                break
    # DeepSeek V4's checkpoint keeps its reference names: `embed.weight`, `head.weight` (SGLang's V4 loader maps
    # them to model.embed_tokens / lm_head: remap_weight_name_to_dpsk_hf_format, search-index file id 54489672361).
    if key.startswith(("embed_tokens.", "embed_tokens_per_layer.")) or name == "embed.weight":
        return "embed", 0, False
    if key.startswith("mtp.") or name.startswith("mtp."):
        return "mtp", 0, False
    if key.startswith("lm_head.") or name == "head.weight":
        return "output", 0, False
    m = _ST_LAYER.match(key)
    if m:
        return "layer", int(m.group(1)), ".experts." in key
    return "other", 0, False
