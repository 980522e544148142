"""Today's architectures in a config.json: which layers keep a KV cache, a recurrent state or
nothing, and the parts a file ships beside the language model (MTP layers, a vision tower).

Keys as the models' own configs spell them (transformers' configuration classes):
- Qwen3-Next / Qwen3.5 / 3.6 (Gated DeltaNet): `layer_types` of `linear_attention` /
  `full_attention`, else `full_attention_interval` (llama.cpp: layer il is recurrent when
  (il + 1) % interval != 0); state from `linear_conv_kernel_dim`, `linear_num_key_heads`,
  `linear_key_head_dim`, `linear_num_value_heads`, `linear_value_head_dim`; MTP `mtp_num_hidden_layers`.
- Granite 4.0-H (`granitemoehybrid`): `layer_types` of `mamba` / `attention`; `mamba_d_conv`,
  `mamba_n_heads` x `mamba_d_head`, `mamba_d_state`, `mamba_n_groups`.
- Nemotron-H: `hybrid_override_pattern`, one letter per layer: `M` Mamba2, `*` attention, `-` MLP,
  `E` MoE; `conv_kernel`, `mamba_num_heads` x `mamba_head_dim`, `ssm_state_size`, `n_groups`.
- Jamba: attention where il % `attn_layer_period` == `attn_layer_offset`, Mamba 1 elsewhere;
  `mamba_d_conv`, `mamba_expand` x hidden, `mamba_d_state`.
- Gemma 3n / 4: the last `num_kv_shared_layers` reuse earlier layers' KV; Gemma 4's full-attention
  layers use `num_global_key_value_heads` x `global_head_dim`; per-layer embeddings of
  `vocab_size_per_layer_input` x layers x `hidden_size_per_layer_input`.
- DeepSeek V3.2: the sparse-attention indexer caches a key of `index_head_dim` per token and layer.
- DeepSeek V4 (`compress_ratios`, one per layer, the list one longer for the MTP layer): shared K=V
  multi-query attention of `head_dim` over a `sliding_window` on every layer, plus a compressed pool on
  layers of ratio > 0; ratio 4 (compressed sparse attention) adds the lightning indexer (`index_n_heads` x
  `index_head_dim`, top `index_topk`); manifold-constrained hyper-connections of `hc_mult` streams.
  Shapes as huggingface/transformers src/transformers/models/deepseek_v4/modular_deepseek_v4.py @02356fec
  builds them (DeepseekV4Attention, DeepseekV4CSACompressor, DeepseekV4HCACompressor, DeepseekV4Indexer,
  DeepseekV4HyperConnection, DeepseekV4HyperHead, DeepseekV4HashRouter).
- MTP layers: `num_nextn_predict_layers` (DeepSeek V3, GLM-4.5+), `mtp_num_hidden_layers` (Qwen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.catalog.types import RecurrentSpec
from advisor.modelfile.fields import get_int

_ATTN = {"full_attention": "a", "attention": "a", "sliding_attention": "a", "chunked_attention": "a",
         "linear_attention": "r", "mamba": "r", "mamba2": "r"}
_NEMOTRON = {"M": "r", "*": "a", "-": "-", "E": "-"}
_SSM_HINTS = ("mamba", "ssm_", "linear_", "rwkv", "hybrid", "attn_layer_", "conv_l_cache", "full_attention_interval")


def layer_fields(c: dict[str, Any], layers: int, hidden: int, where: Path, assumed: list[str]) -> dict[str, Any]:
    """ModelSpec fields for a config's layer kinds, recurrent state and extra parts."""
    f: dict[str, Any] = {}
    pattern = _pattern(c, layers, where, assumed)
    recurrent = _recurrent(c, hidden, where) if "r" in pattern else None
    if "r" in pattern and recurrent is None:
        assumed.append("the config marks recurrent layers but not their state size: those layers counted "
                       "with no state")
        pattern = pattern.replace("r", "-")
    if not pattern and recurrent is None and any(k.startswith(_SSM_HINTS) for k in c):
        hints = sorted(k for k in c if k.startswith(_SSM_HINTS))[:3]
        assumed.append(f"the config has {', '.join(hints)}, a layer type this reader does not model: every "
                       "layer counted as plain attention with a KV cache")
    shared = get_int(c, "num_kv_shared_layers", where, "dense_layers", 0)
    if shared:
        shared = min(shared, layers - 1)
        base = pattern or "a" * layers
        pattern = base[: layers - shared] + "-" * shared
    if pattern and set(pattern) != {"a"}:
        f["layer_pattern"] = pattern
    if recurrent is not None and "r" in pattern:
        f["recurrent"] = recurrent
    gkv = get_int(c, "num_global_key_value_heads", where, "experts", 0)
    ghd = get_int(c, "global_head_dim", where, "experts", 0)
    if gkv or ghd:
        f["global_kv_heads"], f["global_head_dim"] = gkv, ghd
        if c.get("attention_k_eq_v") is True:
            assumed.append("attention_k_eq_v: the full-attention layers' values are counted as cached beside "
                           "their keys (a runtime that shares them needs less)")
    ple = get_int(c, "hidden_size_per_layer_input", where, "experts", 0)
    if ple:
        vocab = get_int(c, "vocab_size_per_layer_input", where, "moe_intermediate_size", 0) or get_int(
            c, ("vocab_size",), where, "vocab_size")
        f["per_layer_embed_params"] = vocab * layers * ple
    f["indexer_head_dim"] = get_int(c, "index_head_dim", where, "experts", 0) if c.get("kv_lora_rank") else 0
    hop = c.get("hybrid_override_pattern")
    if isinstance(hop, str) and len(hop) == layers and "E" in hop:  # Nemotron-H: experts only in E blocks
        f["expert_layers"] = tuple(il for il, ch in enumerate(hop) if ch == "E")
    period = get_int(c, "expert_layer_period", where, "dense_layers", 0)
    if period and get_int(c, ("num_experts", "num_local_experts"), where, "experts", 0):  # Jamba
        offset = get_int(c, "expert_layer_offset", where, "dense_layers", 0)
        f["expert_layers"] = tuple(il for il in range(layers) if il % period == offset)
    if c.get("mlp_hidden_act") == "relu2":
        f["expert_matrices"] = 2
    f["mtp_layers"] = get_int(c, ("num_nextn_predict_layers", "mtp_num_hidden_layers"), where, "dense_layers", 0)
    return f


