"""DeepSeek V4 (Flash, Pro): the reader counts its parameters from config.json shapes and sizes its
compressed-attention cache per layer as the serving runtimes allocate it.

Configs: tests/data/deepseek_v4_{flash,pro}_config.json (sources in tests/data/deepseek_v4_configs.md).
Published totals: the model cards (huggingface.co/deepseek-ai/DeepSeek-V4-Flash: 284B total, 13B activated;
DeepSeek-V4-Pro: 1.6T total, 49B activated; both quoted at featherless.ai/models/deepseek-ai/DeepSeek-V4-Flash
and venicestats.com/venice-models/deepseek-v4-flash).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor.catalog.load import load_catalog
from advisor.engine import memory as mem
from advisor.modelfile import read_model

DATA = Path(__file__).parent / "data"
RULES = load_catalog(False).rules


def _read(tmp_path: Path, which: str, **override):
    folder = tmp_path / which
    folder.mkdir()
    cfg = json.loads((DATA / f"deepseek_v4_{which}_config.json").read_text())
    cfg.update(override)
    (folder / "config.json").write_text(json.dumps(cfg))
    return read_model(str(folder / "config.json")).spec


def _hand_params(c: dict) -> tuple[int, int]:
    """Every tensor of the checkpoint's language model, written out from
    transformers modular_deepseek_v4.py @02356fec (DeepseekV4Attention, CSA/HCA compressors, Indexer,
    HyperConnection x 2 per layer, HyperHead, SparseMoeBlock with one shared expert, hash router on the
    first num_hash_layers)."""
    H, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    nh, hd, ql, ol, og = c["num_attention_heads"], c["head_dim"], c["q_lora_rank"], c["o_lora_rank"], c["o_groups"]
    ih, ihd, E, k, Im, hc = (c["index_n_heads"], c["index_head_dim"], c["n_routed_experts"],
                             c["num_experts_per_tok"], c["moe_intermediate_size"], c["hc_mult"])
    attn = (H * ql + ql) + ql * nh * hd + (H * hd + hd) + nh * hd * ol + og * ol * H + nh
    csa = (2 * H * 2 * hd + 4 * 2 * hd + hd) + (2 * H * 2 * ihd + 4 * 2 * ihd + ihd + ql * ih * ihd + H * ih)
    hca = 2 * H * hd + 128 * hd + hd
    mix = (2 + hc) * hc
    hyper = 2 * (mix * hc * H + mix + 3)
    moe = E * 3 * H * Im + 3 * H * Im + E * H  # routed experts, shared expert, router
    total = 2 * V * H + H + (hc * hc * H + hc + 1)  # embedding, head, final norm, hyper head
    for il, r in enumerate(c["compress_ratios"][:L]):
        total += attn + {0: 0, 4: csa, 128: hca}[r] + hyper + moe + 2 * H
        total += V * k if il < c["num_hash_layers"] else E  # tid2eid table, else e_score_correction_bias
    return total, total - L * (E - k) * 3 * H * Im


@pytest.mark.parametrize("which, card_total, billions_active", [("flash", "284B", 13), ("pro", "1.6T", 49)])
def test_parameters_per_tensor_match_the_published_totals(tmp_path: Path, which, card_total, billions_active):
    spec = _read(tmp_path, which)
    cfg = json.loads((DATA / f"deepseek_v4_{which}_config.json").read_text())
    assert (spec.params_total, spec.params_active) == _hand_params(cfg)
    # model card: 284B / 13B activated (Flash), 1.6T / 49B activated (Pro)
    shown = f"{spec.params_total / 1e9:.0f}B" if spec.params_total < 1e12 else f"{spec.params_total / 1e12:.1f}T"
    assert shown == card_total and int(spec.params_active / 1e9) == billions_active
    assert spec.mtp_layers == 1  # the MTP block is in the files, not in the total, not loaded by default
    assert spec.architecture == "DeepseekV4ForCausalLM"


def test_flash_exact_totals(tmp_path: Path) -> None:
    spec = _read(tmp_path, "flash")
    assert spec.params_total == 284_334_567_511
    assert spec.params_active == 13_801_959_511


def test_layers_keep_a_window_a_pool_and_an_indexer_by_ratio(tmp_path: Path) -> None:
    spec = _read(tmp_path, "flash")
    assert spec.compress_ratios == (0, 0) + (4, 128) * 20 + (4,)  # the 44th entry belongs to the MTP layer
    assert (spec.sliding_window, spec.sliding_window_layers, spec.head_dim, spec.kv_heads) == (128, 43, 512, 1)
    assert spec.indexer_head_dim == 128
    assert not any("plain attention" in a or "sliding window" in a for a in spec.assumptions)
    assert spec.max_context == 1_048_576


# One entry as SGLang's fp8 pool stores it: 448 fp8 + 64 bf16 RoPE values + 8 scale bytes; an indexer key
# 128 fp8 + a 4-byte scale (rules/memory.toml [compressed_kv]).
ENTRY_FP8, INDEXER_FP8 = 448 + 64 * 2 + 8, 128 + 4
CSA_STATE = (2 * 4 * 2 * 512 + 2 * 4 * 2 * 128) * 4  # fp32 kv/score state of the compressor and the indexer's
HCA_STATE = 2 * 128 * 512 * 4


def _flash_by_hand(ctx: int, entry: int, indexer: int) -> int:
    window = 43 * min(ctx, 128) * entry  # every layer
    csa = 21 * (-(-ctx // 4) * (entry + indexer) + CSA_STATE)
    hca = 20 * (-(-ctx // 128) * entry + HCA_STATE)
    return window + csa + hca


@pytest.mark.parametrize("ctx", [32_768, 1_048_576])
def test_flash_kv_by_hand_fp8(tmp_path: Path, ctx: int) -> None:
    spec = _read(tmp_path, "flash")
    per_layer = mem.kv_bytes_per_layer(spec, ctx, "fp8", RULES)
    assert per_layer[0] == min(ctx, 128) * ENTRY_FP8  # a window-only layer
    assert per_layer[2] == 128 * ENTRY_FP8 + ctx // 4 * (ENTRY_FP8 + INDEXER_FP8) + CSA_STATE
    assert per_layer[3] == 128 * ENTRY_FP8 + ctx // 128 * ENTRY_FP8 + HCA_STATE
    assert sum(per_layer) == _flash_by_hand(ctx, ENTRY_FP8, INDEXER_FP8)


def test_flash_kv_at_1m_is_a_few_gib_not_a_plain_transformers(tmp_path: Path) -> None:
    spec = _read(tmp_path, "flash")
    fp8 = sum(mem.kv_bytes_per_layer(spec, 1_048_576, "fp8", RULES))
    assert fp8 == 4_051_840_000  # 3.77 GiB for one 1M-token sequence
    f16 = sum(mem.kv_bytes_per_layer(spec, 1_048_576, "f16", RULES))
    assert f16 == _flash_by_hand(1_048_576, 512 * 2, 128 * 2)
    # a plain 43-layer cache of one 512-wide K=V head in fp8 would hold 1M entries per layer: 21.5 GiB
    assert fp8 < 43 * 1_048_576 * 512 / 5  # less than a fifth
    # sequences multiply everything, state included
    assert sum(mem.kv_bytes_per_layer(spec, 32_768, "fp8", RULES, sequences=4)) == 4 * _flash_by_hand(
        32_768, ENTRY_FP8, INDEXER_FP8)


def test_pro_window_layers_are_its_first_two_hca(tmp_path: Path) -> None:
    spec = _read(tmp_path, "pro")
    assert spec.compress_ratios[:3] == (128, 128, 4) and len(spec.compress_ratios) == 61
    assert spec.compress_ratios.count(4) == 30 and spec.compress_ratios.count(128) == 31
    per_layer = mem.kv_bytes_per_layer(spec, 1_048_576, "fp8", RULES)
    assert sum(per_layer) == 61 * 128 * ENTRY_FP8 + 30 * (262_144 * (ENTRY_FP8 + INDEXER_FP8) + CSA_STATE) \
        + 31 * (8192 * ENTRY_FP8 + HCA_STATE)


def test_an_unknown_ratio_is_stated(tmp_path: Path) -> None:
    ratios = [0, 0] + [16, 128] * 20 + [4, 0]
    spec = _read(tmp_path, "flash", compress_ratios=ratios)
    assert any("compress ratio 16" in a for a in spec.assumptions)


def test_short_ratio_list_is_stated(tmp_path: Path) -> None:
    spec = _read(tmp_path, "flash", compress_ratios=[0, 4, 128])
    assert any("compress_ratios lists 3 of 43" in a for a in spec.assumptions)
    assert spec.compress_ratios[3:] == (0,) * 40


def test_check_json_answers_for_flash(tmp_path: Path) -> None:
    import subprocess
    import sys
    folder = tmp_path / "f"
    folder.mkdir()
    shutil.copy(DATA / "deepseek_v4_flash_config.json", folder / "config.json")
    out = subprocess.run([sys.executable, "-m", "advisor", "check", str(folder / "config.json"), "--gpu", "4xh200-sxm",
                          "--runtime", "sglang", "--ctx", "32768", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    assert doc


# -- catalog ------------------------------------------------------------------------------------------------

ARCH_FIELDS = ("params_total", "params_active", "layers", "hidden_size", "intermediate_size", "attention_heads",
               "kv_heads", "head_dim", "vocab_size", "max_context", "tied_embeddings", "experts", "experts_active",
               "shared_experts", "moe_intermediate_size", "dense_layers", "sliding_window", "sliding_window_layers",
               "qk_rope_head_dim", "indexer_head_dim", "compress_ratios", "mtp_layers", "architecture", "assumptions")


@pytest.mark.parametrize("which", ["flash", "pro"])
def test_catalog_entries_are_what_the_reader_reads_from_the_config(tmp_path: Path, which: str) -> None:
    cat = load_catalog(False)
    entry = cat.models[f"deepseek-v4-{which}"]
    spec = _read(tmp_path, which)
    assert {f: getattr(entry, f) for f in ARCH_FIELDS} == {f: getattr(spec, f) for f in ARCH_FIELDS}
    assert entry.native_quant == "fp4-experts-fp8" and not entry.native_expert_bits
    assert f"deepseek-ai/DeepSeek-V4-{which.title()}" in entry.aliases


def test_native_format_sizes_mxfp4_experts_and_fp8_rest() -> None:
    from advisor.engine.check import resolve_quant
    cat = load_catalog(False)
    flash = cat.models["deepseek-v4-flash"]
    layout = mem.weights_layout(flash, resolve_quant(cat, "fp4-experts-fp8"))
    experts = 43 * 256 * 3 * 4096 * 2048
    embed = 129280 * 4096
    rest = flash.params_total - experts - 2 * embed
    assert layout.total_bytes == pytest.approx((experts * 4.25 + 2 * embed * 16 + rest * 8) / 8, rel=1e-6)
    assert 155e9 < layout.total_bytes < 156e9


def test_runtimes_that_lack_v4_refuse_and_name_one_that_runs_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    def findings(runtime: str, gpu: str) -> list[dict]:
        out = subprocess.run([sys.executable, "-m", "advisor", "check", "deepseek-v4-flash", "--gpu", gpu,
                              "--runtime", runtime, "--json"], capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)["findings"]

    mlx = [f["message"] for f in findings("mlx", "m3-ultra-512gb") if f["code"] == "CMP001"]
    assert mlx and "deepseek_v4" in mlx[0] and "llama.cpp" in mlx[0]
    ex2 = [f["message"] for f in findings("exllamav2", "4xh200-sxm") if f["code"] == "CMP001"]
    assert ex2 and "DeepseekV4ForCausalLM" in ex2[0] and "vllm" in ex2[0] and "sglang" in ex2[0]
    for runtime in ("vllm", "sglang", "llama.cpp"):
        assert not [f for f in findings(runtime, "4xh200-sxm") if f["code"] == "CMP001"], runtime


def test_checkpoint_reference_names_are_placed_as_embedding_head_layers_and_mtp() -> None:
    from advisor.modelfile.gguf_file import Tensor
    from advisor.modelfile.layout import tally

    def t(name: str, n: int, dtype: str = "BF16", size: float = 2.0) -> Tensor:
        return Tensor(name, dtype, (n,), n, int(n * size), "f16")

    tensors = (t("embed.weight", 1000), t("head.weight", 1000), t("norm.weight", 10), t("hc_head_fn", 40, "F32", 4),
               t("layers.0.attn.wkv.weight", 100, "F8_E4M3", 1), t("layers.0.ffn.experts.3.w1.weight", 64, "I8", 1),
               t("layers.0.ffn.shared_experts.w1.weight", 64, "F8_E4M3", 1), t("mtp.0.ffn.experts.0.w1.weight", 64, "I8", 1))
    lay = tally(tensors, 1, "safetensors")
    assert lay.output_present and (lay.layout.embed_bytes, lay.layout.output_bytes) == (2000, 2000)
    assert lay.layout.layer_bytes == (228,) and lay.layout.expert_bytes == (64,)
    assert lay.layout.unloaded_bytes == 64  # the MTP block: in the files, not loaded by default


def test_a_config_alone_is_sized_in_the_format_it_declares(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    shutil.copy(DATA / "deepseek_v4_flash_config.json", folder / "config.json")
    loaded = read_model(str(folder / "config.json"))
    assert loaded.quant.id == "fp4-experts-fp8" and loaded.spec.native_quant == "fp4-experts-fp8"
    assert 155e9 < loaded.layout.total_bytes < 156e9  # not 568 GB of BF16
    assert any("SGLang's pool" in a for a in loaded.spec.assumptions)  # said as a finding (ARC002)


def test_only_the_fp4_expert_config_is_the_mixed_format() -> None:
    from advisor.modelfile.build import _declared_quant
    assert _declared_quant({"expert_dtype": "fp4"}, {"quant_method": "fp8"}) == "fp4-experts-fp8"
    assert _declared_quant({}, {"quant_method": "fp8"}) == ""  # sgl-project's all-FP8 copies
    assert _declared_quant({"expert_dtype": "fp4"}, None) == ""


def test_a_deepseek4_gguf_keeps_its_compressed_cache(tmp_path: Path) -> None:
    """llama.cpp's deepseek4 GGUF (PR #24162): `{arch}.attention.compress_ratios` one per block (the MTP block
    included), the window in `attention.sliding_window`, the indexer key in `attention.indexer.key_length`."""
    pytest.importorskip("gguf")
    from test_modelfile import Tiny, make_gguf

    arch = "deepseek4"
    extra = {f"{arch}.attention.compress_ratios": [0, 4, 128, 4, 0], f"{arch}.nextn_predict_layers": 1,
             f"{arch}.attention.indexer.key_length": 128, f"{arch}.rope.dimension_count": 64}
    path = tmp_path / "v4.gguf"
    make_gguf(path, Tiny(arch=arch, layers=5, heads=8, kv_heads=1, head_dim=512, write_key_length=True, swa=128,
                             extra=extra))
    spec = read_model(str(path)).spec
    assert spec.layers == 4 and spec.mtp_layers == 1 and spec.compress_ratios == (0, 4, 128, 4)
    assert (spec.sliding_window, spec.sliding_window_layers, spec.indexer_head_dim) == (128, 4, 128)
    assert "sliding window" not in spec.notes
    ctx = 32_768
    per_layer = mem.kv_bytes_per_layer(spec, ctx, "f16", RULES)
    entry, idx = 512 * 2, 128 * 2
    assert per_layer == (128 * entry, 128 * entry + ctx // 4 * (entry + idx) + CSA_STATE,
                         128 * entry + ctx // 128 * entry + HCA_STATE, 128 * entry + ctx // 4 * (entry + idx) + CSA_STATE)
