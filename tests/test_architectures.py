"""Today's architectures, exactly: hybrid linear attention, Mamba hybrids, KV-shared layers,
per-layer embeddings, DeepSeek V3.2's indexer, MTP layers, and what a reader must say it assumed.

KV and state sizes follow llama.cpp: a hybrid model's KV cache covers only the layers where
`!hparams.is_recurrent(il)`, and each recurrent layer keeps (n_embd_r + n_embd_s) f32 values per
sequence, n_embd_r = (d_conv - 1) x (d_inner + 2 n_group d_state), n_embd_s = d_state x d_inner
(src/llama-hparams.cpp); convert_hf_to_gguf.py maps Gated DeltaNet onto them as
d_inner = linear_num_value_heads x linear_value_head_dim, d_state = linear_key_head_dim,
n_group = linear_num_key_heads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gguf")

from test_modelfile import Tiny, make_gguf  # noqa: E402

from advisor.catalog.load import load_catalog, validate_entry  # noqa: E402
from advisor.catalog.types import GIB, ModelSpec  # noqa: E402
from advisor.engine import layers  # noqa: E402
from advisor.engine import memory as mem  # noqa: E402
from advisor.modelfile import read_model  # noqa: E402

RULES = load_catalog(False).rules

# Qwen3.6-35B-A3B's text_config shape (Qwen/Qwen3.6-35B-A3B config.json): 40 layers, full attention
# every 4th, 2 KV heads of 256, Gated DeltaNet with 16 key heads and 32 value heads of 128, kernel 4.
QWEN36_TEXT = {
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320,
    "max_position_embeddings": 262144, "full_attention_interval": 4,
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 10,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "num_experts": 256,
    "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
    "mtp_num_hidden_layers": 1, "tie_word_embeddings": False,
}
QWEN36 = {"model_type": "qwen3_5_moe", "text_config": QWEN36_TEXT,
          "vision_config": {"model_type": "qwen3_5_vision", "depth": 27}}
GDN_STATE = 3 * (32 * 128 + 2 * 16 * 128) + 128 * 32 * 128  # f32 values per layer and sequence


def _config(tmp_path: Path, cfg: dict, name: str = "m") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder / "config.json"


def test_qwen36_at_262k_gets_5_gib_of_kv_plus_its_state_not_20(tmp_path: Path) -> None:
    spec = read_model(str(_config(tmp_path, QWEN36))).spec
    assert spec.layer_pattern == "rrra" * 10
    assert spec.recurrent.kind == "gated_deltanet" and spec.recurrent.elements == GDN_STATE
    per_layer = mem.kv_bytes_per_layer(spec, 262144, "f16", RULES)
    kv = sum(b for il, b in enumerate(per_layer) if layers.layer_kind(spec, il) == "a")
    state = sum(b for il, b in enumerate(per_layer) if layers.layer_kind(spec, il) == "r")
    assert kv == 10 * 262144 * 2 * 2 * 256 * 2 == 5 * GIB
    assert state == 30 * GDN_STATE * 4  # ~63 MiB, whatever the context
    assert sum(per_layer) < 5.1 * GIB  # a plain transformer of this shape would need 20 GiB
    # the state does not grow with the context, it grows with the sequences
    assert sum(mem.kv_bytes_per_layer(spec, 1024, "f16", RULES)) - 10 * 1024 * 2048 == state
    assert sum(mem.kv_bytes_per_layer(spec, 1024, "q8_0", RULES, sequences=4)) > 4 * state


def test_qwen36_check_json_reports_the_small_kv_and_says_why(tmp_path: Path) -> None:
    cfg = _config(tmp_path, QWEN36)
    out = subprocess.run([sys.executable, "-m", "advisor", "check", str(cfg), "--gpu", "h200-sxm", "--ctx", "262144", "--runtime", "vllm",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    assert 5 * GIB <= report["memory"]["kv_cache_bytes"] <= 5 * GIB + 30 * GDN_STATE * 4
    codes = {f["code"]: f["message"] for f in report["findings"]}
    assert "KV cache on 10 of 40 layers" in codes["ARC001"] and "gated deltanet" in codes["ARC001"]
    assert "multi-token-prediction" in codes["ARC003"]


def test_qwen3_next_flat_config_uses_the_interval(tmp_path: Path) -> None:
    cfg = {k: v for k, v in QWEN36_TEXT.items() if k != "layer_types"}
    cfg.update(model_type="qwen3_next", num_hidden_layers=48)
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert spec.layer_pattern == "rrra" * 12 and not spec.assumptions


def test_gated_attention_counts_its_output_gate(tmp_path: Path) -> None:
    """Qwen3-Next's and Qwen3.5 / 3.6's q_proj writes a sigmoid output gate beside the queries (transformers
    modeling_qwen3_5.py and modeling_qwen3_next.py: num_attention_heads * head_dim * 2): every Qwen3.5 / 3.6 config
    says attn_output_gate true, Qwen3-Next's says nothing and vLLM takes it as true. The catalog had counted the
    queries alone, 0.50 B weights short on the 27B models."""
    plain = read_model(str(_config(tmp_path, QWEN36, "plain"))).spec
    gated = read_model(str(_config(tmp_path, {**QWEN36, "text_config": {**QWEN36_TEXT, "attn_output_gate": True}},
                                   "gated"))).spec
    gate = 10 * 2048 * 16 * 256  # 10 full-attention layers, hidden 2048, 16 heads of 256
    assert (gated.params_total - plain.params_total, gated.params_active - plain.params_active) == (gate, gate)
    flat = {k: v for k, v in QWEN36_TEXT.items() if k != "layer_types"}
    nxt = read_model(str(_config(tmp_path, {**flat, "model_type": "qwen3_next"}, "next"))).spec
    assert nxt.params_total == read_model(str(_config(tmp_path, {**flat, "model_type": "qwen3_next",
                                                                 "attn_output_gate": False}, "off"))).spec.params_total + gate
    cat = load_catalog(False)
    assert (cat.models["qwen3.6-27b"].params_total, cat.models["qwen3.5-397b-a17b"].params_active) == \
        (26_895_998_464, 17_349_040_896)  # recounted from their configs (hardware_db/models.toml sources)


GRANITE_4H = {  # ibm-granite/granite-4.0-h-tiny config.json (shape): Mamba2 with 4 attention layers of 40
    "model_type": "granitemoehybrid", "hidden_size": 1536, "num_hidden_layers": 40, "num_attention_heads": 12,
    "num_key_value_heads": 4, "vocab_size": 100352, "max_position_embeddings": 131072,
    "layer_types": ["attention" if il in (5, 15, 25, 35) else "mamba" for il in range(40)],
    "mamba_d_conv": 4, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_n_heads": 48,
    "mamba_expand": 2, "num_local_experts": 64, "num_experts_per_tok": 6, "intermediate_size": 512,
    "shared_intermediate_size": 1024, "position_embedding_type": "nope",
}


def test_granite_4h_mamba2_state_and_kv_on_four_layers(tmp_path: Path) -> None:
    spec = read_model(str(_config(tmp_path, GRANITE_4H))).spec
    assert layers.kv_layer_count(spec) == 4 and layers.recurrent_layer_count(spec) == 36
    r = spec.recurrent
    assert (r.kind, r.inner_size, r.state_size, r.group_count) == ("mamba2", 3072, 128, 1)
    assert r.elements == 3 * (3072 + 2 * 128) + 128 * 3072
    kv = mem.kv_bytes_per_layer(spec, 131072, "f16", RULES)
    assert sum(kv) == 4 * 131072 * 2 * 4 * 128 * 2 + 36 * r.elements * 4


def test_nemotron_h_pattern_has_mlp_only_blocks(tmp_path: Path) -> None:
    hop = "M-M-M-M*-M-M-M-M-"
    cfg = {"model_type": "nemotron_h", "hidden_size": 512, "num_hidden_layers": len(hop), "num_attention_heads": 8,
           "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 8192,
           "intermediate_size": 2048, "hybrid_override_pattern": hop, "conv_kernel": 4, "mamba_num_heads": 16,
           "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "mlp_hidden_act": "relu2"}
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert spec.layer_pattern == hop.replace("M", "r").replace("*", "a")
    assert layers.kv_layer_count(spec) == 1 and layers.recurrent_layer_count(spec) == 8
    assert spec.recurrent.group_count == 8 and spec.recurrent.inner_size == 1024
    assert spec.expert_layers == () and spec.expert_matrices == 2  # no E blocks in this pattern


def test_jamba_period_and_mamba1_state(tmp_path: Path) -> None:
    cfg = {"model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "vocab_size": 65536, "max_position_embeddings": 262144,
           "intermediate_size": 14336, "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_conv": 4,
           "mamba_d_state": 16, "mamba_expand": 2, "num_experts": 16, "num_experts_per_tok": 2}
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert [il for il, k in enumerate(spec.layer_pattern) if k == "a"] == [4, 12, 20, 28]
    assert spec.recurrent.kind == "mamba" and spec.recurrent.elements == 3 * 8192 + 16 * 8192
    cfg.update(expert_layer_period=2, expert_layer_offset=1)
    spec = read_model(str(_config(tmp_path, cfg, "with-moe"))).spec
    assert spec.expert_layers == tuple(range(1, 32, 2))


def test_gemma_kv_shared_layers_and_per_layer_embeddings(tmp_path: Path) -> None:
    # google/gemma-3n-E4B-it text_config shape: 35 layers, the last 15 reuse earlier layers' KV
    cfg = {"model_type": "gemma3n", "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 262400, "vocab_size_per_layer_input": 262144,
        "hidden_size_per_layer_input": 256, "max_position_embeddings": 32768, "intermediate_size": 16384,
        "num_kv_shared_layers": 15, "sliding_window": 512,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7, "altup_num_inputs": 4}}
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert spec.layer_pattern == "a" * 20 + "-" * 15
    assert spec.per_layer_embed_params == 262144 * 35 * 256
    kv = mem.kv_bytes_per_layer(spec, 32768, "f16", RULES)
    assert kv[20:] == (0,) * 15 and all(kv[:20])
    assert any("AltUp" in a for a in spec.assumptions)


def test_gemma4_full_attention_layers_have_their_own_kv_shape(tmp_path: Path) -> None:
    # google/gemma-4-31B-it text_config (shape): sliding layers 16 KV heads of 256, global 4 of 512
    kinds = (["sliding_attention"] * 5 + ["full_attention"]) * 10
    cfg = {"model_type": "gemma4", "text_config": {
        "model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": 60, "num_attention_heads": 32,
        "num_key_value_heads": 16, "head_dim": 256, "num_global_key_value_heads": 4, "global_head_dim": 512,
        "vocab_size": 262144, "max_position_embeddings": 262144, "intermediate_size": 21504,
        "sliding_window": 1024, "layer_types": kinds, "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0}}
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert (spec.global_kv_heads, spec.global_head_dim, spec.sliding_window_layers) == (4, 512, 50)
    kv = mem.kv_bytes_per_layer(spec, 262144, "f16", RULES)
    assert sorted(set(kv)) == [1024 * 2 * 16 * 256 * 2, 262144 * 2 * 4 * 512 * 2]
    assert sum(kv) == 50 * 1024 * 16384 + 10 * 262144 * 8192  # bytes per token: 2 x heads x dim x 2


def test_deepseek_v32_indexer_adds_its_key_to_the_latent(tmp_path: Path) -> None:
    cfg = {"model_type": "deepseek_v32", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
           "num_key_value_heads": 128, "vocab_size": 129280, "max_position_embeddings": 163840,
           "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
           "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 3, "kv_lora_rank": 512,
           "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536,
           "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048, "num_nextn_predict_layers": 1}
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert (spec.indexer_head_dim, spec.mtp_layers) == (128, 1)
    assert mem.kv_bytes_per_layer(spec, 1000, "f16", RULES)[0] == 1000 * (512 + 64 + 128) * 2


def test_unknown_hybrid_is_answered_with_a_stated_assumption(tmp_path: Path) -> None:
    cfg = {"model_type": "mystery_hybrid", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
           "vocab_size": 1000, "max_position_embeddings": 4096, "ssm_cfg": {"d_state": 16}, "mamba_version": 3}
    path = _config(tmp_path, cfg)
    assert read_model(str(path)).spec.assumptions
    out = subprocess.run([sys.executable, "-m", "advisor", "check", str(path), "--gpu", "rtx-4090", "--runtime", "vllm", "--json"],
                         capture_output=True, text=True, timeout=120)
    found = [f for f in json.loads(out.stdout)["findings"] if f["code"] == "ARC002"]
    assert found and found[0]["severity"] == "warning" and "plain attention" in found[0]["message"]


def test_unknown_layer_type_is_stated(tmp_path: Path) -> None:
    cfg = dict(QWEN36_TEXT, layer_types=["linear_attention", "retention", "linear_attention", "full_attention"] * 10)
    spec = read_model(str(_config(tmp_path, cfg))).spec
    assert any("'retention'" in a for a in spec.assumptions)


def test_gguf_hybrid_reads_recurrent_layers_ssm_keys_and_skips_mtp(tmp_path: Path) -> None:
    path = tmp_path / "q.gguf"
    arch = "qwen35moe"
    extra = {f"{arch}.attention.recurrent_layers": [True, True, True, False, True, True, True, False, False],
             f"{arch}.nextn_predict_layers": 1, f"{arch}.ssm.conv_kernel": 4, f"{arch}.ssm.inner_size": 4096,
             f"{arch}.ssm.state_size": 128, f"{arch}.ssm.group_count": 16, f"{arch}.ssm.time_step_rank": 32}
    expected = make_gguf(path, Tiny(arch=arch, layers=9, extra=extra))
    lm = read_model(str(path))
    spec = lm.spec
    assert spec.layers == 8 and spec.mtp_layers == 1 and spec.layer_pattern == "rrrarrra"
    assert spec.recurrent.elements == GDN_STATE
    mtp = sum(b for n, b in expected.items() if n.startswith("blk.8."))
    assert lm.layout.unloaded_bytes == mtp and lm.other_bytes == expected["output_norm.weight"]


def test_gguf_mamba_hybrid_from_zero_kv_heads(tmp_path: Path) -> None:
    path = tmp_path / "g.gguf"
    arch = "granitehybrid"
    extra = {f"{arch}.ssm.conv_kernel": 4, f"{arch}.ssm.inner_size": 512, f"{arch}.ssm.state_size": 64,
             f"{arch}.ssm.group_count": 1}
    make_gguf(path, Tiny(arch=arch, layers=4, kv_heads=[0, 2, 0, 0], extra=extra))
    spec = read_model(str(path)).spec
    assert spec.layer_pattern == "rarr" and spec.recurrent.kind == "mamba2"


def test_gguf_kv_shared_layers(tmp_path: Path) -> None:
    path = tmp_path / "e.gguf"
    make_gguf(path, Tiny(arch="gemma3n", layers=6, extra={"gemma3n.attention.shared_kv_layers": 2}))
    assert read_model(str(path)).spec.layer_pattern == "aaaa--"


@pytest.mark.parametrize("pattern, problem", [
    ("aar", "letters for 4 layers"), ("aaxa", "may only hold"), ("arra", "no recurrent state"), ("----", "no cache"),
])
def test_catalog_refuses_an_inconsistent_layer_pattern(pattern: str, problem: str) -> None:
    entry = {"id": "x", "name": "X", "family": "x", "params_total": 10**9, "params_active": 10**9, "layers": 4,
             "hidden_size": 512, "intermediate_size": 1024, "attention_heads": 8, "kv_heads": 8, "head_dim": 64,
             "vocab_size": 1000, "max_context": 4096, "sources": ["test"], "layer_pattern": pattern}
    with pytest.raises(ValueError, match=problem):
        validate_entry(ModelSpec, entry)


# The 2025-26 catalog (issue 16): the families and GPUs users asked about, by id.
NEW_MODELS = ["qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b", "qwen3.6-27b",
              "qwen3.6-35b-a3b", "qwen3-next-80b-a3b", "qwen3-vl-8b", "qwen3-vl-32b", "qwen3-vl-30b-a3b",
              "qwen3-vl-235b-a22b", "gemma-4-26b-a4b", "gemma-4-31b", "deepseek-v3.1", "deepseek-v3.2", "glm-5",
              "glm-5.1", "minimax-m2.5", "minimax-m2.7", "seed-oss-36b", "nemotron-3-nano-30b-a3b"]
NEW_GPUS = ["rx-7900-xt", "rx-9070-xt", "rx-9070", "arc-b580", "mi50-16gb", "mi60", "mi250x", "tesla-p100-16gb",
            "rtx-5090-d", "rtx-5090-d-v2", "rtx-pro-4000", "rtx-pro-5000", "rtx-pro-5000-72gb", "m1-pro-32gb",
            "m3-pro-36gb", "m4-pro-64gb", "m5-pro-64gb", "m5-max-128gb", "m3-ultra-96gb", "m3-ultra-256gb",
            "m3-ultra-60c-96gb", "m3-ultra-60c-256gb"]


def test_the_2025_26_catalog_is_listed_by_the_cli() -> None:
    models = json.loads(subprocess.run([sys.executable, "-m", "advisor", "models", "--json"], capture_output=True,
                                       text=True, timeout=120, check=True).stdout)
    gpus = json.loads(subprocess.run([sys.executable, "-m", "advisor", "gpus", "--json"], capture_output=True,
                                     text=True, timeout=120, check=True).stdout)
    assert set(NEW_MODELS) <= {m["id"] for m in models}
    assert set(NEW_GPUS) <= {g["id"] for g in gpus}


def test_catalog_hybrids_carry_their_layer_kinds() -> None:
    cat = load_catalog(False)
    q = cat.models["qwen3.6-35b-a3b"]
    kv = mem.kv_bytes_per_layer(q, 262144, "f16", RULES)
    assert sum(b for il, b in enumerate(kv) if q.layer_pattern[il] == "a") == 5 * GIB
    assert q.recurrent.elements == GDN_STATE
    nemo = cat.models["nemotron-3-nano-30b-a3b"]
    assert (layers.kv_layer_count(nemo), layers.recurrent_layer_count(nemo)) == (6, 23)  # card: 6 GQA, 23 Mamba-2
    # its 23 MoE blocks carry the experts (2 matrices each, relu^2), not all 52 layers
    lay = mem.weights_layout(nemo, cat.quants["Q4_K_M"])
    assert sum(1 for b in lay.expert_bytes if b) == 23 and nemo.expert_matrices == 2
    assert sum(lay.expert_bytes) < lay.total_bytes
    v32 = cat.models["deepseek-v3.2"]
    assert layers.kv_elements_per_token(v32, False) == 512 + 64 + 128
    g4 = cat.models["gemma-4-31b"]
    assert (g4.global_kv_heads, g4.global_head_dim, g4.sliding_window_layers) == (4, 512, 50)