# DeepSeek V4's compressed sparse attention (the layers with the lightning indexer and overlapping windows)
# compresses 4 tokens per entry, its heavily compressed attention 128 (transformers DeepseekV4Config
# compress_rates, modular_deepseek_v4.py @02356fec).
CSA_RATIO, HCA_RATIO = 4, 128
KV_LAYOUT_ASSUMED = ("DeepSeek V4's cache is sized as SGLang's pool stores it (rules/memory.toml [compressed_kv]: "
                     "584-byte fp8 K=V entries, 132-byte indexer keys, fp32 compressor state); vLLM's and llama.cpp's "
                     "page and cell padding of the compressed pools is not modelled")


def compressed_fields(c: dict[str, Any], layers: int, where: Path, assumed: list[str]) -> dict[str, Any]:
    """DeepSeek V4's per-layer compress ratios, window and indexer, when the config has them."""
    ratios = c.get("compress_ratios")
    if not isinstance(ratios, list) or not ratios:
        return {}
    if len(ratios) > 4096 or not all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= 1 << 20
                                     for r in ratios):
        assumed.append("compress_ratios is not a list of small non-negative integers: every layer counted as "
                       "plain attention with a KV cache")
        return {}
    if len(ratios) < layers:
        assumed.append(f"compress_ratios lists {len(ratios)} of {layers} layers: the rest counted as "
                       "sliding-window only")
    per_layer = tuple(ratios[:layers]) + (0,) * max(layers - len(ratios), 0)
    odd = sorted({r for r in per_layer if r not in (0, CSA_RATIO, HCA_RATIO)})
    if odd:
        assumed.append(f"compress ratio {', '.join(map(str, odd))} is not one the reference implements "
                       f"(0, {CSA_RATIO}, {HCA_RATIO}): counted as a compressed pool without an indexer")
    window = get_int(c, "sliding_window", where, "sliding_window", 0)
    if not window:
        assumed.append("compress_ratios without sliding_window: a window of 128 tokens assumed (DeepSeek V4)")
        window = 128
    assumed.append(KV_LAYOUT_ASSUMED)
    f: dict[str, Any] = {"compress_ratios": per_layer, "sliding_window": window, "sliding_window_layers": layers,
                         "qk_rope_head_dim": get_int(c, "qk_rope_head_dim", where, "qk_rope_head_dim", 0),
                         "indexer_head_dim": get_int(c, "index_head_dim", where, "experts", 0)
                         if CSA_RATIO in per_layer else 0}
    return f


