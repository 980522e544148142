"""MLX on CUDA (rules/runtimes.toml id "mlx-cuda", like "mlx"): NVIDIA GPUs of compute capability 7.5 and up
(mlx docs/src/install.rst), one GPU as the advisor models it, MLX's CUDA allocator cap of 95% of the card, and
mlx-lm's quantizations; the Apple entry keeps Apple silicon only."""

from __future__ import annotations

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.plan import make_plan
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags

GIB = 1024**3


def _check(catalog, model, gpus, runtime="mlx-cuda", **kw):
    return evaluate(catalog, rig_from_flags(catalog, gpus), catalog.models[model], Options(runtime=runtime, **kw))


def test_runs_mlx_weights_on_one_nvidia_gpu_within_95_percent(catalog):
    r = _check(catalog, "llama-3.1-8b", ["rtx-3090"], quant="mlx-4bit")
    assert r.runs and not r.refusal and r.quant.id == "mlx-4bit"
    d = r.placement.devices[0]
    card = catalog.gpus["rtx-3090"].vram_bytes - 422 * 1024**2  # less the 3090's captured driver reserve (rules/memory.toml)
    assert d.capacity_bytes == int(card * 0.95)
    assert d.overhead_bytes >= 300 * 1024**2  # a discrete GPU's CUDA context, unlike unified memory
    assert "fitted on llama.cpp" in r.speed.basis


@pytest.mark.parametrize("gpus,why", [(["tesla-p40"], "7.5"), (["2xrtx-3090"], "1 GPU")])
def test_refuses_old_gpus_and_more_than_one(catalog, gpus, why):
    r = _check(catalog, "llama-3.1-8b", gpus)
    assert not r.runs and why in r.refusal and "llama.cpp" in r.refusal
    assert len([f for f in r.findings if f.code == "CMP001"]) == 1


def test_vendors_stay_apart(catalog):
    with pytest.raises(AdvisorError):
        _check(catalog, "llama-3.1-8b", ["m2-max-96gb"])
    with pytest.raises(AdvisorError):
        _check(catalog, "llama-3.1-8b", ["rtx-3090"], runtime="mlx")


def test_plan_keeps_to_one_gpu_of_7_5_and_up(catalog):
    p = make_plan(catalog, catalog.models["qwen3-8b"], Options(runtime="mlx-cuda"), min_tps=10, used=True, top=50)
    assert p.options
    for o in p.options:
        assert sum(n for n, _ in o.gpus) == 1
        assert all(catalog.gpus[g].compute_capability >= 7.5 for _, g in o.gpus)
