"""The built-in LLM catalog (hardware_db/models.toml): schema, contract ids, internal consistency,
agreement with the shared reference table, and a shape-based sanity check of every parameter count."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from advisor.catalog.types import ModelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
MODELS_TOML = ROOT / "hardware_db" / "models.toml"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CONFIGS_CSV = SHARED / "data" / "model_configs.csv"

# docs/contract.md, section "Ids": the model ids the catalog must have.
CONTRACT_IDS = {
    "llama-3-8b", "llama-3-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b",
    "llama-3.2-3b", "llama-3.3-70b", "llama-4-scout", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
    "qwen2.5-72b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
    "mistral-7b", "mixtral-8x7b", "mixtral-8x22b", "mistral-small-24b", "mistral-large-123b",
    "gemma-2-9b", "gemma-2-27b", "gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "phi-3-mini", "phi-4",
    "deepseek-v3", "deepseek-r1", "deepseek-r1-distill-qwen-32b", "gpt-oss-20b", "gpt-oss-120b",
    "glm-4.5-air", "command-r-35b",
}

# Rows of shared/data/model_configs.csv (column `model`) and the catalog id each describes.
CSV_TO_ID = {
    "Llama-3.1-8B": "llama-3.1-8b",
    "Llama-3.1-70B": "llama-3.1-70b",
    "Llama-3.1-405B": "llama-3.1-405b",
    "Llama-3.2-1B": "llama-3.2-1b",
    "Llama-3.2-3B": "llama-3.2-3b",
    "Llama-3.3-70B": "llama-3.3-70b",
    "Qwen2.5-7B": "qwen2.5-7b",
    "Qwen2.5-14B": "qwen2.5-14b",
    "Qwen2.5-32B": "qwen2.5-32b",
    "Qwen2.5-72B": "qwen2.5-72b",
    "Qwen3-8B": "qwen3-8b",
    "Qwen3-14B": "qwen3-14b",
    "Qwen3-32B": "qwen3-32b",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "Mistral-7B-v0.3": "mistral-7b",
    "Mixtral-8x7B": "mixtral-8x7b",
    "Mixtral-8x22B": "mixtral-8x22b",
    "Mistral-Small-24B": "mistral-small-24b",
    "Mistral-Large-2 (123B)": "mistral-large-123b",
    "Gemma-2-9B": "gemma-2-9b",
    "Gemma-2-27B": "gemma-2-27b",
    "Gemma-3-4B": "gemma-3-4b",
    "Gemma-3-12B": "gemma-3-12b",
    "Gemma-3-27B": "gemma-3-27b",
    "Phi-3-mini": "phi-3-mini",
    "Phi-4 (14B)": "phi-4",
    "DeepSeek-V3 (671B, MLA)": "deepseek-v3",
    "DeepSeek-R1-Distill-Qwen-32B": "deepseek-r1-distill-qwen-32b",
    "gpt-oss-20b": "gpt-oss-20b",
    "gpt-oss-120b": "gpt-oss-120b",
    "Llama-4-Scout": "llama-4-scout",
    "GLM-4.5-Air": "glm-4.5-air",
    "Command-R 35B": "command-r-35b",
}

# CSV column -> ModelSpec field, compared exactly wherever the CSV cell is filled.
EXACT_COLUMNS = {
    "num_hidden_layers": "layers",
    "hidden_size": "hidden_size",
    "num_attention_heads": "attention_heads",
    "num_key_value_heads": "kv_heads",
    "head_dim": "head_dim",
    "vocab_size": "vocab_size",
    "num_experts": "experts",
    "num_experts_per_tok": "experts_active",
    "num_shared_experts": "shared_experts",
    "moe_intermediate_size": "moe_intermediate_size",
    "kv_lora_rank": "kv_lora_rank",
    "qk_rope_head_dim": "qk_rope_head_dim",
}

ESTIMATE_TOLERANCE = 0.03


def _load_entries() -> list[dict]:
    with MODELS_TOML.open("rb") as fh:
        data = tomllib.load(fh)
    assert set(data) == {"model"}, f"models.toml holds only [[model]] tables, found {sorted(data)}"
    return data["model"]


ENTRIES = _load_entries()
BY_ID = {entry["id"]: entry for entry in ENTRIES}
_ADAPTER = TypeAdapter(ModelSpec)


def _spec(entry: dict) -> ModelSpec:
    return _ADAPTER.validate_python(entry)


SPECS = {entry["id"]: _spec(entry) for entry in ENTRIES}


def _csv_rows() -> list[dict[str, str]]:
    if not CONFIGS_CSV.is_file():
        pytest.skip(f"shared reference data not present ({CONFIGS_CSV})")
    with CONFIGS_CSV.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _mixer(spec: ModelSpec, il: int, attn: int) -> int:
    """A layer's token mixer: attention, or for a recurrent (`r`) layer of a hybrid its projections in
    (the convolved q/k/v channels and the gate, inner_size wide) and out. Per-head scalars, the
    convolution and norms are left out like the norms elsewhere."""
    kind = spec.layer_pattern[il] if il < len(spec.layer_pattern) else "a"
    if kind == "r" and spec.recurrent is not None:
        r = spec.recurrent
        conv = r.inner_size + 2 * r.group_count * r.state_size
        return spec.hidden_size * (conv + r.inner_size) + r.inner_size * spec.hidden_size
    return attn


def _estimate(spec: ModelSpec) -> tuple[int, int]:
    """(total, active) parameters from the shape alone: embeddings + output head (unless tied) +
    layers x (attention + MLP or experts). Norms and biases are left out (well under 0.1%).

    MLA attention (DeepSeek V3, Kimi K2) is estimated as q_a/q_b + kv_a + kv_b + o with head_dim =
    nope + rope, v_head_dim = nope and a query rank of 3 x kv_lora_rank (the schema keeps no
    q_lora_rank; DeepSeek V3 and Kimi K2 both use 1536 = 3 x 512)."""
    h = spec.hidden_size
    embed = spec.vocab_size * h * (1 if spec.tied_embeddings else 2)
    if spec.is_mla:
        nh, rope, r = spec.attention_heads, spec.qk_rope_head_dim, spec.kv_lora_rank
        nope = spec.head_dim - rope
        q_rank = 3 * r
        attn = (h * q_rank + q_rank * nh * spec.head_dim + h * (r + rope)
                + r * nh * (nope + nope) + nh * nope * h)
    else:
        attn = 2 * h * spec.attention_heads * spec.head_dim + 2 * h * spec.kv_heads * spec.head_dim
    mixers = sum(_mixer(spec, il, attn) for il in range(spec.layers))
    embed += spec.per_layer_embed_params
    if not spec.is_moe:
        total = embed + mixers + spec.layers * 3 * h * spec.intermediate_size
        return total, total
    expert = 3 * h * spec.moe_intermediate_size
    moe_layers = spec.layers - spec.dense_layers
    fixed = (embed + mixers + spec.dense_layers * 3 * h * spec.intermediate_size
             + moe_layers * (spec.experts * h + spec.shared_experts * expert))
    return fixed + moe_layers * spec.experts * expert, fixed + moe_layers * spec.experts_active * expert


# ---------------------------------------------------------------- schema and ids

@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_entry_validates_against_modelspec(entry):
    spec = _ADAPTER.validate_python(entry)
    assert spec.id == entry["id"]
    assert spec.sources, "every model names where its values come from"
    assert all(isinstance(s, str) and s.strip() for s in spec.sources)


def test_unknown_keys_are_rejected():
    from pydantic import ValidationError

    bad = dict(ENTRIES[0], not_a_field=1)
    with pytest.raises(ValidationError):
        _ADAPTER.validate_python(bad)


def test_every_contract_model_id_is_present():
    missing = CONTRACT_IDS - set(BY_ID)
    assert not missing, f"contract model ids missing from models.toml: {sorted(missing)}"


def test_ids_are_unique_lower_case_and_hyphenated():
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for model_id in ids:
        assert model_id == model_id.lower(), model_id
        assert model_id == model_id.strip() and " " not in model_id and "_" not in model_id, model_id
        assert all(c.isalnum() or c in "-." for c in model_id), model_id


def test_aliases_are_unique_and_never_another_models_id():
    ids = {e["id"] for e in ENTRIES}
    seen: dict[str, str] = {}
    for spec in SPECS.values():
        names = [a.strip().lower() for a in spec.aliases]
        assert all(names), f"{spec.id}: empty alias"
        assert len(names) == len(set(names)), f"{spec.id}: repeated alias"
        for name in names:
            assert name not in seen, f"alias {name!r} used by both {seen[name]} and {spec.id}"
            assert name == spec.id or name not in ids, f"{spec.id}: alias {name!r} is another model's id"
            seen[name] = spec.id


def test_names_stay_unambiguous_in_the_resolvers_normal_form():
    # advisor.catalog.resolve compares ids, names and aliases after normal() and again without
    # hyphens; two models meeting on one key would make that name ambiguous (exit 2).
    from advisor.catalog.resolve import normal

    owner: dict[str, str] = {}
    for spec in SPECS.values():
        for text in {spec.id, spec.name, *spec.aliases}:
            for key in {normal(text), normal(text).replace("-", "")}:
                assert owner.setdefault(key, spec.id) == spec.id, (
                    f"{text!r} of {spec.id} normalises to {key!r}, already taken by {owner[key]}")


# ---------------------------------------------------------------- internal consistency

@pytest.mark.parametrize("model_id", sorted(SPECS))
def test_shape_is_consistent(model_id):
    spec = SPECS[model_id]
    for field in ("params_total", "params_active", "layers", "hidden_size", "intermediate_size",
                  "attention_heads", "kv_heads", "head_dim", "vocab_size", "max_context"):
        assert getattr(spec, field) > 0, f"{model_id}: {field} must be positive"
    assert spec.attention_heads % spec.kv_heads == 0, "kv_heads must divide attention_heads"
    assert spec.params_active <= spec.params_total
    assert spec.max_context >= 2048


@pytest.mark.parametrize("model_id", sorted(SPECS))
def test_moe_fields_are_consistent(model_id):
    spec = SPECS[model_id]
    if spec.is_moe:
        assert 0 < spec.experts_active <= spec.experts
        assert spec.moe_intermediate_size > 0
        assert spec.shared_experts >= 0
        assert 0 <= spec.dense_layers < spec.layers
        assert spec.params_active < spec.params_total, "an MoE model uses fewer parameters per token"
    else:
        assert (spec.experts_active, spec.shared_experts, spec.moe_intermediate_size, spec.dense_layers) == (0, 0, 0, 0)
        assert spec.params_active == spec.params_total, "dense: active equals total"


@pytest.mark.parametrize("model_id", sorted(SPECS))
def test_attention_variants_are_consistent(model_id):
    spec = SPECS[model_id]
    assert (spec.sliding_window > 0) == (spec.sliding_window_layers > 0), "window and its layer count go together"
    assert spec.sliding_window_layers <= spec.layers
    if spec.sliding_window:
        assert spec.sliding_window < spec.max_context, "a window as long as the context is no window"
    if not spec.compress_ratios:  # DeepSeek V4: the RoPE part is a slice of its one K=V head, no latent
        assert (spec.kv_lora_rank > 0) == (spec.qk_rope_head_dim > 0), "MLA needs both kv_lora_rank and qk_rope_head_dim"
    if spec.is_mla:
        assert spec.kv_heads == spec.attention_heads


def test_known_layer_patterns():
    # Gemma 2: local/global alternate; Gemma 3: 5 local : 1 global ((i+1) % 6 == 0 is global);
    # gpt-oss: sliding/full alternate; Mistral 7B v0.3 has no window.
    assert SPECS["gemma-2-9b"].sliding_window_layers == 21
    assert SPECS["gemma-2-27b"].sliding_window_layers == 23
    for model_id in ("gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "gemma-3-1b", "gemma-3-270m"):
        spec = SPECS.get(model_id)
        if spec is None:
            continue
        assert spec.sliding_window_layers == sum(1 for i in range(spec.layers) if (i + 1) % 6 != 0), model_id
    assert SPECS["gemma-3-27b"].sliding_window_layers == 52
    assert SPECS["gpt-oss-20b"].sliding_window_layers == 12
    assert SPECS["gpt-oss-120b"].sliding_window_layers == 18
    assert SPECS["mistral-7b"].sliding_window == 0
    assert SPECS["deepseek-v3"].dense_layers == 3
    assert SPECS["deepseek-r1"].layers == SPECS["deepseek-v3"].layers


def test_anchor_parameter_counts():
    # Exact counts that other parts of the project and the benchmarks rely on.
    assert SPECS["llama-3.1-8b"].params_total == 8_030_261_248
    assert SPECS["llama-3-70b"].params_total == 70_553_706_496
    assert SPECS["llama-3.1-70b"].params_total == 70_553_706_496
    assert SPECS["qwen2.5-72b"].params_total == 72_706_203_648
    assert SPECS["mixtral-8x7b"].params_total == 46_702_792_704
    assert SPECS["gpt-oss-20b"].params_total == 20_914_757_184
    assert SPECS["gpt-oss-120b"].params_total == 116_829_156_672
    assert SPECS["deepseek-v3"].params_total == 671_026_419_200
    if "llama-2-7b" in SPECS:
        assert round(SPECS["llama-2-7b"].params_total / 1e9, 2) == 6.74


# ---------------------------------------------------------------- counts against the shape

# Models whose layers the shape-only estimate cannot describe (the schema keeps no q_lora_rank or
# v_head_dim for GLM-5's MLA, no dense MLP beside Gemma 4's experts, no block-exclusive Nemotron-H
# layers): their counts are held to the published totals instead, (total, active or None, source).
PUBLISHED = {
    "glm-5": (744e9, 40e9, "GLM-5 technical report table via glennklockwood.com/garden/GLM-5: 744B total, 40B activated"),
    "glm-5.1": (744e9, 40e9, "same config shape as GLM-5 (aiconfigurator copies); GLM-5 report: 744B / 40B"),
    "gemma-4-26b-a4b": (25.2e9, 3.8e9, "vast.ai/model/gemma-4-26b-a4b-it and llmradar.eu: 25.2B total / 3.8B active"),
    "nemotron-3-nano-30b-a3b": (31.6e9, None, "awesomeagents.ai, open-source-ai.tech: 31.6B total (3.2B active without "
                                "embeddings, ~3.5-3.6B with them, crafiq.ai)"),
    # Granite 4.0-H's shared expert is twice the routed experts' width (the estimate uses one width).
    "granite-4.0-h-small": (32.2e9, 9e9, "IBM Granite 4.0-H card: 32B total / 9B active; immers.cloud: 32.2B"),
    "granite-4.0-h-tiny": (7e9, None, "IBM Granite 4.0-H card: 7B total (1B active leaves out the 154M embedding and "
                           "the always-on shared experts and Mamba mixers as rounded)"),
    # Nemotron-H blocks are a mixer or an MLP, never both.
    "nemotron-h-8b": (8e9, None, "Megatron-Bridge docs (NVIDIA-NeMo/Megatron-Bridge docs/models/llm/nemotronh.md): 8B"),
    "nemotron-h-47b": (47e9, None, "Megatron-Bridge docs: 47B"),
    "nemotron-h-56b": (56e9, None, "Megatron-Bridge docs: 56B"),
    # DeepSeek V4's q/o LoRA, compressors, indexer and hyper-connections are not in the schema's shape
    # (tests/test_deepseek_v4.py counts them per tensor from the config.json copies).
    # The card's "13B activated" is the per-tensor 13.80B cut to whole billions (tests/test_deepseek_v4.py).
    "deepseek-v4-flash": (284e9, None, "huggingface.co/deepseek-ai/DeepSeek-V4-Flash card: 284B total, 13B activated"),
    "deepseek-v4-pro": (1.6e12, 49e9, "huggingface.co/deepseek-ai/DeepSeek-V4-Pro card: 1.6T total, 49B activated"),
    # Qwen3.5's full-attention q_proj also writes the output gate (attn_output_gate), which the shape keeps no field
    # for: the schema's estimate is 3.1-3.3% short of the active counts of the two largest.
    "qwen3.5-122b-a10b": (122e9, 10e9, "docs.sglang.io/cookbook/autoregressive/Qwen/Qwen3.5 lists Qwen3.5-122B-A10B; "
                          "its name: 122B total, 10B activated, as the cookbook spells out for the 397B"),
    "qwen3.5-397b-a17b": (397e9, 17e9, "docs.sglang.io/cookbook/autoregressive/Qwen/Qwen3.5: '397B total "
                          "parameters, 17B activated'"),
}


@pytest.mark.parametrize("model_id", sorted(SPECS))
def test_params_total_matches_an_estimate_from_the_shape(model_id):
    spec = SPECS[model_id]
    if model_id in PUBLISHED:
        total, active, _source = PUBLISHED[model_id]
        assert abs(spec.params_total - total) / total <= ESTIMATE_TOLERANCE, f"{model_id}: {spec.params_total:,} vs {total:,.0f}"
        if active is not None:
            assert abs(spec.params_active - active) / active <= ESTIMATE_TOLERANCE, (
                f"{model_id}: active {spec.params_active:,} vs {active:,.0f}")
        return
    total, active = _estimate(spec)
    err = abs(spec.params_total - total) / spec.params_total
    assert err <= ESTIMATE_TOLERANCE, (
        f"{model_id}: params_total {spec.params_total:,} is {err:.1%} from the {total:,} the shape implies")
    if spec.is_moe:
        err = abs(spec.params_active - active) / spec.params_active
        assert err <= ESTIMATE_TOLERANCE, (
            f"{model_id}: params_active {spec.params_active:,} is {err:.1%} from the {active:,} the shape implies")


# ---------------------------------------------------------------- agreement with shared/data

def test_every_mapped_csv_row_exists():
    rows = {r["model"] for r in _csv_rows()}
    assert set(CSV_TO_ID) <= rows, f"CSV rows renamed: {sorted(set(CSV_TO_ID) - rows)}"
    assert set(CSV_TO_ID.values()) <= set(BY_ID)


@pytest.mark.parametrize("csv_model", sorted(CSV_TO_ID))
def test_values_agree_with_shared_model_configs(csv_model):
    row = next((r for r in _csv_rows() if r["model"] == csv_model), None)
    if row is None:
        pytest.skip(f"{csv_model} not in the shared CSV")
    spec = SPECS[CSV_TO_ID[csv_model]]
    compared = 0
    for column, field in EXACT_COLUMNS.items():
        cell = (row.get(column) or "").strip()
        if not cell:
            continue  # blank = not verified in the shared table
        assert getattr(spec, field) == int(cell), f"{spec.id}.{field}={getattr(spec, field)} but CSV {column}={cell}"
        compared += 1
    tie = (row.get("tie_word_embeddings") or "").strip().lower()
    if tie in ("true", "false"):
        assert spec.tied_embeddings == (tie == "true"), f"{spec.id}: tied_embeddings disagrees with the CSV"
    assert compared >= 5, f"{csv_model}: too few filled cells compared ({compared})"
