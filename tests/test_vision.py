"""Vision towers: parameters counted from vision_config, mmproj GGUFs read by header, what llama.cpp and vLLM
reserve for them, and how check, --cmd and the launch command carry them.

The published figures are tests/data/vision_logs.csv (sources in vision_logs.md) and the safetensors
totals the catalog records for Gemma 3 4B, Llama 4 and Mistral Small 3.2 (hardware_db/models.toml notes).
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from advisor.catalog.load import load_catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.vision import VisionTower, clip_compute_bytes, parse_mm_limit
from advisor.errors import AdvisorError
from advisor.modelfile import read_model
from advisor.modelfile.vision import from_config, from_mmproj
from advisor.probe.build import build_rig

CATALOG = load_catalog(False)
RULES = CATALOG.rules
MIB = 1024**2
GIB = 1024**3
DATA = Path(__file__).parent / "data"
LOGS = {int(r["row"]): r for r in csv.DictReader((DATA / "vision_logs.csv").open())}
W = Path("config.json")

# vision_config blocks as the checkpoints' config.json files have them
GEMMA3_4B = {"model_type": "gemma3", "mm_tokens_per_image": 256, "text_config": {"hidden_size": 2560},
             "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                               "model_type": "siglip_vision_model", "num_attention_heads": 16,
                               "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}}
LLAMA4 = {"model_type": "llama4", "text_config": {"hidden_size": 5120},
          "vision_config": {"hidden_size": 1408, "image_size": 336, "intermediate_size": 5632,
                            "model_type": "llama4_vision_model", "multi_modal_projector_bias": False,
                            "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 34, "patch_size": 14,
                            "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096, "projector_output_dim": 4096,
                            "vision_output_dim": 4096}}
MISTRAL_SMALL_32 = {"model_type": "mistral3", "spatial_merge_size": 2, "multimodal_projector_bias": False,
                    "text_config": {"hidden_size": 5120},
                    "vision_config": {"hidden_size": 1024, "image_size": 1540, "intermediate_size": 4096,
                                      "model_type": "pixtral", "num_attention_heads": 16, "num_hidden_layers": 24,
                                      "patch_size": 14, "head_dim": 64}}
QWEN25_VL = {"model_type": "qwen2_5_vl",
             "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                               "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
                               "temporal_patch_size": 2}}
QWEN36_VISION = {"model_type": "qwen3_5",
                 "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
                                   "in_channels": 3, "out_hidden_size": 5120, "patch_size": 16,
                                   "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 2304,
                                   "deepstack_visual_indexes": []}}


@pytest.mark.parametrize("cfg,expected,where", [
    (GEMMA3_4B, 419_816_304, "Gemma 3 4B: HF total 4,300,079,472 less the text model 3,880,263,168"),
    (LLAMA4, 871_932_416, "Llama 4: HF total 108,641,793,536 less the text model 107,769,861,120"),
    (MISTRAL_SMALL_32, 438_958_080, "Mistral Small 3.2: HF total 24,011,361,280 less 23,572,403,200"),
], ids=["gemma3", "llama4", "mistral3"])
def test_vision_params_match_the_checkpoints_totals(cfg: dict, expected: int, where: str) -> None:
    tower = from_config(cfg, W, RULES)
    assert tower.params == expected, where
    assert tower.source == "config" and not tower.exact and not tower.assumptions


def test_qwen25_vl_counts_the_modules_transformers_builds() -> None:
    """Qwen2_5_VLForConditionalGeneration's visual module as transformers prints it (Conv3d(3, 1280, (2, 14, 14),
    bias=False); 32 blocks of two RMSNorm(1280), qkv Linear(1280, 3840), proj Linear(1280, 1280), gate/up
    Linear(1280, 3420), down Linear(3420, 1280), all with bias; merger RMSNorm(1280), Linear(5120, 5120),
    Linear(5120, 3584)): summed here shape by shape, apart from the counter's formula."""
    lin = lambda i, o: i * o + o  # noqa: E731
    block = 2 * 1280 + lin(1280, 3840) + lin(1280, 1280) + 2 * lin(1280, 3420) + lin(3420, 1280)
    expected = 3 * 2 * 14 * 14 * 1280 + 32 * block + 1280 + lin(5120, 5120) + lin(5120, 3584)
    tower = from_config(QWEN25_VL, W, RULES)
    assert tower.params == expected == 676_550_144
    assert tower.item_patches == 12_845_056 // 14**2 and tower.item_tokens == 16_384  # vLLM's "16384 tokens"


