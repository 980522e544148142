"""The catalog's vision_params, recounted: every built-in model that records a vision tower has the
vision_config of the config.json it cites in tests/data/catalog_vision_configs.json (source beside each),
and the repo's own counter (advisor/modelfile/vision.py) gives exactly the recorded number, so the catalog
cannot drift from the configs or from the counter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.catalog.load import load_catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
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


def test_towers_are_reported_not_silently_dropped() -> None:
    """llama.cpp loads a tower only from --mmproj: the answer says the catalog's tower is left out; vLLM
    loads it with the checkpoint: its weights are in the answer, with what was assumed."""
    rig = build_rig(CATALOG, gpus=["h100-sxm"])
    model = CATALOG.models["qwen3-vl-8b"]
    llama = evaluate(CATALOG, rig, model, Options(runtime="llama.cpp", quant="Q4_K_M", ctx=8192))
    assert llama.vision is None
    assert any("vision tower (0.58B parameters) is not counted" in f.message for f in llama.findings)
    vllm = evaluate(CATALOG, rig, model, Options(runtime="vllm", quant="BF16", ctx=8192))
    assert vllm.vision is not None and vllm.vision.tower.params == 576_388_336
    assert vllm.vision.weights_bytes == 2 * 576_388_336
    # known by its count only: no image size, so no profile peak and no made-up image count
    assert vllm.vision.compute_bytes == 0 and vllm.vision.images == 0
    assert "profile run is not counted" in vllm.vision.basis
    assert any(f.code == "VIS001" and f.severity == "warning" and "known only by its parameter count" in f.message
               for f in vllm.findings)


def test_a_catalog_tower_is_named_by_its_model() -> None:
    """The catalog knows a tower only by its count: VIS001 names the model it belongs to, not its family as
    if that were a projector type ("vision tower (qwen, ...)", "the largest image qwen's processor accepts")."""
    rig = build_rig(CATALOG, gpus=["h100-sxm"])
    model = CATALOG.models["qwen3-vl-8b"]
    r = evaluate(CATALOG, rig, model, Options(runtime="vllm", quant="BF16", ctx=8192))
    assert r.vision.tower.kind == "" and r.vision.tower.of == model.name
    said = [f.message for f in r.findings if f.code == "VIS001"]
    assert any(m.startswith(f"vision tower of {model.name} (0.58B parameters): ") for m in said), said
    assert any(f"the largest image {model.name}'s processor accepts is not known" in m for m in said), said
    assert not any(f"({model.family}," in m or f" {model.family}'s " in m for m in said), said
