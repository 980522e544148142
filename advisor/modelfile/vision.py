"""Read a model's vision tower: from `vision_config`, from a checkpoint's tensors, or from an mmproj GGUF.

From config.json the parameters are counted exactly from the dims, following each architecture's modelling
code in transformers (file named beside each counter); the tests hold them to the safetensors totals the
catalog records (Gemma 3 4B's SigLIP 419,816,304; Llama 4's 871,932,416; Mistral Small 3.2's Pixtral
438,958,080) and to llama.cpp's logged mmproj sizes. A vision_config the reader has no counter for is
counted as a plain ViT when its dims are there, and says so (never silently); with no dims it is not
counted, and says that. Only headers are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.engine.vision import VisionTower, image_patches
from advisor.errors import AdvisorError
from advisor.modelfile.fields import get_int
from advisor.modelfile.gguf_file import Tensor

_CFG_KEYS = {
    "layers": ("depth", "num_hidden_layers", "num_layers"),
    "hidden": ("hidden_size", "embed_dim", "width"),
    "heads": ("num_heads", "num_attention_heads"),
    "ff": ("intermediate_size",),
}


def rules():
    """The rulebook (tensor prefixes, warm-up sizes): the merged catalog's, loaded once."""
    from advisor.catalog.load import load_catalog

    return load_catalog().rules


def _g(c: dict[str, Any], keys, where: Path, default: int | None = 0) -> int:
    return get_int(c, keys, where, "any", default)


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _vit_layer(h: int, ff: int, *, qkv_bias: bool = True, out_bias: bool = True, gated: bool = False,
               mlp_bias: bool = True, norm_bias: bool = True) -> int:
    """One pre-norm ViT block: two norms, q/k/v and output projections, an MLP (gated: gate, up, down)."""
    norms = 2 * (2 * h if norm_bias else h)
    attn = 3 * _linear(h, h, qkv_bias) + _linear(h, h, out_bias)
    mlp = (2 * _linear(h, ff, mlp_bias) + _linear(ff, h, mlp_bias)) if gated else \
        (_linear(h, ff, mlp_bias) + _linear(ff, h, mlp_bias))
    return norms + attn + mlp


def _qwen2_vl(v: dict[str, Any], cfg: dict[str, Any], where: Path) -> tuple[int, dict[str, int]]:
    """transformers models/qwen2_vl/modeling_qwen2_vl.py: Conv3d patch embedding (no bias), blocks of
    LayerNorm x 2, qkv and proj with bias, VisionMlp fc1/fc2 (embed_dim x mlp_ratio) with bias; PatchMerger
    LayerNorm + Linear(4e, 4e) + Linear(4e, hidden_size)."""
    e = _g(v, "embed_dim", where, None)
    ff = e * _g(v, "mlp_ratio", where, 4)
    depth, out = _g(v, "depth", where, None), _g(v, "hidden_size", where, None)
    patch, tp, ch, m = _g(v, "patch_size", where, 14), _g(v, "temporal_patch_size", where, 2), _g(v, "in_chans", where, 3), _g(v, "spatial_merge_size", where, 2)
    merged = e * m * m
    n = ch * tp * patch * patch * e + depth * _vit_layer(e, ff) + 2 * e + _linear(merged, merged) + _linear(merged, out)
    return n, dict(hidden=e, ff=ff, layers=depth, heads=_g(v, ("num_heads",), where, 16), patch=patch, merge=m, out=out)


def _qwen2_5_vl(v: dict[str, Any], cfg: dict[str, Any], where: Path) -> tuple[int, dict[str, int]]:
    """transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py: Conv3d patch embedding (no bias), blocks of
    RMSNorm x 2, qkv and proj with bias, a gated MLP (gate, up, down) with bias; PatchMerger RMSNorm +
    Linear(4e, 4e) + Linear(4e, out_hidden_size)."""
    h, ff, depth = _g(v, "hidden_size", where, None), _g(v, "intermediate_size", where, None), _g(v, "depth", where, None)
    out = _g(v, "out_hidden_size", where, None)
    patch, tp, ch, m = _g(v, "patch_size", where, 14), _g(v, "temporal_patch_size", where, 2), _g(v, ("in_chans", "in_channels"), where, 3), _g(v, "spatial_merge_size", where, 2)
    merged = h * m * m
    n = ch * tp * patch * patch * h + depth * _vit_layer(h, ff, gated=True, norm_bias=False) + h \
        + _linear(merged, merged) + _linear(merged, out)
    return n, dict(hidden=h, ff=ff, layers=depth, heads=_g(v, "num_heads", where, 16), patch=patch, merge=m, out=out)