def _mmproj_bytes_16(params: int, f32_params: int) -> int:
    """llama.cpp's converter writes an mmproj at 16 bits, keeping 1-D tensors (norms, biases) and the patch
    and position embeddings in f32: 2 bytes each, 2 more for those."""
    return 2 * params + 2 * f32_params


def test_counted_towers_reproduce_llamacpp_logged_mmproj_sizes() -> None:
    """The logged `model size` of two 16-bit mmproj files follows from the counted parameters."""
    g = from_config(GEMMA3_4B, W, RULES)
    per_layer_1d = 4 * 1152 + 4 * 1152 + 4304 + 1152  # 2 LayerNorms, q/k/v/o biases, fc1 and fc2 biases
    f32 = 27 * per_layer_1d + 1152 + 2 * 1152 + 1152 + 4096 * 1152 + 3 * 14 * 14 * 1152
    assert round(_mmproj_bytes_16(g.params, f32) / MIB, 2) == float(LOGS[1]["mmproj_model_mib"])  # 811.79
    q = from_config(QWEN36_VISION, W, RULES)
    per_layer_1d = 4 * 1152 + 3 * 1152 + 1152 + 4304 + 1152
    f32 = 27 * per_layer_1d + 1152 + (2 * 1152 + 4608 + 5120) + 2304 * 1152 + 3 * 2 * 16 * 16 * 1152
    assert q.params == 460_730_096
    assert round(_mmproj_bytes_16(q.params, f32) / MIB, 2) == float(LOGS[2]["mmproj_model_mib"])  # 887.99


