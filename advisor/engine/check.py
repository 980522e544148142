"""`evaluate`: one model on one rig with options -> a Report. The single entry point of the engine.

A pipeline of stages over one Scenario (advisor.engine.scenario), resolved once: check the ask, pick the
quantization (given, the file's own, or chosen), place it, time it, judge the links, serve it, write the
command that runs it, and state the findings.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.catalog.types import Catalog, ModelSpec, RuntimeSpec
from advisor.engine import choice as ch
from advisor.engine.compat import refusal
from advisor.engine.estimate import decode_seconds, estimate_speed, interconnect_verdict, prefill_seconds
from advisor.engine.family import family_of
from advisor.engine.findings import run_rules
from advisor.engine.launch import launch_for
from advisor.engine.loaded import LoadedModel
from advisor.engine.options import Options
from advisor.engine.placement import Placement, Placer
from advisor.engine.quants import fallback_quant, quant_ladder, resolve_quant
from advisor.engine.result import Interconnect, Report, SplitChoice, WhatIf
from advisor.engine.rig import Rig
from advisor.engine.scenario import Scenario
from advisor.engine.validate import check_options
from advisor.errors import AdvisorError
from advisor.record import Record, record

__all__ = ["Pick", "check_options", "check_runtime_hardware", "decode_seconds", "estimate_speed", "evaluate",
           "fallback_quant", "interconnect_verdict", "prefill_seconds", "quant_ladder", "resolve_quant"]



def check_runtime_hardware(runtime: RuntimeSpec, rig: Rig) -> None:
    """A runtime only runs on the hardware it was built for (vLLM has no Metal, MLX no CUDA)."""
    if rig.is_cpu_only and not runtime.cpu_only:
        raise AdvisorError(f"{runtime.name} needs a GPU and this rig has none",
                           "use --runtime llama.cpp (or ollama) for CPU-only, or describe GPUs with --gpu")
    wrong = sorted({g.spec.vendor for g in rig.gpus} - set(runtime.vendors))
    if wrong:
        raise AdvisorError(f"{runtime.name} does not run on {', '.join(wrong)} GPUs",
                           f"it runs on: {', '.join(runtime.vendors)}; llama.cpp runs everywhere")


@record
class Pick(Record):
    """The quantization the answer uses, placed: from --quant, from the model file, or chosen by the policy."""

    scenario: Scenario
    placer: Placer
    chosen: bool
    """The advisor chose the quantization (no --quant, no model file fixing it)."""
    choices: tuple = ()
    why: str = ""
    policy: object = None


def evaluate(catalog: Catalog, rig: Rig, model: ModelSpec | LoadedModel, options: Options = Options(), *,
             table: bool = True) -> Report:
    """Fit, placement, memory, speed, interconnect verdict and findings for one model on one rig.

    `model` is resolved at the edge (`advisor.commands.args.resolve_model`): a catalog ModelSpec, or a
    model read from its own files (a LoadedModel: its real tensor sizes replace the bits-per-weight estimate).
    """
    if not isinstance(model, (ModelSpec, LoadedModel)):
        raise TypeError(f"evaluate() takes a ModelSpec or a LoadedModel, not {type(model).__name__}: "
                        f"resolve names at the edge (advisor.commands.args.resolve_model)")
    loaded = model if isinstance(model, LoadedModel) else None
    base = _scenario(catalog, rig, model, options)
    pick = _pick(catalog, base, loaded, table)
    sc = pick.scenario
    source = f"{loaded.source}: {loaded.spec.sources[0]}" if loaded else "catalog"
    refused = refusal(catalog, sc.runtime, rig, sc.model, sc.quant, asked=not pick.chosen)
    if refused:
        return _refused_report(catalog, pick, refused, source)
    report = _answer(pick, source)
    if sc.options.workload == "inference":
        report = _with_choices(catalog, report, pick, table)
    report = replace(report, launch=launch_for(sc, report.placement, pick.placer, loaded))
    if sc.options.workload != "inference":
        report = _with_training(catalog, report)
    report = replace(report, what_if=what_if(report, pick.placer))
    return replace(report, findings=run_rules(report, catalog))


def _scenario(catalog: Catalog, rig: Rig, model: ModelSpec | LoadedModel, options: Options) -> Scenario:
    """The ask checked and resolved: its runtime, the vision tower in play, the context; at the quantization a
    model file fixes, else provisionally at the runtime's common download (the pick stage decides)."""
    loaded = model if isinstance(model, LoadedModel) else None
    spec = loaded.spec if loaded is not None else model
    runtime = check_options(catalog, options)
    check_runtime_hardware(runtime, rig)
    from advisor.engine.vision import tower_for

    tower = tower_for(options, loaded, spec, catalog.rules)
    if tower is not None and tower is not options.vision_tower:
        options = replace(options, vision_tower=tower)
    used = (options.tensor_parallel or 1) * (options.pipeline_parallel or 1)
    if used > max(len(rig.gpus), 1):
        raise AdvisorError(f"tensor x pipeline parallel sizes need {used} GPUs and the rig has {len(rig.gpus)}",
                           "lower the sizes or add GPUs")
    if loaded is not None and (loaded.exact or not options.quant):
        layout = replace(loaded.layout, output_bytes=loaded.layout.output_bytes + loaded.other_bytes)
        return replace(Scenario.of(spec, loaded.quant, runtime, rig, options, catalog.rules), layout=layout,
                       file_layout=True)
    return Scenario.of(spec, fallback_quant(catalog, runtime, spec), runtime, rig, options, catalog.rules)