def _qwen3_vl(v: dict[str, Any], cfg: dict[str, Any], where: Path) -> tuple[int, dict[str, int]]:
    """transformers models/qwen3_vl/modeling_qwen3_vl.py: Conv3d patch embedding with bias, a learned
    position embedding of num_position_embeddings, blocks of LayerNorm x 2, qkv and proj with bias, an
    ungated MLP (linear_fc1, linear_fc2) with bias; the merger (LayerNorm over e, Linear(4e, 4e),
    Linear(4e, out)) and one more merger per deepstack_visual_indexes entry (LayerNorm over 4e)."""
    h, ff, depth = _g(v, "hidden_size", where, None), _g(v, "intermediate_size", where, None), _g(v, "depth", where, None)
    out = _g(v, "out_hidden_size", where, None)
    patch, tp, ch, m = _g(v, "patch_size", where, 16), _g(v, "temporal_patch_size", where, 2), _g(v, ("in_channels", "in_chans"), where, 3), _g(v, "spatial_merge_size", where, 2)
    merged = h * m * m
    deep = v.get("deepstack_visual_indexes")
    n_deep = len(deep) if isinstance(deep, list) and len(deep) <= 1024 else 0
    mlp = _linear(merged, merged) + _linear(merged, out)
    n = _linear(ch * tp * patch * patch, h) + _g(v, "num_position_embeddings", where, 0) * h \
        + depth * _vit_layer(h, ff) + (2 * h + mlp) + n_deep * (2 * merged + mlp)
    return n, dict(hidden=h, ff=ff, layers=depth, heads=_g(v, "num_heads", where, 16), patch=patch, merge=m, out=out)


