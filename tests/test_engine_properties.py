"""Properties that must hold for any input (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.catalog.load import load_catalog
from advisor.catalog.resolve import resolve
from advisor.engine.check import evaluate, resolve_quant
from advisor.engine.options import Options
from advisor.engine.placement import Placer
from advisor.engine.scenario import Scenario
from advisor.engine.rig import Rig
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags

CAT = load_catalog(user=False)
MODELS = sorted(CAT.models)
GPUS = sorted(g for g in CAT.gpus if not CAT.gpus[g].unified_memory)
GGUF = ["Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def total(p) -> int:
    return sum(d.total_bytes for d in p.devices) + p.host.total_bytes


def scaled(rig: Rig, factor: float) -> Rig:
    return replace(rig, gpus=tuple(replace(g, capacity_bytes=int(g.capacity_bytes * factor)) for g in rig.gpus))


@SETTINGS
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.integers(1, 4), st.sampled_from(GGUF),
       st.integers(256, 65536), st.floats(1.0, 3.0))
def test_more_vram_never_breaks_a_fit(model, gpu, n, quant, ctx, factor):
    rig = rig_from_flags(CAT, [f"{n}x{gpu}"], ram=64)
    opts = Options(quant=quant, ctx=ctx)
    q = resolve_quant(CAT, quant)
    small = Placer(Scenario.of(CAT.models[model], q, CAT.runtimes["llama.cpp"], rig, opts, CAT.rules)).at(ctx)
    big = Placer(Scenario.of(CAT.models[model], q, CAT.runtimes["llama.cpp"], scaled(rig, factor), opts,
                             CAT.rules)).at(ctx)
    if small.fits:
        assert big.fits


@SETTINGS
@given(st.sampled_from(MODELS), st.sampled_from(GGUF), st.integers(1, 131072), st.integers(1, 131072))
def test_longer_context_never_needs_less_memory(model, quant, a, b):
    rig = rig_from_flags(CAT, ["8xh100-sxm"], ram=2048)
    q = resolve_quant(CAT, quant)
    lo, hi = sorted((a, b))
    p = lambda c: Placer(Scenario.of(CAT.models[model], q, CAT.runtimes["llama.cpp"], rig, Options(quant=quant, ctx=c),  # noqa: E731
                                     CAT.rules)).at(c)
    pl, ph = p(lo), p(hi)
    if pl.strategy == ph.strategy == "layer_split":
        assert total(ph) >= total(pl)


@SETTINGS
@given(st.sampled_from(MODELS), st.integers(0, len(GGUF) - 2), st.integers(256, 32768))
def test_more_bits_never_need_less_memory(model, i, ctx):
    rig = rig_from_flags(CAT, ["8xh200-sxm"], ram=4096)
    sizes = []
    for quant in (GGUF[i], GGUF[i + 1]):
        q = resolve_quant(CAT, quant)
        p = Placer(Scenario.of(CAT.models[model], q, CAT.runtimes["llama.cpp"], rig, Options(quant=quant, ctx=ctx),
                               CAT.rules)).at(ctx)
        sizes.append(total(p))
    assert sizes[1] >= sizes[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.one_of(st.sampled_from(MODELS), st.text(max_size=20)),
       gpu=st.one_of(st.sampled_from(GPUS + ["m2-ultra-192gb", "dgx-spark"]), st.text(max_size=12)),
       n=st.integers(-2, 80), quant=st.one_of(st.none(), st.sampled_from(GGUF + ["fp8", "awq", "exl2-4.65", "nf4"]), st.text(max_size=8)),
       ctx=st.one_of(st.none(), st.integers(-5, 1 << 26)), conc=st.integers(-1, 5000),
       runtime=st.sampled_from(["llama.cpp", "vllm", "ollama", "exllamav2", "mlx", "transformers", "bogus"]),
       kv=st.sampled_from(["f16", "q8_0", "q4_0", "fp8", "x"]), split=st.sampled_from([None, "layer", "tensor", "zz"]),
       workload=st.sampled_from(["inference", "lora", "qlora", "full-finetune", "nope"]))
def test_nothing_but_advisor_error_escapes(model, gpu, n, quant, ctx, conc, runtime, kv, split, workload):
    try:
        rig = rig_from_flags(CAT, [f"{n}x{gpu}"], ram=64)
        r = evaluate(CAT, rig, CAT.models[resolve(CAT.models, model, "model")], Options(quant=quant, ctx=ctx, concurrency=conc, runtime=runtime, kv_type=kv,
                                              split=split, workload=workload))
    except AdvisorError:
        return
    assert r.runs or r.speed.decode_tokens_per_s is None
    if r.speed.decode_tokens_per_s is not None:
        assert r.speed.decode_tokens_per_s > 0
    assert r.interconnect.nvlink_speedup >= 1.0


def test_one_gpu_is_not_applicable():
    for model in ("llama-3.1-8b", "qwen3-32b"):
        r = evaluate(CAT, rig_from_flags(CAT, ["rtx-4090"], ram=64), CAT.models[model])
        assert r.interconnect.nvlink == "not_applicable"
