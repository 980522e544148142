"""CTX002 says "would fit fully on the GPUs at up to N" only when N is a context that fits fully on the GPUs. Where
the largest context measured is the one that runs (no GPU; a placement the command line fixed with -ngl or -ot) it
said so of models that fit on no GPU at all: "would fit fully on the GPUs at up to 128k" on a CPU-only rig, or at
24k for a 19 GiB model on a 12 GiB card with -ngl 30 (issue 26)."""

from __future__ import annotations

from advisor.engine.check import evaluate
from advisor.engine.findings import ktok
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags


def _answer(catalog, gpus, **opts):
    rig = rig_from_flags(catalog, gpus, ram=64)
    r = evaluate(catalog, rig, catalog.models["qwen3-32b"], Options(quant="Q4_K_M", **opts), table=False)
    assert r.runs and not r.fits
    return r, [f.message for f in r.findings if f.code == "CTX002"]


def test_a_fixed_placement_is_not_said_to_fit_at_a_shorter_context(catalog):
    r, said = _answer(catalog, ["rtx-3060"], n_gpu_layers=30, ctx=8192)
    assert r.max_context_limit == "runs" and r.max_context_tokens > 8192 and said == []


def test_a_cpu_only_rig_is_not_said_to_fit_on_gpus(catalog):
    r, said = _answer(catalog, [], ctx=8192)
    assert r.max_context_limit == "runs" and said == []


def test_a_context_too_long_for_the_gpus_names_the_one_that_fits(catalog):
    r, said = _answer(catalog, ["rtx-4090"], ctx=40960)
    assert r.max_context_limit == "fits" and 0 < r.max_context_tokens < 40960
    assert said == [f"it would fit fully on the GPUs at up to {ktok(r.max_context_tokens)} tokens of context."]