def _siglip(v: dict[str, Any], where: Path) -> tuple[int, int, int, int]:
    """(params, hidden, ff, patches) of transformers models/siglip/modeling_siglip.py SiglipVisionTransformer
    without its pooling head: Conv2d patch embedding with bias, a position embedding per patch, blocks of
    LayerNorm x 2, q/k/v/out with bias, fc1/fc2 with bias, a post LayerNorm."""
    h, ff, layers = _g(v, "hidden_size", where, 768), _g(v, "intermediate_size", where, 3072), _g(v, "num_hidden_layers", where, 12)
    patch, image, ch = _g(v, "patch_size", where, 16), _g(v, "image_size", where, 224), _g(v, "num_channels", where, 3)
    patches = (image // patch) ** 2
    n = _linear(ch * patch * patch, h) + patches * h + layers * _vit_layer(h, ff) + 2 * h
    return n, h, ff, patches


def _gemma3(v: dict[str, Any], cfg: dict[str, Any], where: Path) -> tuple[int, dict[str, int]]:
    """transformers models/gemma3/modeling_gemma3.py: the SigLIP tower (vision_use_head false) and
    Gemma3MultiModalProjector: mm_input_projection_weight (vision hidden x text hidden) and an RMSNorm over
    the vision hidden; 4 x 4 average pooling to mm_tokens_per_image (256)."""
    n, h, ff, patches = _siglip(v, where)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    out = _g(text, "hidden_size", where, None)
    tokens = _g(cfg, "mm_tokens_per_image", where, 256)
    merge = max(int(round((patches / max(tokens, 1)) ** 0.5)), 1)
    return n + h * out + h, dict(hidden=h, ff=ff, layers=_g(v, "num_hidden_layers", where, 12),
                                 heads=_g(v, "num_attention_heads", where, 12), patch=_g(v, "patch_size", where, 16),
                                 image=_g(v, "image_size", where, 224), merge=merge, out=out)


def _pixtral(v: dict[str, Any], cfg: dict[str, Any], where: Path) -> tuple[int, dict[str, int]]:
    """transformers models/pixtral/modeling_pixtral.py PixtralVisionModel (Conv2d patch embedding without
    bias, ln_pre RMSNorm, blocks of RMSNorm x 2, q/k/v/o and a gated MLP without biases) and
    models/mistral3/modeling_mistral3.py Mistral3MultiModalProjector (RMSNorm, a patch merger
    Linear(h x merge^2, h) without bias, linear_1 and linear_2 with multimodal_projector_bias)."""
    h, ff, layers = _g(v, "hidden_size", where, None), _g(v, "intermediate_size", where, None), _g(v, "num_hidden_layers", where, None)
    patch, ch, image = _g(v, "patch_size", where, 16), _g(v, "num_channels", where, 3), _g(v, "image_size", where, 1024)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    out = _g(text, "hidden_size", where, None)
    m = _g(cfg, "spatial_merge_size", where, 2)
    bias = cfg.get("multimodal_projector_bias") is True
    tower = ch * patch * patch * h + h + layers * _vit_layer(h, ff, qkv_bias=False, out_bias=False, gated=True,
                                                             mlp_bias=False, norm_bias=False)
    proj = h + h * m * m * h + _linear(h, out, bias) + _linear(out, out, bias)
    return tower + proj, dict(hidden=h, ff=ff, layers=layers, heads=_g(v, "num_attention_heads", where, 16),
                              patch=patch, image=image, merge=m, out=out)


def _llama4(v: dict[str, Any], cfg: dict[str, Any], where: Path) -> tuple[int, dict[str, int]]:
    """transformers models/llama4/modeling_llama4.py Llama4VisionModel: an unfold patch embedding
    (Linear, no bias), a class embedding and a position embedding of (image/patch)^2 + 1, layernorm_pre and
    _post, blocks of LayerNorm x 2, q/k/v/o with bias and fc1/fc2 with bias; the pixel-shuffle adapter
    (Llama4VisionMLP2: fc1 intermediate_size -> projector_input_dim, fc2 -> projector_output_dim, bias
    multi_modal_projector_bias); Llama4MultiModalProjector linear_1 vision_output_dim -> text hidden, no bias."""
    h, ff, layers = _g(v, "hidden_size", where, None), _g(v, "intermediate_size", where, None), _g(v, "num_hidden_layers", where, None)
    patch, image, ch = _g(v, "patch_size", where, 14), _g(v, "image_size", where, 336), _g(v, "num_channels", where, 3)
    pin, pout = _g(v, "projector_input_dim", where, None), _g(v, "projector_output_dim", where, None)
    vout = _g(v, "vision_output_dim", where, pout)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    out = _g(text, "hidden_size", where, None)
    bias = v.get("multi_modal_projector_bias") is True
    patches = (image // patch) ** 2
    n = ch * patch * patch * h + h + (patches + 1) * h + 4 * h + layers * _vit_layer(h, ff) \
        + _linear(ff, pin, bias) + _linear(pin, pout, bias) + vout * out
    ratio = v.get("pixel_shuffle_ratio")
    merge = int(round(1 / ratio)) if isinstance(ratio, (int, float)) and 0 < ratio <= 1 else 2
    return n, dict(hidden=h, ff=ff, layers=layers, heads=_g(v, "num_attention_heads", where, 16), patch=patch,
                   image=image, merge=merge, out=out)


_COUNTERS = {
    "qwen2_vl": _qwen2_vl,
    "qwen2_5_vl": _qwen2_5_vl,
    "qwen3_vl": _qwen3_vl, "qwen3_vl_moe": _qwen3_vl, "qwen3_5": _qwen3_vl, "qwen3_5_moe": _qwen3_vl,
    "gemma3": _gemma3,
    "mistral3": _pixtral, "pixtral": _pixtral,
    "llama4": _llama4,
}


def from_config(cfg: dict[str, Any], where: Path, rules, bits: float = 16.0) -> VisionTower | None:
    """The tower `vision_config` describes, counted from its dims; None when there is none."""
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return None
    top = str(cfg.get("model_type", ""))
    vtype = str(v.get("model_type", ""))
    counter = _COUNTERS.get(top) or _COUNTERS.get(vtype.removesuffix("_vision").removesuffix("_vision_model"))
    assumed: list[str] = []
    if counter is not None:
        try:
            n, d = counter(v, cfg, where)
        except AdvisorError as exc:  # a partial vision_config: answer for the text model and say so
            return VisionTower(params=0, weight_bytes=0, source="config", kind=top, exact=False,
                               assumptions=(f"the vision tower of model_type {top} is not counted: its "
                                            f"vision_config {exc.message.split(': ', 1)[-1]}; reading images needs "
                                            f"more memory than shown",))
        kind = top
    else:
        layers, h = _g(v, _CFG_KEYS["layers"], where), _g(v, _CFG_KEYS["hidden"], where)
        if not layers or not h:
            return VisionTower(params=0, weight_bytes=0, source="config", kind=top or vtype or "unknown", exact=False,
                               assumptions=(f"the vision tower of model_type {top or vtype or 'unknown'} is not "
                                            f"counted: its vision_config gives no depth and width this reader "
                                            f"knows; reading images needs more memory than shown",))
        ff = _g(v, _CFG_KEYS["ff"], where, 4 * h)
        patch, ch = _g(v, "patch_size", where, 14), _g(v, ("num_channels", "in_chans", "in_channels"), where, 3)
        n = _linear(ch * patch * patch, h) + layers * _vit_layer(h, ff) + 2 * h
        d = dict(hidden=h, ff=ff, layers=layers, heads=_g(v, _CFG_KEYS["heads"], where, 0), patch=patch,
                 image=_g(v, "image_size", where, 0), merge=1, out=0)
        kind = top or vtype or "unknown"
        assumed.append(f"the vision tower of model_type {kind} is counted as a plain ViT from its vision_config "
                       f"({layers} layers of width {h}, MLP {ff}): its own projector and extras are not")
    return _tower(n, int(round(n * bits / 8)), "config", kind, d, rules, exact=False, assumptions=tuple(assumed))


def _tower(n: int, nbytes: int, source: str, kind: str, d: dict[str, int], rules, *, exact: bool,
           assumptions: tuple[str, ...] = (), path: str = "", warmup_key: str = "") -> VisionTower:
    patch, merge, image = d.get("patch", 0), max(d.get("merge", 1), 1), d.get("image", 0)
    warm, largest = image_patches(kind, patch, merge, image, rules, warmup_key)
    item = d.get("item_patches", 0) or largest
    return VisionTower(params=n, weight_bytes=nbytes, source=source, kind=kind, exact=exact, path=path,
                       hidden_size=d.get("hidden", 0), ff_size=d.get("ff", 0), layers=d.get("layers", 0),
                       heads=d.get("heads", 0), patch_size=patch, image_size=image, merge=merge,
                       warmup_patches=warm, item_patches=item, out_hidden=d.get("out", 0),
                       assumptions=assumptions)


def split_tensors(tensors: tuple[Tensor, ...], rules) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """(language-model tensors, vision-tower tensors) of a checkpoint, by rules/vision.toml's prefixes."""
    prefixes = tuple(rules.vision.tensor_prefixes)
    text, vision = [], []
    for t in tensors:
        (vision if t.name.startswith(prefixes) else text).append(t)
    return tuple(text), tuple(vision)


def from_tensors(vision: tuple[Tensor, ...], cfg: dict[str, Any], where: Path, rules) -> VisionTower | None:
    """The tower of a checkpoint: its exact bytes and parameters, with the dims from vision_config."""
    if not vision:
        return None
    counted = from_config(cfg, where, rules) if isinstance(cfg, dict) else None
    n = sum(t.n_elements for t in vision)
    nbytes = sum(t.n_bytes for t in vision)
    if counted is None:
        return VisionTower(params=n, weight_bytes=nbytes, source="checkpoint", kind="unknown", exact=True,
                           assumptions=("the checkpoint holds vision-tower tensors but config.json has no "
                                        "vision_config: their bytes are counted, the encoder's compute peak "
                                        "is not",))
    from dataclasses import replace

    assumed = tuple(f"the vision tower's dims (for its compute peak) are read as a plain ViT's: {counted.kind}'s "
                    f"layout is not modelled" for _ in counted.assumptions[:1])
    return replace(counted, params=n, weight_bytes=nbytes, source="checkpoint", exact=True, assumptions=assumed)


def attach(model, tower: VisionTower):
    """A LoadedModel with the tower its files ship beside it (an mmproj): `vision`, and the spec's
    `vision_params` (what a catalog entry written from it records)."""
    from dataclasses import replace

    return replace(model, vision=tower, spec=replace(model.spec, vision_params=tower.params))


def from_mmproj(path: Path, rules, *, display: str | None = None) -> VisionTower:
    """An mmproj GGUF (llama.cpp's vision tower file): its exact tensor bytes and the `clip.*` keys that
    size its compute buffer (tools/mtmd/clip-impl.h: clip.projector_type or clip.vision.projector_type,
    clip.vision.embedding_length, .feed_forward_length, .block_count, .attention.head_count,
    .image_size, .patch_size, .spatial_merge_size or .projector.scale_factor, .image_max_pixels,
    .projection_dim)."""
    from advisor.modelfile.gguf_file import read_gguf

    return mmproj_tower(read_gguf(path), path, rules, display=display)


def mmproj_tower(f, where: str | Path, rules, *, display: str | None = None, fetched: str = "") -> VisionTower:
    """The tower of an mmproj GGUF's parsed header `f` (a local file's, or one read by range requests:
    `where` names it in errors); `display` is the path written back into a launch command; `fetched`
    names an mmproj the runtime downloads with the model itself (`llama-server -hf`), never written."""
    from advisor.modelfile.limits import bad_file

    path = where
    name = str(where).rsplit("/", 1)[-1]
    meta = f.metadata
    arch = meta.get("general.architecture")
    if arch != "clip":
        bad_file(path, f"is not an mmproj file (general.architecture is {str(arch)[:40]!r}, not 'clip')",
                 "pass the mmproj-*.gguf that ships beside the model's GGUF")
    if meta.get("clip.has_vision_encoder") is False:
        bad_file(path, "has no vision encoder (clip.has_vision_encoder is false)", "pass the model's vision mmproj")
    kind = meta.get("clip.vision.projector_type", meta.get("clip.projector_type", "unknown"))
    kind = kind if isinstance(kind, str) else "unknown"
    g = lambda key, default=0: get_int(meta, "clip.vision." + key, path, "any", default)  # noqa: E731
    merge = g("spatial_merge_size") or g("projector.scale_factor") or 1
    tensors = [t for t in f.tensors if not t.name.startswith("a.")]  # an audio encoder is not the vision tower
    d = dict(hidden=g("embedding_length"), ff=g("feed_forward_length"), layers=g("block_count"),
             heads=g("attention.head_count"), patch=g("patch_size"), image=g("image_size"), merge=merge,
             out=g("projection_dim"))
    max_px = g("image_max_pixels")
    if max_px and d["patch"]:
        d["item_patches"] = max_px // (d["patch"] * d["patch"])
    assumed = ()
    if not d["hidden"] or not d["patch"]:
        assumed = (f"the mmproj {name} does not say its width or patch size: its weights are counted, its "
                   f"compute buffer is not",)
    tower = _tower(sum(t.n_elements for t in tensors), sum(t.n_bytes for t in tensors), "mmproj", kind, d, rules,
                   exact=True, assumptions=assumed, path="" if fetched else display or str(path), warmup_key=kind)
    if fetched:
        from dataclasses import replace

        tower = replace(tower, fetched=fetched)
    return tower
