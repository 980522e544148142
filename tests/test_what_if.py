"""The q8_0 what-if behind findings FIT001 and KV001 is placed with the answer's own weights: a model file's real
bytes, not the catalog's bits-per-weight estimate (before, both findings re-ran the placement from the catalog
and could promise a context or a fit the file does not have)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine.check import evaluate
from advisor.engine.findings import ktok
from advisor.engine.loaded import LoadedModel
from advisor.engine.memory import weights_layout
from advisor.engine.options import Options
from advisor.engine.placement import Placer
from advisor.engine.scenario import Scenario
from advisor.probe.flags import rig_from_flags

MODEL, QUANT, GPU = "llama-3.1-8b", "F16", "rtx-3090"


def _file(catalog, scale: float) -> LoadedModel:
    """A file of the catalog model whose layers hold `scale` x the estimated bytes (as a real file may)."""
    spec, q = catalog.models[MODEL], catalog.quants[QUANT]
    est = weights_layout(spec, q)
    layers = tuple(int(b * scale) for b in est.layer_bytes)
    lay = replace(est, layer_bytes=layers, total_bytes=est.total_bytes + sum(layers) - sum(est.layer_bytes))
    return LoadedModel(spec, q, lay, "gguf file", exact=True)


def _max_q8(catalog, rig, layout=None) -> int:
    spec, q = catalog.models[MODEL], catalog.quants[QUANT]
    sc = Scenario.of(spec, q, catalog.runtimes["llama.cpp"], rig, Options(kv_type="q8_0"), catalog.rules)
    return Placer(sc if layout is None else replace(sc, layout=layout, file_layout=True)).max_context()


def test_fit001_q8_context_is_the_files(catalog):
    rig = rig_from_flags(catalog, [GPU], ram=64)
    loaded = _file(catalog, 1.1)
    r = evaluate(catalog, rig, loaded, Options(), table=False)
    assert r.fits and r.what_if is not None
    file_q8 = _max_q8(catalog, rig, replace(loaded.layout, output_bytes=loaded.layout.output_bytes + loaded.other_bytes))
    assert r.what_if.max_context_tokens == file_q8
    assert file_q8 != _max_q8(catalog, rig), "the file must differ from the estimate for this test to mean anything"
    fit001 = next(f for f in r.findings if f.code == "FIT001")
    assert f"{ktok(file_q8)} with q8_0" in fit001.message


def test_kv001_does_not_promise_a_fit_the_file_does_not_have(catalog):
    rig = rig_from_flags(catalog, [GPU], ram=64)
    loaded = _file(catalog, 1.1)
    spec, q, rt = catalog.models[MODEL], catalog.quants[QUANT], catalog.runtimes["llama.cpp"]
    file_layout = replace(loaded.layout, output_bytes=loaded.layout.output_bytes + loaded.other_bytes)

    def fits(ctx: int, kv: str, layout) -> bool:
        sc = Scenario.of(spec, q, rt, rig, Options(kv_type=kv, ctx=ctx), catalog.rules)
        return Placer(sc if layout is None else replace(sc, layout=layout)).at(ctx).fits

    # a context at which the catalog's estimate fits with q8_0 and the file does not fit either way
    ctx = next((c for c in range(8192, spec.max_context + 1, 1024)
                if fits(c, "q8_0", None) and not fits(c, "q8_0", file_layout) and not fits(c, "f16", file_layout)),
               None)
    if ctx is None:
        pytest.fail("no context separates the file from the estimate: the scale no longer exercises the bug")
    r = evaluate(catalog, rig, loaded, Options(ctx=ctx), table=False)
    assert not r.fits and r.runs and r.what_if is not None and r.what_if.fits is False
    assert "KV001" not in {f.code for f in r.findings}