def compressed_attention_params(c: dict[str, Any], hidden: int, ratio: int, where: Path) -> int:
    """Weights of one DeepSeek V4 attention block of compress ratio `ratio` (modular_deepseek_v4.py @02356fec).

    DeepseekV4Attention: q_a_proj (hidden x q_lora_rank), q_norm, q_b_proj (q_lora_rank x heads x head_dim),
    kv_proj (hidden x head_dim, one K=V head), kv_norm, grouped o_a_proj (heads x head_dim x o_lora_rank in
    o_groups blocks), o_b_proj (o_groups x o_lora_rank x hidden), one attention sink per head. A compressor
    (ratio > 0): kv_proj and gate_proj of hidden x coff x head_dim, position_bias of ratio x coff x
    head_dim, kv_norm (coff 2 for the overlapping ratio-4 windows). The ratio-4 indexer: its own compressor
    at index_head_dim (coff 2), q_b_proj (q_lora_rank x index_n_heads x index_head_dim) and weights_proj
    (hidden x index_n_heads). llama.cpp creates the same tensors (ggml-org/llama.cpp src/models/deepseek4.cpp
    load_arch_tensors @00395eb2: attn_sinks, wq_a, attn_q_a_norm, wq_b, wkv, attn_kv_norm, wo_a, wo_b; compressor
    wkv/wgate of coff x head_dim, ape of coff x head_dim x ratio, norm; indexer proj, attn_q_b and its compressor)."""
    g = lambda keys, default=0: get_int(c, keys, where, "any", default)  # noqa: E731
    heads, hd, q_lora = g("num_attention_heads"), g("head_dim"), g("q_lora_rank")
    o_lora, o_groups = g("o_lora_rank"), g("o_groups", 1)
    n = hidden * q_lora + q_lora + q_lora * heads * hd + hidden * hd + hd + heads * hd * o_lora \
        + o_groups * o_lora * hidden + heads
    if ratio:
        coff = 2 if ratio == CSA_RATIO else 1
        n += 2 * hidden * coff * hd + ratio * coff * hd + hd
    if ratio == CSA_RATIO:
        ihd, ih = g("index_head_dim"), g("index_n_heads")
        n += 2 * hidden * 2 * ihd + ratio * 2 * ihd + ihd + q_lora * ih * ihd + hidden * ih
    return n


def hyper_connection_params(c: dict[str, Any], hidden: int, where: Path) -> tuple[int, int]:
    """(per layer, final head) weights of DeepSeek V4's hyper-connections: two DeepseekV4HyperConnection
    per layer, each fn ((2 + hc) x hc, hc x hidden), base and 3 scales; DeepseekV4HyperHead hc_fn
    (hc, hc x hidden), hc_base and one scale."""
    hc = get_int(c, "hc_mult", where, "any", 0)
    if not hc:
        return 0, 0
    mix = (2 + hc) * hc
    return 2 * (mix * hc * hidden + mix + 3), hc * hc * hidden + hc + 1


def _pattern(c: dict[str, Any], layers: int, where: Path, assumed: list[str]) -> str:
    kinds = c.get("layer_types")
    if isinstance(kinds, list) and kinds and len(kinds) <= 4096:
        letters = []
        for k in kinds[:layers]:
            letter = _ATTN.get(k) if isinstance(k, str) else None
            if letter is None:
                assumed.append(f"layer type {str(k)[:40]!r} is not modelled: counted as attention with a KV cache")
                letter = "a"
            letters.append(letter)
        if len(letters) < layers:
            assumed.append(f"layer_types lists {len(letters)} of {layers} layers: the rest counted as attention")
            letters += ["a"] * (layers - len(letters))
        return "".join(letters)
    hop = c.get("hybrid_override_pattern")
    if isinstance(hop, str) and hop:
        if len(hop) != layers or any(ch not in _NEMOTRON for ch in hop):
            assumed.append("hybrid_override_pattern does not match the layer count or holds unknown letters: "
                           "every layer counted as attention")
            return ""
        return "".join(_NEMOTRON[ch] for ch in hop)
    interval = get_int(c, "full_attention_interval", where, "dense_layers", 0)
    if interval:
        return "".join("a" if (il + 1) % interval == 0 else "r" for il in range(layers))
    period = get_int(c, "attn_layer_period", where, "dense_layers", 0)
    if period:
        offset = get_int(c, "attn_layer_offset", where, "dense_layers", 0)
        return "".join("a" if il % period == offset else "r" for il in range(layers))
    return ""