def _pick(catalog: Catalog, sc: Scenario, loaded: LoadedModel | None, table: bool) -> Pick:
    """The quantization: the file's own, the asked one (each checked against the runtime), or the policy's."""
    runtime, options = sc.runtime, sc.options
    if sc.file_layout:
        if options.quant and resolve_quant(catalog, options.quant).id != sc.quant.id:
            raise AdvisorError(f"--quant {options.quant}: the file's weights are {sc.quant.id}",
                               "drop --quant: a model file fixes its quantization")
        if not runtime.loads(sc.quant) and sc.quant.format not in runtime.formats:
            raise AdvisorError(f"{runtime.name} does not load {loaded.source} weights",
                               f"use --runtime {' or '.join(r.id for r in catalog.runtimes.values() if r.loads(sc.quant)) or 'llama.cpp'}")
        return Pick(sc, Placer(sc), False)
    if options.quant:
        quant = resolve_quant(catalog, options.quant)
        if not runtime.loads(quant) and quant.format not in runtime.formats:
            raise AdvisorError(f"{runtime.name} does not load {quant.id}",
                               f"runtimes for {quant.id}: {', '.join(quant.runtimes)}")
        sc = sc.with_quant(quant)
        return Pick(sc, Placer(sc), False)
    return _choose(catalog, sc, table)


def _choose(catalog: Catalog, sc: Scenario, table: bool) -> Pick:
    """The policy's pick over the runtime's ladder (advisor.engine.choice), or its fallback when nothing runs."""
    runtime, rig, model = sc.runtime, sc.rig, sc.model
    ladder = [q for q in quant_ladder(catalog, runtime, model) if not refusal(catalog, runtime, rig, model, q)]
    fallback = sc.quant
    if refusal(catalog, runtime, rig, model, fallback):  # show one its kernels run, if any
        fallback = next((q for q in reversed(quant_ladder(catalog, runtime, model))
                         if not refusal(catalog, runtime, rig, model, q)), fallback)
    decision = ch.choose(catalog, sc, ladder, fallback, table=table)
    placer = decision.placer or Placer(sc.with_quant(fallback))
    chosen = placer.scenario.derive(ctx=sc.ctx, kv_type=decision.kv_type)
    return Pick(chosen, placer, True, decision.choices, decision.why, decision.policy)


def _answer(pick: Pick, source: str) -> Report:
    """Placement, memory, speed, the link verdict and (paged runtimes) serving, at the scenario's context."""
    sc, placer = pick.scenario, pick.placer
    placement = placer.at(sc.ctx)
    speed = estimate_speed(sc, placement)
    inter = interconnect_verdict(sc, placement)
    serving = family_of(sc.runtime).serving(sc, placement, placer)
    if serving is not None:
        many = sc.options.concurrency > 1
        speed = replace(speed, aggregate_decode_tokens_per_s=serving.aggregate_decode_tokens_per_s if many else None,
                        per_stream_decode_tokens_per_s=serving.per_stream_decode_tokens_per_s if many else None)
    return Report(model=sc.model, quant=sc.quant, quant_chosen=pick.chosen, runtime=sc.runtime,
                  split=placer.split if len(sc.rig.gpus) > 1 else sc.runtime.default_split,
                  context_tokens=sc.ctx, options=sc.options, rig=sc.rig, placement=placement,
                  kv_cache_bytes=sum(placer.kv_per_layer(sc.ctx)), max_context_tokens=placer.max_context(),
                  max_context_limit=placer.context_limit,
                  speed=speed, interconnect=inter, findings=(), model_source=source, serving=serving,
                  vision=placer.vision)