def _logged_tower(row: dict, warm_side: int) -> VisionTower:
    patches = (warm_side // int(row["patch_size"])) ** 2
    return VisionTower(params=1, weight_bytes=0, source="mmproj", kind=row["projector"],
                       hidden_size=int(row["n_embd"]), ff_size=int(row["n_ff"]), heads=int(row["n_head"]),
                       layers=int(row["n_layer"]), patch_size=int(row["patch_size"]), warmup_patches=patches)


@pytest.mark.parametrize("row,tolerance", [(1, 0.0005), (2, 0.015), (4, 0.015)], ids=["gemma3-fa", "qwen3vl-fa", "qwen3vl-no-fa"])
def test_clip_compute_buffer_matches_llamacpp_logs(row: int, tolerance: float) -> None:
    r = LOGS[row]
    tower = _logged_tower(r, int(r["warmup_side_px"]))
    got = clip_compute_bytes(tower, r["flash_attention"] == "on", RULES) / MIB
    logged = float(r["device_compute_mib"])
    assert abs(got - logged) / logged <= tolerance, (got, logged)


ORACLE = json.loads((DATA / "clip_oracle.json").read_text())["rows"]


@pytest.mark.parametrize("row", ORACLE, ids=[f"{r['tower']}-fa-{r['flash_attention']}" for r in ORACLE])
def test_clip_compute_buffer_matches_llamacpp_itself(row: dict) -> None:
    """llama.cpp's own reservation for zero-weight mmproj files of the real shapes (bench/clip_oracle.py):
    Gemma 3 exact, Qwen3-VL within 4% (the formula's largest miss: its 4B tower with flash attention)."""
    patches = (row["warmup_side_px"] // row["patch_size"]) ** 2
    tower = VisionTower(params=1, weight_bytes=0, source="mmproj", kind=row["projector"], hidden_size=row["n_embd"],
                        ff_size=row["n_ff"], heads=row["n_head"], layers=row["n_layer"], patch_size=row["patch_size"],
                        warmup_patches=patches)
    got = clip_compute_bytes(tower, row["flash_attention"] == "on", RULES) / MIB
    tolerance = 0.0005 if row["projector"] == "gemma3" else 0.04
    assert abs(got - row["compute_mib"]) / row["compute_mib"] <= tolerance, (got, row["compute_mib"])


def test_qwen_vl_warmup_is_46_by_46_merged_tokens(tmp_path: Path) -> None:
    """clip.cpp: set_warmup_n_tokens(46*46) for the Qwen-VL mergers: 1472 px a side at patch 16, merge 2."""
    tower = _mmproj(tmp_path / "mmproj-BF16.gguf", kind="qwen3vl_merger", image=768, patch=16)
    assert tower.warmup_patches == (1472 // 16) ** 2 == 8464


def _mmproj(path: Path, *, kind: str = "gemma3", image: int = 896, patch: int = 14) -> VisionTower:
    w = GGUFWriter(str(path), "clip")
    w.add_string("clip.projector_type", kind)
    w.add_bool("clip.has_vision_encoder", True)
    for key, value in (("embedding_length", 1152), ("feed_forward_length", 4304), ("block_count", 27),
                       ("attention.head_count", 16), ("image_size", image), ("patch_size", patch),
                       ("projection_dim", 2560)):
        w.add_uint32(f"clip.vision.{key}", value)
    if kind != "gemma3":
        w.add_uint32("clip.vision.spatial_merge_size", 2)
    w.add_tensor("v.patch_embd.weight", np.zeros((8, 3, 2, 2), dtype=np.float16))
    w.add_tensor("v.blk.0.attn_q.weight", np.zeros((16, 16), dtype=np.float16))
    w.add_tensor("v.blk.0.ln1.weight", np.zeros((16,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return from_mmproj(path, RULES, display=path.name)


def test_mmproj_header_gives_exact_bytes_and_the_warmup_image(tmp_path: Path) -> None:
    t = _mmproj(tmp_path / "mmproj-model-f16.gguf")
    assert t.weight_bytes == 8 * 3 * 2 * 2 * 2 + 16 * 16 * 2 + 16 * 4 and t.params == 96 + 256 + 16
    assert (t.kind, t.source, t.exact, t.path) == ("gemma3", "mmproj", True, "mmproj-model-f16.gguf")
    assert t.warmup_patches == (896 // 14) ** 2 and t.hidden_size == 1152 and t.ff_size == 4304


def test_a_model_gguf_is_not_an_mmproj(tmp_path: Path) -> None:
    w = GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    w.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(AdvisorError, match="not an mmproj"):
        from_mmproj(tmp_path / "m.gguf", RULES)


RIG = build_rig(CATALOG, gpus=["rtx-4090"])


def test_mmproj_adds_its_weights_and_compute_buffer_to_the_first_gpu(tmp_path: Path) -> None:
    tower = _mmproj(tmp_path / "mmproj.gguf")
    base = evaluate(CATALOG, RIG, CATALOG.models["gemma-3-4b"], Options(quant="Q4_K_M", ctx=8192))
    opts = Options(quant="Q4_K_M", ctx=8192, mmproj="mmproj.gguf", vision_tower=tower)
    with_images = evaluate(CATALOG, RIG, CATALOG.models["gemma-3-4b"], opts)
    added = with_images.placement.devices[0].overhead_bytes - base.placement.devices[0].overhead_bytes
    assert added == tower.weight_bytes + (4304 + 3 * 1152) * 4096 * 4  # flash attention is on for CUDA
    assert with_images.max_context_tokens <= base.max_context_tokens
    assert "--mmproj mmproj.gguf" in with_images.launch.command
    assert any(f.code == "VIS001" for f in with_images.findings)
    assert not any(f.code == "VIS001" for f in base.findings)
    # on the CPU: the GPU gets nothing, system RAM holds it
    cpu = evaluate(CATALOG, RIG, CATALOG.models["gemma-3-4b"], replace(opts, mmproj_offload=False))
    assert cpu.placement.devices[0].overhead_bytes == base.placement.devices[0].overhead_bytes
    assert cpu.placement.host.overhead_bytes == added
    assert "--no-mmproj-offload" in cpu.launch.command
    # text only: no tower
    text = evaluate(CATALOG, RIG, CATALOG.models["gemma-3-4b"], replace(opts, mm_limit=0, vision_tower=None))
    assert text.placement.devices[0].overhead_bytes == base.placement.devices[0].overhead_bytes


def test_cmd_with_mmproj_reads_it_back(tmp_path: Path, capsys) -> None:
    from advisor.cli import main

    _mmproj(tmp_path / "mmproj.gguf")
    rc = main(["check", "--cmd", f"llama-server -m gemma-3-4b-Q4_K_M.gguf -mm {tmp_path / 'mmproj.gguf'} -c 8192",
               "--gpu", "rtx-4090", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1) and out["vision"]["source"] == "mmproj" and out["vision"]["devices"] == ["gpu0"]
    assert out["vision"]["compute_bytes"] == (4304 + 3 * 1152) * 4096 * 4
    assert "--mmproj" in out["launch"]["command"] and not out.get("command_notes")


def test_mmproj_is_refused_for_a_runtime_that_reads_the_checkpoint(tmp_path: Path) -> None:
    tower = _mmproj(tmp_path / "mmproj.gguf")
    rig = build_rig(CATALOG, gpus=["h100-sxm"])
    with pytest.raises(AdvisorError, match="does not load an mmproj"):
        evaluate(CATALOG, rig, CATALOG.models["gemma-3-4b"], Options(runtime="vllm", mmproj="x", vision_tower=tower))


def _qwen25_vl_72b(tmp_path: Path) -> Path:
    """Qwen/Qwen2.5-VL-72B-Instruct's config.json shape: Qwen2.5-72B's text model and the 1280-wide ViT."""
    cfg = {"model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
           "hidden_size": 8192, "intermediate_size": 29568, "num_attention_heads": 64, "num_hidden_layers": 80,
           "num_key_value_heads": 8, "vocab_size": 152064, "max_position_embeddings": 128000,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "vision_config": {**QWEN25_VL["vision_config"], "out_hidden_size": 8192}}
    folder = tmp_path / "Qwen2.5-VL-72B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder / "config.json"


def test_vllm_splits_the_encoder_over_tensor_parallel_ranks_as_logged(tmp_path: Path) -> None:
    """vllm-project/vllm #16570: 'Model loading took 34.4340 GiB' per rank, Qwen2.5-VL-72B at TP 4."""
    lm = read_model(str(_qwen25_vl_72b(tmp_path)))
    assert lm.vision is not None and lm.spec.vision_params == lm.vision.params
    rig = build_rig(CATALOG, gpus=["4xa100-sxm4-80gb"])
    r = evaluate(CATALOG, rig, lm, Options(runtime="vllm", ctx=8192, split="tensor"))
    assert r.vision is not None and r.vision.devices == (0, 1, 2, 3)
    per_rank = (r.placement.devices[0].weights_bytes + r.vision.weights_bytes) / GIB
    logged = float(LOGS[5]["logged_weights_gib"])
    replicated = (r.placement.devices[0].weights_bytes + lm.vision.weight_bytes) / GIB
    assert abs(per_rank - logged) / logged < 0.01
    assert abs(per_rank - logged) < abs(replicated - logged)


def test_vllm_profile_of_the_largest_image_lowers_the_kv_pool_and_text_only_frees_it(tmp_path: Path) -> None:
    lm = read_model(str(_qwen25_vl_72b(tmp_path)))
    rig = build_rig(CATALOG, gpus=["4xh100-sxm"])
    base = Options(runtime="vllm", ctx=8192, split="tensor")
    images = evaluate(CATALOG, rig, lm, base)
    text = evaluate(CATALOG, rig, lm, replace(base, mm_limit=0))
    two = evaluate(CATALOG, rig, lm, replace(base, mm_limit=2, max_num_batched_tokens=32768))
    assert text.vision is None and images.vision is not None and images.vision.images == 1
    assert images.serving.kv_cache_bytes < text.serving.kv_cache_bytes
    assert two.vision.images == 2 and two.serving.kv_cache_bytes < images.serving.kv_cache_bytes
    assert "--limit-mm-per-prompt" in two.launch.command and '{"image":2}' in two.launch.command
    assert any(f.code == "VIS001" and f.severity == "warning" and "estimated" in f.message for f in images.findings)


def test_llamacpp_ignores_a_checkpoint_tower_and_says_so(tmp_path: Path) -> None:
    lm = read_model(str(_qwen25_vl_72b(tmp_path)))
    rig = build_rig(CATALOG, gpus=["4xa100-sxm4-80gb"])
    r = evaluate(CATALOG, rig, lm, Options(ctx=8192, quant="Q4_K_M"))
    assert r.vision is None
    assert any(f.code == "ARC003" and "vision tower" in f.message for f in r.findings)


def test_an_unknown_vision_config_is_assumed_out_loud(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    cfg = {"model_type": "somevlm", "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8,
           "vocab_size": 1000, "max_position_embeddings": 4096,
           "vision_config": {"num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 1024, "patch_size": 14}}
    (folder / "config.json").write_text(json.dumps(cfg))
    lm = read_model(str(folder / "config.json"))
    assert lm.vision.params > 0 and any("plain ViT" in a for a in lm.spec.assumptions)
    cfg["vision_config"] = {"model_type": "mystery"}
    (folder / "config.json").write_text(json.dumps(cfg))
    lm = read_model(str(folder / "config.json"))
    assert lm.spec.vision_params == 0 and any("not counted" in a for a in lm.spec.assumptions)
    r = evaluate(CATALOG, build_rig(CATALOG, gpus=["rtx-4090"]), lm, Options(runtime="vllm"))
    assert any(f.code == "ARC002" and "vision tower" in f.message for f in r.findings)


@pytest.mark.parametrize("text,want", [('{"image":0}', 0), ('{"image": 3, "video": 1}', 3), ("image=2,video=0", 2),
                                       ('{"image": {"count": 4, "width": 512, "height": 512}}', 4)])
def test_limit_mm_per_prompt_spellings(text: str, want: int) -> None:
    assert parse_mm_limit(text, "--limit-mm-per-prompt") == want


@pytest.mark.parametrize("text", ["{", '{"image": -1}', '{"image": "x"}', "[]", "image=two"])
def test_bad_limit_mm_per_prompt_is_one_line(text: str) -> None:
    with pytest.raises(AdvisorError):
        parse_mm_limit(text, "--limit-mm-per-prompt")


def test_without_flash_attention_the_clip_buffer_holds_every_heads_scores_and_says_what_fa_saves(tmp_path: Path) -> None:
    tower = _mmproj(tmp_path / "mmproj.gguf", kind="qwen3vl_merger", image=768, patch=16)
    opts = Options(quant="Q4_K_M", ctx=4096, mmproj="mmproj.gguf", vision_tower=tower, flash_attn="off")
    r = evaluate(CATALOG, RIG, CATALOG.models["qwen3-8b"], opts)
    assert r.vision.compute_bytes == (16 * 8464 + 6 * 1152) * 8464 * 4
    assert r.vision.flash_compute_bytes == (4304 + 3 * 1152) * 8464 * 4
    assert any(f.code == "VIS001" and "-fa on" in f.message for f in r.findings)
    assert "-fa off" in r.launch.command and "--mmproj mmproj.gguf" in r.launch.command