# bytes of a scan-state value by the config's `mamba_ssm_dtype` (Qwen3.5 / 3.6 name float32); unnamed: 0, the
# runtime's own (vLLM: the model's dtype)
_SCAN_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}


def _recurrent(c: dict[str, Any], hidden: int, where: Path) -> RecurrentSpec | None:
    g = lambda keys, default=0: get_int(c, keys, where, "any", default)  # noqa: E731
    scan = _SCAN_BYTES.get(str(c.get("mamba_ssm_dtype")), 0.0)
    if c.get("linear_num_value_heads") is not None:
        return RecurrentSpec(kind="gated_deltanet", conv_kernel=g("linear_conv_kernel_dim", 4),
                             inner_size=g("linear_num_value_heads") * g("linear_value_head_dim"),
                             state_size=g("linear_key_head_dim"), group_count=g("linear_num_key_heads"),
                             scan_bytes=scan)
    heads = g(("mamba_n_heads", "mamba_num_heads"))
    state = g(("mamba_d_state", "ssm_state_size", "state_size"))
    conv = g(("mamba_d_conv", "conv_kernel", "d_conv"), 4)
    if heads and state:
        return RecurrentSpec(kind="mamba2", conv_kernel=conv, inner_size=heads * g(("mamba_d_head", "mamba_head_dim")),
                             state_size=state, group_count=g(("mamba_n_groups", "n_groups"), 1), scan_bytes=scan)
    expand = g("mamba_expand")
    if expand and state:
        return RecurrentSpec(kind="mamba", conv_kernel=conv, inner_size=expand * hidden, state_size=state)
    return None


