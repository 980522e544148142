"""A model's architecture from a Hugging Face `config.json`, and its parameters from the shapes.

Multimodal configs keep the language model in `text_config` (Gemma 3, Llama 4, Mistral 3): its
values win over the top level. The parameter estimate counts embeddings, output head (unless
tied), attention (grouped-query, or multi-head latent when `kv_lora_rank` is set), gated MLPs or
routed + shared experts with their router, and RMSNorm weights (with Qwen3/Gemma 3 q/k norms and
Gemma's post-norms); biases only where the config says `attention_bias` (or Qwen2's fixed q/k/v
biases). It reproduces the catalog's exact totals for Llama 3.1 8B, Qwen2.5 7B, Mixtral 8x7B,
Qwen3 30B-A3B and DeepSeek V3 (tests/test_modelfile.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.modelfile import hybrid
from advisor.modelfile.fields import get_int, swa_layers_from_period
from advisor.modelfile.limits import bad_file

_K = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_context": ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", "max_sequence_length"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_active": ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k_experts"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
    "moe_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
}


def text_config(cfg: Any, where: Path) -> dict[str, Any]:
    if not isinstance(cfg, dict):
        bad_file(where, "config.json is not a JSON object")
    inner = cfg.get("text_config")
    return {**cfg, **inner} if isinstance(inner, dict) else cfg


def _rotary_dims(c: dict[str, Any], head_dim: int, where: Path) -> int:
    """The dimensions of a head RoPE rotates where the config leaves some unrotated: `partial_rotary_factor` at the
    top or in `rope_parameters` / `rope_scaling` (Qwen3.5/3.6/Next 0.25 of 256); 0: the whole head."""
    for src in (c, c.get("rope_parameters"), c.get("rope_scaling")):
        factor = src.get("partial_rotary_factor") if isinstance(src, dict) else None
        if factor is None:
            continue
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
            bad_file(where, f"partial_rotary_factor {factor!r} is not a fraction of a head (0 to 1)")
        return int(head_dim * factor) if factor < 1 else 0
    return 0


def architecture(cfg: dict[str, Any], where: Path) -> tuple[str, dict[str, Any], list[str]]:
    """(model_type, ModelSpec architecture fields, notes) from a config.json object."""
    c = text_config(cfg, where)
    notes: list[str] = []
    model_type = c.get("model_type") if isinstance(c.get("model_type"), str) else ""
    top_type = cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else model_type
    g = lambda field, default=None: get_int(c, _K[field], where, field, default)  # noqa: E731
    layers, hidden, heads = g("layers"), g("hidden_size"), g("attention_heads")
    experts = g("experts", 0)
    inter = g("intermediate_size", 4 * hidden)
    f: dict[str, Any] = {
        "layers": layers,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "attention_heads": heads,
        "kv_heads": g("kv_heads", heads),
        "head_dim": get_int(c, "head_dim", where, "head_dim", max(hidden // heads, 1)),
        "vocab_size": g("vocab_size"),
        "experts": experts,
        "experts_active": g("experts_active", 0) if experts else 0,
        "shared_experts": g("shared_experts", 0) if experts else 0,
        "moe_intermediate_size": g("moe_intermediate_size", inter) if experts else 0,
        "dense_layers": min(get_int(c, "first_k_dense_replace", where, "dense_layers", 0), layers) if experts else 0,
        "kv_lora_rank": get_int(c, "kv_lora_rank", where, "kv_lora_rank", 0),
    }
    if experts and not f["experts_active"]:
        bad_file(where, "config.json has experts but no num_experts_per_tok")
    if f["experts_active"] > experts:
        bad_file(where, f"num_experts_per_tok {f['experts_active']} is more than the {experts} experts")
    if experts and not f["shared_experts"] and get_int(c, ("shared_expert_intermediate_size", "shared_intermediate_size", "moe_shared_expert_intermediate_size"), where, "any", 0):
        f["shared_experts"] = 1  # Qwen2-MoE / Qwen3-Next: one shared expert of its own width
    if f["kv_lora_rank"]:  # MLA: the query/key head is the no-RoPE part plus the decoupled RoPE part
        f["qk_rope_head_dim"] = get_int(c, "qk_rope_head_dim", where, "qk_rope_head_dim", 0)
        if c.get("qk_nope_head_dim") is not None:  # GLM-5 also writes head_dim = the RoPE part (64)
            f["head_dim"] = get_int(c, "qk_nope_head_dim", where, "head_dim") + f["qk_rope_head_dim"]
    else:
        f["qk_rope_head_dim"] = 0
    f["rotary_dims"] = _rotary_dims(c, f["head_dim"], where)
    ctx = g("max_context", 0)
    if not ctx:
        ctx = 4096
        notes.append("config.json does not say max_position_embeddings: 4096 assumed")
    f["max_context"] = ctx
    f["sliding_window"], f["sliding_window_layers"] = _sliding(c, model_type, layers, where, notes)
    # transformers' PretrainedConfig default is True, and a saved config omits values equal to it.
    tied = c.get("tie_word_embeddings", True)
    f["tied_embeddings"] = tied if isinstance(tied, bool) else True
    assumed: list[str] = []
    f.update(hybrid.layer_fields(c, layers, hidden, where, assumed))
    compressed = hybrid.compressed_fields(c, layers, where, assumed)
    if compressed:  # DeepSeek V4: the window is every layer's, the note from _sliding does not apply
        f.update(compressed)
        notes[:] = [n for n in notes if not n.startswith("sliding window")]
        if c.get("intermediate_size") is None and experts:  # no dense layers: the shared expert's width
            f["intermediate_size"] = f["moe_intermediate_size"]
    if c.get("enable_moe_block") is True:
        assumed.append("Gemma 4 MoE layers run a dense MLP beside their experts: counted as an always-on shared "
                       "expert of intermediate_size")
    if c.get("altup_num_inputs") is not None:
        assumed.append("Gemma 3n's AltUp and LAuReL blocks are not counted in the parameters (small)")
    f["assumptions"] = tuple(assumed)
    classes = cfg.get("architectures")
    if isinstance(classes, list) and classes and isinstance(classes[0], str) and len(classes[0]) <= 100:
        f["architecture"] = classes[0]  # the class transformers (and runtimes keyed on it) load
    return top_type or model_type or "unknown", f, notes


def _sliding(c: dict[str, Any], model_type: str, layers: int, where: Path, notes: list[str]) -> tuple[int, int]:
    window = get_int(c, "sliding_window", where, "sliding_window", 0)
    if not window or c.get("use_sliding_window") is False:
        return 0, 0
    kinds = c.get("layer_types")
    if isinstance(kinds, list) and len(kinds) <= 4096:
        return window, sum(1 for k in kinds[:layers] if k == "sliding_attention")
    if c.get("sliding_window_pattern") is not None:
        return window, swa_layers_from_period(get_int(c, "sliding_window_pattern", where, "dense_layers"), layers)
    for prefix, period in (("gemma2", 2), ("gemma3n", 5), ("gemma3", 6), ("cohere2", 4)):
        if model_type.startswith(prefix):
            return window, swa_layers_from_period(period, layers)
    if model_type in ("mistral", "mixtral"):
        return window, layers
    notes.append(f"sliding window {window} declared, but which layers use it is unknown for {model_type or 'this model'}: all counted as global")
    return window, 0


def estimate_params(cfg: dict[str, Any], f: dict[str, Any], where: Path) -> tuple[int, int]:
    """(total, active) parameters from the config's shapes."""
    c = text_config(cfg, where)
    H, L, V = f["hidden_size"], f["layers"], f["vocab_size"]
    heads, kv, hd = f["attention_heads"], f["kv_heads"], f["head_dim"]
    if f["kv_lora_rank"]:
        rope = f["qk_rope_head_dim"]
        nope = get_int(c, "qk_nope_head_dim", where, "head_dim", max(hd - rope, 1))
        v_hd = get_int(c, "v_head_dim", where, "head_dim", nope)
        q_lora = get_int(c, "q_lora_rank", where, "kv_lora_rank", 0)
        qk, r = nope + rope, f["kv_lora_rank"]
        q = (H * q_lora + q_lora + q_lora * heads * qk) if q_lora else H * heads * qk
        attn = q + H * (r + rope) + r + r * heads * (nope + v_hd) + heads * v_hd * H
    else:
        attn = 2 * H * heads * hd + 2 * H * kv * hd
        if c.get("attention_bias") is True:
            attn += heads * hd + 2 * kv * hd + H
        elif str(c.get("model_type", "")).startswith("qwen2"):
            attn += heads * hd + 2 * kv * hd
    mtype = str(c.get("model_type", ""))
    if mtype.startswith(("qwen3", "gemma3", "gemma4")):
        attn += 2 * hd  # q_norm, k_norm
    if c.get("attn_output_gate", mtype == "qwen3_next") is True:
        # gated attention (Qwen3-Next, Qwen3.5 / 3.6): q_proj writes the sigmoid output gate beside the queries,
        # num_attention_heads * head_dim * 2 (transformers modeling_qwen3_next.py / modeling_qwen3_5.py; vLLM's
        # qwen3_next.py takes attn_output_gate, True when the config has none)
        attn += H * heads * hd
    norms = 4 * H if mtype.startswith(("gemma2", "gemma3", "gemma4")) else 2 * H  # Gemma adds post-norms
    mats = 2 if c.get("mlp_hidden_act") == "relu2" else 3  # Nemotron-H: ungated relu^2 MLPs (up, down)
    dense_mlp = mats * H * f["intermediate_size"]
    E, k, Im = f["experts"], f["experts_active"], f["moe_intermediate_size"]
    shared_width = get_int(c, ("shared_expert_intermediate_size", "shared_intermediate_size",
                               "moe_shared_expert_intermediate_size"), where, "any", 0)
    shared = mats * H * shared_width + (H if mats == 3 else 0) if shared_width else f["shared_experts"] * mats * H * Im
    if c.get("enable_moe_block") is True:  # Gemma 4: a dense MLP runs beside the experts in every layer
        shared += dense_mlp
    moe_mlp = E * mats * H * Im + H * E + shared
    if c.get("topk_method") == "noaux_tc":
        moe_mlp += E  # DeepSeek V3's router bias (e_score_correction_bias)
    total = V * H * (1 if f["tied_embeddings"] else 2) + H
    pattern = f.get("layer_pattern") or "a" * L
    rec = f.get("recurrent")
    mixer_r = hybrid.recurrent_params(rec, H, c, where) if rec is not None else 0
    hop = c.get("hybrid_override_pattern") if isinstance(c.get("hybrid_override_pattern"), str) else ""
    if hop and len(hop) == L:  # Nemotron-H: each block is a mixer or an MLP, one norm each
        norms = H
    gkv, ghd = f.get("global_kv_heads", 0) or kv, f.get("global_head_dim", 0) or hd
    kinds = c.get("layer_types") if isinstance(c.get("layer_types"), list) else []
    k_eq_v = c.get("attention_k_eq_v") is True
    attn_global = 2 * H * heads * ghd + H * gkv * ghd * (1 if k_eq_v else 2) + (2 * ghd if mtype.startswith(("qwen3", "gemma3", "gemma4")) else 0)
    ple = f.get("per_layer_embed_params", 0)
    ple_width = ple // (L * get_int(c, ("vocab_size_per_layer_input", "vocab_size"), where, "vocab_size")) if ple else 0
    total += ple + (H * L * ple_width + ple_width if ple else 0)  # table, model projection and its norm
    unused = 0
    ratios = f.get("compress_ratios") or ()
    hc_layer, hc_head = hybrid.hyper_connection_params(c, H, where) if ratios else (0, 0)
    total += hc_head
    hash_layers = get_int(c, "num_hash_layers", where, "dense_layers", 0) if ratios else 0
    for il in range(L):
        kind = pattern[il]
        if hop and len(hop) == L:
            letter = hop[il]
            mixer = attn if letter == "*" else mixer_r if letter == "M" else 0
            mlp = moe_mlp if letter == "E" else dense_mlp if letter == "-" else 0
            total += mixer + norms + mlp
            if letter == "E":
                unused += (E - k) * mats * H * Im
            continue
        is_moe = E > 0 and (il in f["expert_layers"] if f.get("expert_layers") else il >= f["dense_layers"])
        if kind == "r":
            mixer = mixer_r
        elif (gkv != kv or ghd != hd) and il < len(kinds) and kinds[il] == "full_attention":
            mixer = attn_global
        else:
            mixer = attn
        if ratios:  # DeepSeek V4: its own attention and compressor, two hyper-connections per layer
            mixer = hybrid.compressed_attention_params(c, H, ratios[il], where) + hc_layer
            if is_moe and il < hash_layers:  # hash routing: a token-to-expert table instead of the router bias
                mixer += V * k - (E if c.get("topk_method") == "noaux_tc" else 0)
        total += mixer + norms + (moe_mlp if is_moe else dense_mlp)
        if ple:  # per-layer input gate and projection, and their norm
            total += 2 * H * ple_width + H
        if is_moe:
            unused += (E - k) * mats * H * Im
    return total, total - unused
