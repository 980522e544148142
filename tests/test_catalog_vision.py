"""The catalog's vision_params, recounted: every built-in model that records a vision tower has the
vision_config of the config.json it cites in tests/data/catalog_vision_configs.json (source beside each),
and the repo's own counter (advisor/modelfile/vision.py) gives exactly the recorded number and the recorded
shape (models.toml `vision`), so the catalog cannot drift from the configs or from the counter."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.catalog.load import load_catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.vision import catalog_tower
from advisor.modelfile.vision import from_config
from advisor.probe.build import build_rig

CATALOG = load_catalog(False)
FIXTURES = {k: v for k, v in json.loads((Path(__file__).parent / "data" / "catalog_vision_configs.json").read_text()).items()
            if not k.startswith("_")}
WITH_TOWER = sorted(mid for mid, m in CATALOG.models.items() if m.vision_params)


def test_every_catalog_tower_has_its_config_and_every_config_its_entry() -> None:
    assert set(WITH_TOWER) == set(FIXTURES)
    for mid, fixture in FIXTURES.items():
        assert fixture["source"].strip() and "vision_config" in fixture["config"], mid


@pytest.mark.parametrize("mid", WITH_TOWER)
def test_vision_params_recount_from_the_cited_vision_config(mid: str) -> None:
    tower = from_config(FIXTURES[mid]["config"], Path("config.json"), CATALOG.rules)
    assert tower.params == CATALOG.models[mid].vision_params
    assert not tower.assumptions, "a counter that had to assume something is not a count"


@pytest.mark.parametrize("mid, total, where", [
    ("gemma-3-4b", 4_300_079_472, "HF safetensors total (kvfit registry)"),
    ("gemma-3-12b", 12_187_325_040, "HF safetensors total (kvfit registry)"),
    ("gemma-3-27b", 27_432_406_640, "HF safetensors total (kvfit registry)"),
    ("llama-4-scout", 108_641_793_536, "HF safetensors total (kvfit registry)"),
])
def test_language_model_plus_tower_is_the_checkpoint_total(mid: str, total: int, where: str) -> None:
    m = CATALOG.models[mid]
    assert m.params_total + m.vision_params == total, where


@pytest.mark.parametrize("mid", WITH_TOWER)
def test_the_catalogs_tower_shape_is_its_cited_vision_config(mid: str) -> None:
    """models.toml `vision` (what vLLM's encoder profile needs: width, MLP, patch, merge, native image, kind) is
    the shape from_config reads off the cited vision_config, and the engine's tower from it takes the same
    largest image: the catalog cannot drift from the configs."""
    read = from_config(FIXTURES[mid]["config"], Path("config.json"), CATALOG.rules)
    m = CATALOG.models[mid]
    built = catalog_tower(m.vision_params, m.name, CATALOG.rules, m.vision)
    shape = ("kind", "hidden_size", "ff_size", "layers", "heads", "patch_size", "merge", "image_size", "out_hidden")
    assert {k: getattr(built, k) for k in shape} == {k: getattr(read, k) for k in shape}
    assert (built.item_patches, built.weight_bytes) == (read.item_patches, read.weight_bytes)



def test_qwen3_5_and_3_6_towers_profile_the_image_vllm_logs():
    """Qwen3.5 / 3.6 ship Qwen3VLProcessor with longest_edge 16,777,216 pixels (rules/vision.toml max_image_pixels,
    cited there): 65,536 patches of 16, merged 2 x 2 into 16,384 tokens, what vLLM logs for this tower family
    ("Encoder cache will be initialized with a budget of 16384 tokens, and profiled with 1 image items",
    noonghunna/club-3090 #1047)."""
    for mid in ("qwen3.5-27b", "qwen3.6-35b-a3b"):
        m = CATALOG.models[mid]
        assert catalog_tower(m.vision_params, m.name, CATALOG.rules, m.vision).item_tokens == 16_384

def test_towers_are_reported_not_silently_dropped() -> None:
    """llama.cpp loads a tower only from --mmproj: the answer says the catalog's tower is left out; vLLM
    loads it with the checkpoint: its weights and the profile run of its largest image (Qwen3-VL's processor:
    16,777,216 pixels, 65,536 patches of 16, 16,384 tokens) are in the answer, with what was assumed."""
    rig = build_rig(CATALOG, gpus=["h100-sxm"])
    model = CATALOG.models["qwen3-vl-8b"]
    llama = evaluate(CATALOG, rig, model, Options(runtime="llama.cpp", quant="Q4_K_M", ctx=8192))
    assert llama.vision is None
    assert any("vision tower (0.58B parameters) is not counted" in f.message for f in llama.findings)
    vllm = evaluate(CATALOG, rig, model, Options(runtime="vllm", quant="BF16", ctx=8192))
    assert vllm.vision is not None and vllm.vision.tower.params == 576_388_336
    assert vllm.vision.weights_bytes == 2 * 576_388_336
    assert vllm.vision.tower.item_patches == 65_536 and vllm.vision.images == 1 and vllm.vision.compute_bytes > 0
    assert "the profile run of 1 image of 16384 tokens" in vllm.vision.basis
    assert any(f.code == "VIS001" and f.severity == "warning" and "record of its checkpoint's vision_config" in f.message
               for f in vllm.findings)


def test_a_tower_known_by_its_count_only_is_named_by_its_model() -> None:
    """A tower known only by its parameter count (a catalog entry without `vision`): no image size, so no profile
    peak and no made-up image count, and VIS001 names the model it belongs to, not its family as if that were a
    projector type ("vision tower (qwen, ...)", "the largest image qwen's processor accepts")."""
    rig = build_rig(CATALOG, gpus=["h100-sxm"])
    model = replace(CATALOG.models["qwen3-vl-8b"], vision=None)
    r = evaluate(CATALOG, rig, model, Options(runtime="vllm", quant="BF16", ctx=8192))
    assert r.vision.compute_bytes == 0 and r.vision.images == 0
    assert "profile run is not counted" in r.vision.basis
    assert r.vision.tower.kind == "" and r.vision.tower.of == model.name
    said = [f.message for f in r.findings if f.code == "VIS001"]
    assert any("known only by its parameter count" in m for m in said), said
    assert any(m.startswith(f"vision tower of {model.name} (0.58B parameters): ") for m in said), said
    assert any(f"the largest image {model.name}'s processor accepts is not known" in m for m in said), said
    assert not any(f"({model.family}," in m or f" {model.family}'s " in m for m in said), said