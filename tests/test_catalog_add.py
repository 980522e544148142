"""`advisor catalog add REFERENCE` against the local Hub server (tests/hubserver.py): the model is
written into the user catalog and named like a built-in afterwards, offline; nothing is overwritten
silently; a release the catalog knows as another model's sibling says how it differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from hubserver import Hub, Repo, Server  # noqa: E402

# Kimi K2 Instruct-0905's config.json as published (values as in hardware_db/models.toml's kimi-k2 entry,
# whose notes record the 262,144 context of this refresh; the entry lists it in other_releases). Kimi K2
# Thinking is a built-in of its own (kimi-k2-thinking), so it is no longer the example of another release.
KIMI_0905 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 64, "num_key_value_heads": 64,
    "n_shared_experts": 1, "n_routed_experts": 384, "num_experts_per_tok": 8, "first_k_dense_replace": 1,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 163840, "max_position_embeddings": 262144, "tie_word_embeddings": False, "topk_method": "noaux_tc",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]}}
# Qwen3-30B-A3B-Instruct-2507: the catalog's qwen3-30b-a3b shapes with the 2507 release's 262,144 context
QWEN_2507 = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
    "max_position_embeddings": 262144, "tie_word_embeddings": False}


@pytest.fixture
def env(tmp_path):
    hub = Hub()
    hub.repos["moonshotai/Kimi-K2-Instruct-0905"] = Repo(files={"config.json": json.dumps(KIMI_0905).encode()})
    hub.repos["Qwen/Qwen3-30B-A3B-Instruct-2507"] = Repo(files={"config.json": json.dumps(QWEN_2507).encode()})
    with Server(hub) as url:
        yield hub, {"HF_ENDPOINT": url, "ADVISOR_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
                    "ADVISOR_CONFIG_DIR": str(tmp_path / "cfg"), "NO_COLOR": "1"}


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_added_model_is_named_like_a_builtin_offline(env) -> None:
    hub, e = env
    r = _cli(e, "catalog", "add", "moonshotai/Kimi-K2-Instruct-0905")
    assert r.returncode == 0, r.stderr
    assert "added kimi-k2-instruct-0905" in r.stdout and "262,144 tokens" in r.stdout
    # the name that used to become Kimi K2 Instruct silently now says how it differs
    assert "different release from the built-in kimi-k2 (Kimi K2 Instruct): max context 262,144 vs 131,072" in r.stderr
    text = (Path(e["ADVISOR_CONFIG_DIR"]) / "models-added.toml").read_text()
    assert text.startswith("# written by `advisor catalog add`") and 'aliases = ["moonshotai/Kimi-K2-Instruct-0905"]' in text
    n = len(hub.log)
    for name in ("kimi-k2-instruct-0905", "moonshotai/Kimi-K2-Instruct-0905"):
        r = _cli({**e, "HF_ENDPOINT": "http://127.0.0.1:9"}, "check", name, "--gpu", "rtx-3090", "--json")
        doc = json.loads(r.stdout)
        assert doc["model"]["id"] == "kimi-k2-instruct-0905" and doc["model"]["params_total"] == 1026408232448
    assert len(hub.log) == n
    assert _cli(e, "catalog", "validate").returncode == 0


def test_release_keeps_its_own_context(env) -> None:
    _, e = env
    r = _cli(e, "catalog", "add", "Qwen/Qwen3-30B-A3B-Instruct-2507", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["id"] == "qwen3-30b-a3b-instruct-2507" and doc["max_context"] == 262144
    assert "max context 262,144 vs 40,960" in doc["notes"][0]
    r = _cli(e, "check", "qwen3-30b-a3b-instruct-2507", "--gpu", "rtx-3090", "--ctx", "200000", "--json")
    assert json.loads(r.stdout)["context_tokens"] == 200000  # not capped at the April release's 40,960


def test_nothing_is_overwritten_silently(env) -> None:
    _, e = env
    assert _cli(e, "catalog", "add", "moonshotai/Kimi-K2-Instruct-0905").returncode == 0
    r = _cli(e, "catalog", "add", "moonshotai/Kimi-K2-Instruct-0905")
    assert r.returncode == 2 and "pass --replace" in r.stderr
    r = _cli(e, "catalog", "add", "moonshotai/Kimi-K2-Instruct-0905", "--replace", "--alias", "Kimi 0905")
    assert r.returncode == 0 and "replaced kimi-k2-instruct-0905" in r.stdout
    r = _cli(e, "catalog", "add", "Qwen/Qwen3-30B-A3B-Instruct-2507", "--id", "qwen3-30b-a3b")
    assert r.returncode == 2 and "is a built-in model" in r.stderr
    r = _cli(e, "catalog", "add", "Qwen/Qwen3-30B-A3B-Instruct-2507", "--alias", "qwen3 32b")
    assert r.returncode == 2 and "already names qwen3-32b" in r.stderr
    own = Path(e["ADVISOR_CONFIG_DIR"]) / "models-added.toml"
    before = own.read_text()
    assert "Kimi 0905" in before
    own.write_text("# my own notes\n" + before)
    r = _cli(e, "catalog", "add", "Qwen/Qwen3-30B-A3B-Instruct-2507")
    assert r.returncode == 2 and "was not written by `advisor catalog add`" in r.stderr
    assert own.read_text() == "# my own notes\n" + before


def test_a_model_the_catalog_would_refuse_is_not_written(env, tmp_path) -> None:
    hub, e = env
    tiny = {**QWEN_2507, "hidden_size": 8, "intermediate_size": 8, "moe_intermediate_size": 8, "num_hidden_layers": 1,
            "vocab_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "num_experts": 2,
            "num_experts_per_tok": 1}
    hub.repos["org/Tiny"] = Repo(files={"config.json": json.dumps(tiny).encode()})
    r = _cli(e, "catalog", "add", "org/Tiny")
    assert r.returncode == 2 and "would not validate" in r.stderr and "nothing was written" in r.stderr
    assert not (Path(e["ADVISOR_CONFIG_DIR"]) / "models-added.toml").exists()


def test_catalog_add_unreachable_is_one_line(tmp_path) -> None:
    e = {"HF_ENDPOINT": "http://127.0.0.1:9", "ADVISOR_CACHE_DIR": str(tmp_path), "ADVISOR_CONFIG_DIR": str(tmp_path / "cfg"),
         "HF_HOME": str(tmp_path / "hf")}
    r = _cli(e, "catalog", "add", "moonshotai/Kimi-K2-Instruct-0905")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "can't reach" in r.stderr