def recurrent_params(r: RecurrentSpec, hidden: int, c: dict[str, Any], where: Path) -> int:
    """Weights of one recurrent mixer (projections, convolution, per-head scalars, gated norm).

    Gated DeltaNet (Qwen3-Next): in_proj_qkvz (2 key dims + 2 value dims), in_proj_ba (2 per value
    head), conv1d over q, k, v, A_log and dt_bias per value head, a norm of the value head size,
    out_proj. Mamba2: in_proj (z, x, B, C, dt), conv1d with bias, A_log, D and dt_bias per head, a
    norm of d_inner, out_proj. Mamba 1: in_proj (x, z), conv1d with bias, x_proj (dt rank + 2 states),
    dt_proj with bias, A_log and D, out_proj."""
    conv_ch = r.inner_size + 2 * r.group_count * r.state_size
    if r.kind == "gated_deltanet":
        vh = get_int(c, "linear_num_value_heads", where, "any")
        vd = get_int(c, "linear_value_head_dim", where, "any")
        return hidden * (conv_ch + r.inner_size) + hidden * 2 * vh + conv_ch * r.conv_kernel + 2 * vh + vd \
            + r.inner_size * hidden
    if r.kind == "mamba2":
        heads = get_int(c, ("mamba_n_heads", "mamba_num_heads"), where, "any")
        bias = c.get("mamba_conv_bias", c.get("use_conv_bias", True)) is not False
        return hidden * (r.inner_size + conv_ch + heads) + conv_ch * (r.conv_kernel + (1 if bias else 0)) \
            + 3 * heads + r.inner_size + r.inner_size * hidden
    dt_rank = get_int(c, "mamba_dt_rank", where, "any", -(-hidden // 16))
    d = r.inner_size
    return hidden * 2 * d + d * (r.conv_kernel + 1) + d * (dt_rank + 2 * r.state_size) + dt_rank * d + d \
        + d * r.state_size + d + d * hidden


def gguf_layer_fields(meta: dict[str, Any], p: str, layers: int, where: Path, assumed: list[str]) -> dict[str, Any]:
    """The same fields from GGUF metadata, as llama.cpp reads them.

    Recurrent layers: `{arch}.attention.recurrent_layers` (one bool per layer), else
    `{arch}.full_attention_interval`, else (Mamba hybrids: Jamba, Granite 4.0-H, Nemotron-H) a zero in
    the per-layer `{arch}.attention.head_count_kv` array, which marks a layer without attention: it is
    recurrent unless it has an MLP of its own (`feed_forward_length` > 0, Nemotron-H's MLP blocks).
    State from `{arch}.ssm.conv_kernel`, `.ssm.inner_size`, `.ssm.state_size`, `.ssm.group_count`.
    KV-shared layers: the last `{arch}.attention.shared_kv_layers`."""
    f: dict[str, Any] = {}
    g = lambda key, default=0: get_int(meta, p + key, where, "any", default)  # noqa: E731
    pattern = ""
    rec_arr = meta.get(p + "attention.recurrent_layers")
    kv_arr = meta.get(p + "attention.head_count_kv")
    ff_arr = meta.get(p + "feed_forward_length")
    if _bools(rec_arr):
        pattern = "".join("r" if v else "a" for v in rec_arr.values[:layers])
    elif g("full_attention_interval"):
        n = g("full_attention_interval")
        pattern = "".join("a" if (il + 1) % n == 0 else "r" for il in range(layers))
    elif _ints(kv_arr) and 0 in kv_arr.values[:layers]:
        ffs = ff_arr.values if _ints(ff_arr) else None
        pattern = "".join("a" if kv else ("-" if ffs is not None and il < len(ffs) and ffs[il] else "r")
                          for il, kv in enumerate(kv_arr.values[:layers]))
    pattern = pattern.ljust(layers, "a") if pattern else ""
    if "r" in pattern:
        inner, state = g("ssm.inner_size"), g("ssm.state_size")
        if inner and state:
            kind = "gated_deltanet" if meta.get(p + "full_attention_interval") is not None or _bools(rec_arr) \
                else ("mamba2" if g("ssm.group_count") else "mamba")
            f["recurrent"] = RecurrentSpec(kind=kind, conv_kernel=g("ssm.conv_kernel", 4), inner_size=inner,
                                           state_size=state, group_count=g("ssm.group_count"))
        else:
            assumed.append("the file marks recurrent layers but lacks ssm.inner_size / ssm.state_size: their "
                           "state is not counted")
            pattern = pattern.replace("r", "-")
    elif any(k.startswith(tuple(p + x for x in ("ssm.", "wkv.", "shortconv."))) for k in meta):
        assumed.append("the file has recurrent (ssm/wkv/shortconv) keys this reader does not model: every layer "
                       "counted as attention with a KV cache")
    shared = min(g("attention.shared_kv_layers"), layers - 1)
    if shared > 0:
        pattern = (pattern or "a" * layers)[: layers - shared] + "-" * shared
    if pattern and set(pattern) != {"a"}:
        f["layer_pattern"] = pattern
    swa_len = g("attention.key_length_swa")
    if swa_len:
        f["global_head_dim"] = g("attention.key_length")
        f["head_dim"] = swa_len
    f["indexer_head_dim"] = g("attention.indexer.key_length")
    ratios = meta.get(p + "attention.compress_ratios")  # DeepSeek V4 (llama.cpp arch deepseek4, PR #24162)
    if _ints(ratios) and ratios.values:
        per_layer = tuple(ratios.values[:layers]) + (0,) * max(layers - len(ratios.values), 0)
        window = g("attention.sliding_window")
        if not window:
            assumed.append("attention.compress_ratios without attention.sliding_window: a window of 128 tokens "
                           "assumed (DeepSeek V4)")
            window = 128
        odd = sorted({r for r in per_layer if r not in (0, CSA_RATIO, HCA_RATIO)})
        if odd:
            assumed.append(f"compress ratio {', '.join(map(str, odd))} is not one the reference implements "
                           f"(0, {CSA_RATIO}, {HCA_RATIO}): counted as a compressed pool without an indexer")
        assumed.append(KV_LAYOUT_ASSUMED)
        f.update(compress_ratios=per_layer, sliding_window=window, sliding_window_layers=layers,
                 qk_rope_head_dim=g("rope.dimension_count"),
                 indexer_head_dim=f["indexer_head_dim"] if CSA_RATIO in per_layer else 0)
    return f


def _bools(v: Any) -> bool:
    from advisor.modelfile.gguf_file import GgufArray
    return isinstance(v, GgufArray) and v.values is not None and v.item_type == 7


def _ints(v: Any) -> bool:
    from advisor.modelfile.gguf_file import GgufArray
    return isinstance(v, GgufArray) and v.values is not None and all(isinstance(x, int) and not isinstance(x, bool)
                                                                     for x in v.values)