def _with_choices(catalog: Catalog, report: Report, pick: Pick, table: bool) -> Report:
    """The trade-off table and the policy: the pick's own, or for a given quantization one measured here."""
    sc = pick.scenario
    rt, rig = sc.runtime, sc.rig
    if table and len(rig.gpus) > 1 and rt.tensor_split == "meta" and rt.supports_tensor_parallel:
        report = replace(report, split_choices=split_choices(pick, report))
    choices, why, policy = pick.choices, pick.why, pick.policy
    if policy is None:
        policy = ch.policy(catalog, sc.model, sc.options, False)
        if table:
            why = sc.options.quant_basis or ("given with --quant" if sc.options.quant else
                                             "the model file's own quantization")
            ladder = [q for q in quant_ladder(catalog, rt, sc.model) if not refusal(catalog, rt, rig, sc.model, q)]
            choices = ch.table_for(catalog, sc, ladder, why, policy)
    return replace(report, choices=choices, choice_why=why, policy=policy)


def _with_training(catalog: Catalog, report: Report) -> Report:
    from advisor.engine.training import estimate_training, training_verdict

    training = estimate_training(catalog, report.rig, report.model, report.options)
    return replace(report, training=training,
                   interconnect=training_verdict(catalog, report.rig, report.model, report.options, training))


def what_if(report: Report, placer: Placer) -> WhatIf | None:
    """The same answer with a q8_0 KV cache, where an f16 cache leaves context on the table or does not fit
    (the findings FIT001 and KV001 say it): placed with the scenario's own weights (a file's real bytes)."""
    rt, opts = report.runtime, report.options
    if opts.kv_type != "f16" or "q8_0" not in rt.kv_types or not report.runs:
        return None
    room = report.placement.fits and report.max_context_tokens < report.model.max_context
    if not (room or not report.fits):
        return None
    q8 = Placer(placer.scenario.with_options(kv_type="q8_0"))
    return WhatIf("q8_0", max_context_tokens=q8.max_context() if room else None,
                  fits=q8.at(report.context_tokens).fits if not report.fits else None)


def split_choices(pick: Pick, report: Report) -> tuple[SplitChoice, ...]:
    """The answer under layer split and under the runtime's tensor split (llama.cpp -sm layer vs -sm tensor),
    each with its speeds, the share of the step on the links and what NVLink would change: the split choice
    the SPL002 finding states."""
    out = []
    for split in ("layer", "tensor"):
        if split == pick.placer.split:
            p, sp, ic = report.placement, report.speed, report.interconnect
        else:
            sc = pick.scenario.with_options(split=split)
            p = Placer(sc).at(sc.ctx)
            sp, ic = estimate_speed(sc, p), interconnect_verdict(sc, p)
        out.append(SplitChoice(split, p.runs, p.fits, sp.decode_tokens_per_s, sp.prefill_tokens_per_s,
                               ic.link_time_share, ic.nvlink_speedup, p.problem))
    return tuple(out)


def _refused_report(catalog: Catalog, pick: Pick, why: str, source: str) -> Report:
    """The answer when the runtime cannot run this model on these GPUs at all (CMP001 says why)."""
    sc = pick.scenario
    placement = Placement("none", (), pick.placer._host(0, 0, 0), fits=False, runs=False, gpu_layers=0,
                          problem=why)
    speed = estimate_speed(sc, placement)
    inter = Interconnect("not_applicable", 0.0, 1.0, "does not run on this rig, so the link does not matter")
    report = Report(model=sc.model, quant=sc.quant, quant_chosen=pick.chosen, runtime=sc.runtime,
                    split=sc.options.split or sc.runtime.default_split, context_tokens=sc.ctx, options=sc.options,
                    rig=sc.rig, placement=placement, kv_cache_bytes=0, max_context_tokens=0, speed=speed,
                    interconnect=inter, findings=(), model_source=source, refusal=why)
    return replace(report, findings=run_rules(report, catalog))
