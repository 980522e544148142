"""`evaluate`: one model on one rig with options -> a Report. The single entry point of the engine."""

from __future__ import annotations

import re
from dataclasses import replace

from advisor.catalog.resolve import resolve
from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import Catalog, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine import memory as mem
from advisor.engine import speed as spd
from advisor.engine.compat import refusal
from advisor.engine.findings import run_rules
from advisor.engine.interconnect import link_times, split_matrices
from advisor.engine.launch import launch_for
from advisor.engine.loaded import LoadedModel
from advisor.engine.options import DEFAULT_CTX, FLASH_ATTN, KV_TYPES, SPLITS, WORKLOADS, Options
from advisor.engine.placement import Placement, Placer
from advisor.engine.result import Interconnect, Report, Speed
from advisor.engine.rig import Rig
from advisor.engine.serving import serve
from advisor.errors import AdvisorError

_EXL = re.compile(r"^(exl[23])-(\d+(?:\.\d+)?)$", re.IGNORECASE)
# The parametric formats: (lowest and highest bits per weight of the linear layers, bits of the output head
# when the format quantizes it on its own, what the number means).
_EXL_FORMATS = {
    "exl2": (1.0, 8.5, None, "EXL2 targets this average bits per weight over the linear layers; the "
                             "embedding stays 16-bit (the head is 6-bit by default: 16 is the safe side)"),
    # turboderp-org/exllamav3 exllamav3/conversion/convert_model.py @4f8ad01: -b/--bits from 1 to 8 (line 138),
    # -hb/--head_bits "default: 6" (line 37); the embedding, norms and MoE router gates stay 16-bit (Embedding
    # has no quantization map; block_sparse_mlp.py builds the routing gate with qmap = None).
    "exl3": (1.0, 8.0, 6.0, "EXL3 (QTIP trellis) quantizes the linear layers to this average bits per weight "
                            "and the output head to --head_bits (6 by default); the embedding, norms and MoE "
                            "router gates stay 16-bit (turboderp-org/exllamav3 convert_model.py @4f8ad01)"),
}
MAX_CTX = 16 * 1024 * 1024
MAX_CONCURRENCY = 4096
MAX_PROMPT = 16 * 1024 * 1024


def resolve_quant(catalog: Catalog, text: str) -> QuantSpec:
    """A quant id (case-insensitive), or `exl2-<bpw>` / `exl3-<bpw>` synthesised from its bits per weight."""
    m = _EXL.match(text.strip())
    if m:
        fmt = m.group(1).lower()
        lo, hi, head, basis = _EXL_FORMATS[fmt]
        bpw = float(m.group(2))
        if not lo <= bpw <= hi:
            raise AdvisorError(f"--quant {text!r}: {fmt.upper()} bits per weight must be {lo:g} to {hi:g}")
        return QuantSpec(id=f"{fmt}-{m.group(2)}", format=fmt, bits_per_weight=bpw, bpw_basis=basis,
                         runtimes=tuple(r.id for r in catalog.runtimes.values() if fmt in r.formats),
                         kernel=fmt, linear_bits=bpw, embed_bits=16.0, head_bits=head)
    by_lower = {q.lower(): q for q in catalog.quants}
    key = text.strip().lower()
    if key in by_lower:
        return catalog.quants[by_lower[key]]
    return catalog.quants[resolve(catalog.quants, text, "quant")]


def check_options(catalog: Catalog, options: Options) -> RuntimeSpec:
    if options.runtime not in catalog.runtimes:
        raise AdvisorError(f"unknown runtime {options.runtime!r}", f"use one of: {', '.join(catalog.runtimes)}")
    runtime = catalog.runtimes[options.runtime]
    if options.kv_type not in KV_TYPES:
        raise AdvisorError(f"unknown KV cache type {options.kv_type!r}", f"use one of: {', '.join(KV_TYPES)}")
    if options.kv_type not in runtime.kv_types:
        raise AdvisorError(f"{runtime.name} has no {options.kv_type} KV cache",
                           f"use one of: {', '.join(runtime.kv_types)}")
    if options.split is not None and options.split not in SPLITS:
        raise AdvisorError(f"unknown split {options.split!r}", "use layer, tensor or row")
    if options.split == "row" and not runtime.row_split:
        raise AdvisorError(f"{runtime.name} has no row split (-sm row)", "use --split layer or --split tensor")
    if options.flash_attn not in FLASH_ATTN:
        raise AdvisorError(f"unknown flash attention setting {options.flash_attn!r}", "use auto, on or off")
    if options.flash_attn == "off" and options.kv_type != "f16" and runtime.kv_quant_needs_flash_attention:
        raise AdvisorError(f"{runtime.name} needs flash attention for a {options.kv_type} V cache",
                           "drop --flash-attn off, or use --kv-cache f16")
    if options.ubatch is not None and not 1 <= options.ubatch <= MAX_CTX:
        raise AdvisorError(f"--ubatch {options.ubatch} is out of range", f"use 1 to {MAX_CTX}")
    if options.workload not in WORKLOADS:
        raise AdvisorError(f"unknown workload {options.workload!r}", f"use one of: {', '.join(WORKLOADS)}")
    if options.ctx is not None and not 1 <= options.ctx <= MAX_CTX:
        raise AdvisorError(f"--ctx {options.ctx} is out of range", f"use 1 to {MAX_CTX}")
    if not 1 <= options.concurrency <= MAX_CONCURRENCY:
        raise AdvisorError(f"--concurrency {options.concurrency} is out of range", f"use 1 to {MAX_CONCURRENCY}")
    if not 1 <= options.prompt_tokens <= MAX_PROMPT:
        raise AdvisorError(f"--prompt-tokens {options.prompt_tokens} is out of range", f"use 1 to {MAX_PROMPT}")
    names = runtime.option_names
    for given, key, what in ((options.memory_fraction, "memory_fraction", "a memory fraction"),
                             (options.max_num_batched_tokens, "max_num_batched_tokens", "a batched-token budget"),
                             (options.max_num_seqs, "max_num_seqs", "a cap on requests per step"),
                             (options.enforce_eager or None, "eager", "an eager mode"),
                             (options.cpu_offload_gb or None, "cpu_offload_gb", "--cpu-offload-gb"),
                             (options.tensor_parallel, "tensor_parallel", "a tensor-parallel size"),
                             (options.pipeline_parallel, "pipeline_parallel", "a pipeline-parallel size")):
        if given is not None and key not in names:
            raise AdvisorError(f"{runtime.name} has no option for {what}",
                               f"runtimes that have one: {', '.join(r.id for r in catalog.runtimes.values() if key in r.option_names)}")
    if options.memory_fraction is not None and not 0.05 <= options.memory_fraction <= 1.0:
        raise AdvisorError(f"memory fraction {options.memory_fraction:g} is out of range", "use 0.05 to 1.0")
    if not 0 <= options.cpu_offload_gb <= 100_000:
        raise AdvisorError(f"--cpu-offload-gb {options.cpu_offload_gb:g} is out of range", "use 0 to 100000")
    for n, what in ((options.tensor_parallel, "tensor"), (options.pipeline_parallel, "pipeline"), (options.max_num_seqs, "max-num-seqs")):
        if n is not None and not 1 <= n <= MAX_CONCURRENCY:
            raise AdvisorError(f"--{what} size {n} is out of range", f"use 1 to {MAX_CONCURRENCY}")
    if options.mm_limit != 0 and (options.mmproj or (options.vision_tower is not None
                                                     and options.vision_tower.source == "mmproj")):
        vis = catalog.rules.vision.by_runtime.get(runtime.vision_terms)
        if vis is None or "mmproj" not in vis.loads:
            takers = [r.id for r in catalog.runtimes.values()
                      if "mmproj" in getattr(catalog.rules.vision.by_runtime.get(r.vision_terms), "loads", ())]
            raise AdvisorError(f"{runtime.name} does not load an mmproj file (--mmproj)",
                               f"runtimes that do: {', '.join(takers)}; {runtime.name} reads the vision tower "
                               f"from the model's own checkpoint" if takers else "drop --mmproj")
        if options.vision_tower is None:
            raise AdvisorError(f"--mmproj {options.mmproj}: the file was not read", "pass it on the command line")
    if options.mm_limit is not None and not 0 <= options.mm_limit <= MAX_CONCURRENCY:
        raise AdvisorError(f"--limit-mm-per-prompt {options.mm_limit} is out of range", f"use 0 to {MAX_CONCURRENCY}")
    return runtime


def check_runtime_hardware(runtime: RuntimeSpec, rig: Rig) -> None:
    """A runtime only runs on the hardware it was built for (vLLM has no Metal, MLX no CUDA)."""
    if rig.is_cpu_only and not runtime.cpu_only:
        raise AdvisorError(f"{runtime.name} needs a GPU and this rig has none",
                           "use --runtime llama.cpp (or ollama) for CPU-only, or describe GPUs with --gpu")
    wrong = sorted({g.spec.vendor for g in rig.gpus} - set(runtime.vendors))
    if wrong:
        raise AdvisorError(f"{runtime.name} does not run on {', '.join(wrong)} GPUs",
                           f"it runs on: {', '.join(runtime.vendors)}; llama.cpp runs everywhere")


def quant_ladder(catalog: Catalog, runtime: RuntimeSpec, model: ModelSpec | None = None) -> list[QuantSpec]:
    """The quantizations to try, best quality first. A model published in a low-bit format
    (`native_quant`) is tried in that format only: its 16-bit files only widen the small non-expert
    part, and GGUFs "below" it keep the experts in that format (so the ladder's bits per weight
    would describe files that do not exist)."""
    sel = catalog.rules.memory.selection
    ladder = [resolve_quant(catalog, q) for q in sel.ladder[runtime.ladder]]
    native = _native(catalog, runtime, model)
    if native is not None:
        ladder = [native]
    return ladder


def fallback_quant(catalog: Catalog, runtime: RuntimeSpec, model: ModelSpec | None = None) -> QuantSpec:
    native = _native(catalog, runtime, model)
    if native is not None:
        return native
    sel = catalog.rules.memory.selection
    return resolve_quant(catalog, sel.fallback[runtime.ladder])


def _native(catalog: Catalog, runtime: RuntimeSpec, model: ModelSpec | None) -> QuantSpec | None:
    if model is None or not model.native_quant:
        return None
    q = resolve_quant(catalog, model.native_quant)
    return q if runtime.loads(q) else None


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
    if loaded is not None:
        model = loaded.spec
    runtime = check_options(catalog, options)
    check_runtime_hardware(runtime, rig)
    from advisor.engine.vision import tower_for

    tower = tower_for(options, loaded, model, catalog.rules)
    if tower is not None and tower is not options.vision_tower:
        options = replace(options, vision_tower=tower)
    used = (options.tensor_parallel or 1) * (options.pipeline_parallel or 1)
    if used > max(len(rig.gpus), 1):
        raise AdvisorError(f"tensor x pipeline parallel sizes need {used} GPUs and the rig has {len(rig.gpus)}",
                           "lower the sizes or add GPUs")
    rules = catalog.rules
    ctx = min(options.ctx or DEFAULT_CTX, model.max_context)
    if loaded is not None and (loaded.exact or not options.quant):
        if options.quant and resolve_quant(catalog, options.quant).id != loaded.quant.id:
            raise AdvisorError(f"--quant {options.quant}: the file's weights are {loaded.quant.id}",
                               "drop --quant: a model file fixes its quantization")
        if not runtime.loads(loaded.quant) and loaded.quant.format not in runtime.formats:
            raise AdvisorError(f"{runtime.name} does not load {loaded.source} weights",
                               f"use --runtime {' or '.join(r.id for r in catalog.runtimes.values() if r.loads(loaded.quant)) or 'llama.cpp'}")
        layout = replace(loaded.layout, output_bytes=loaded.layout.output_bytes + loaded.other_bytes)
        placer = Placer(model, loaded.quant, runtime, rig, options, rules, layout=layout)
        quant, chosen = loaded.quant, False
        choices, why, policy = (), "", None
    elif options.quant:
        quant = resolve_quant(catalog, options.quant)
        if not runtime.loads(quant) and quant.format not in runtime.formats:
            raise AdvisorError(f"{runtime.name} does not load {quant.id}",
                               f"runtimes for {quant.id}: {', '.join(quant.runtimes)}")
        placer = Placer(model, quant, runtime, rig, options, rules)
        chosen = False
        choices, why, policy = (), "", None
    else:
        from advisor.engine.choice import choose

        ladder = [q for q in quant_ladder(catalog, runtime, model) if not refusal(catalog, runtime, rig, model, q)]
        fallback = fallback_quant(catalog, runtime, model)
        if refusal(catalog, runtime, rig, model, fallback):  # show one its kernels run, if any
            fallback = next((q for q in reversed(quant_ladder(catalog, runtime, model))
                             if not refusal(catalog, runtime, rig, model, q)), fallback)
        decision = choose(catalog, rig, model, runtime, options, ladder, fallback, resolve_quant, estimate_speed,
                          table=table)
        placer = decision.placer
        if placer is None:
            placer = Placer(model, fallback, runtime, rig, options, rules)
        options = replace(options, kv_type=decision.kv_type)
        quant, chosen = placer.quant, True
        choices, why, policy = decision.choices, decision.why, decision.policy
    refused = refusal(catalog, runtime, rig, model, quant, asked=not chosen)
    if refused:
        return _refused_report(catalog, rig, model, quant, chosen, runtime, options, ctx, refused,
                               f"{loaded.source}: {loaded.spec.sources[0]}" if loaded else "catalog")
    placement = placer.at(ctx)
    max_ctx = placer.max_context()
    kv_total = sum(placer.kv_per_layer(ctx))
    speed = estimate_speed(placement, rig, model, quant, runtime, rules, options, ctx)
    inter = interconnect_verdict(placement, rig, model, quant, runtime, rules, options, ctx)
    split = placer.split if len(rig.gpus) > 1 else runtime.default_split
    serving = None
    if runtime.kv_pool == "paged" and rig.gpus and options.workload == "inference":
        serving = serve(placement, rig, model, quant, runtime, rules, options, ctx,
                        max_num_seqs=placer.batch_defaults()[1])
        speed = replace(speed, aggregate_decode_tokens_per_s=serving.aggregate_decode_tokens_per_s
                        if options.concurrency > 1 else None,
                        per_stream_decode_tokens_per_s=serving.per_stream_decode_tokens_per_s
                        if options.concurrency > 1 else None)
    report = Report(model=model, quant=quant, quant_chosen=chosen, runtime=runtime, split=split,
                    context_tokens=ctx, options=options, rig=rig, placement=placement,
                    kv_cache_bytes=kv_total, max_context_tokens=max_ctx, speed=speed, interconnect=inter,
                    findings=(), model_source=f"{loaded.source}: {loaded.spec.sources[0]}" if loaded else "catalog",
                    serving=serving, vision=placer.vision)
    if options.workload == "inference" and table and len(rig.gpus) > 1 and runtime.tensor_split == "meta" \
            and runtime.supports_tensor_parallel:
        report = replace(report, split_choices=split_choices(placer, ctx, placement, speed, inter))
    if options.workload == "inference":
        from advisor.engine import choice as ch

        if policy is None and not table:
            policy = ch.policy(catalog, model, options, False, resolve_quant)
        elif policy is None:
            why = "given with --quant" if options.quant else "the model file's own quantization"
            policy = ch.policy(catalog, model, options, False, resolve_quant)
            ladder = [q for q in quant_ladder(catalog, runtime, model) if not refusal(catalog, runtime, rig, model, q)]
            choices = ch.table_for(catalog, rig, model, runtime, options, ladder, quant, why, policy, estimate_speed)
        report = replace(report, choices=choices, choice_why=why, policy=policy)
    model_file = loaded.path if loaded is not None and loaded.path else f"{model.id}-{quant.id}.gguf"
    report = replace(report, launch=launch_for(rules.launch, runtime, model_file=model_file,
                                                 placement=placement, placer=placer, options=options, ctx=ctx,
                                                 n_layers=model.layers,
                                                 model_ref=model_file if loaded is not None else None,
                                                 checkpoints=rules.checkpoints,
                                                 hf_gguf=(loaded.hf_repo, loaded.hf_file) if loaded is not None else None,
                                                 local=loaded))
    if options.workload != "inference":
        from advisor.engine.training import estimate_training, training_verdict

        training = estimate_training(catalog, rig, model, options)
        report = replace(report, training=training,
                         interconnect=training_verdict(catalog, rig, model, options, training))
    return replace(report, findings=run_rules(report, catalog))


def split_choices(placer: Placer, ctx: int, placement: Placement, speed, inter) -> tuple:
    """The answer under layer split and under the runtime's tensor split (llama.cpp -sm layer vs -sm tensor),
    each with its speeds, the share of the step on the links and what NVLink would change: the split choice
    the SPL002 finding states."""
    from advisor.engine.result import SplitChoice

    out = []
    for split in ("layer", "tensor"):
        if split == placer.split:
            p, sp, ic = placement, speed, inter
        else:
            other = Placer(placer.model, placer.quant, placer.runtime, placer.rig,
                           replace(placer.options, split=split), placer.rules, layout=placer.layout)
            p = other.at(ctx)
            sp = estimate_speed(p, placer.rig, placer.model, placer.quant, placer.runtime, placer.rules,
                                other.options, ctx)
            ic = interconnect_verdict(p, placer.rig, placer.model, placer.quant, placer.runtime, placer.rules,
                                      other.options, ctx)
        out.append(SplitChoice(split, p.runs, p.fits, sp.decode_tokens_per_s, sp.prefill_tokens_per_s,
                               ic.link_time_share, ic.nvlink_speedup, p.problem))
    return tuple(out)


def _refused_report(catalog: Catalog, rig: Rig, model: ModelSpec, quant: QuantSpec, chosen: bool,
                    runtime: RuntimeSpec, options: Options, ctx: int, why: str, source: str) -> Report:
    """The answer when the runtime cannot run this model on these GPUs at all (CMP001 says why)."""
    rules = catalog.rules
    placement = Placement("none", (), Placer(model, quant, runtime, rig, options, rules)._host(0, 0, 0),
                          fits=False, runs=False, gpu_layers=0, problem=why)
    speed = estimate_speed(placement, rig, model, quant, runtime, rules, options, ctx)
    inter = Interconnect("not_applicable", 0.0, 1.0, "does not run on this rig, so the link does not matter")
    report = Report(model=model, quant=quant, quant_chosen=chosen, runtime=runtime,
                    split=options.split or runtime.default_split, context_tokens=ctx, options=options, rig=rig,
                    placement=placement, kv_cache_bytes=0, max_context_tokens=0, speed=speed, interconnect=inter,
                    findings=(), model_source=source, refusal=why)
    return replace(report, findings=run_rules(report, catalog))


def decode_seconds(placement: Placement, rig: Rig, model: ModelSpec, quant: QuantSpec, runtime: RuntimeSpec,
                   rules: Rulebook, options: Options, ctx: int, depth: int, streams: int = 1) -> float:
    """Seconds per decode step of `streams` sequences, each with `depth` tokens already in its KV cache.

    The placement holds KV cache for `options.concurrency` sequences of `ctx` tokens; a step reads the
    filled part of the active streams' share, wherever it sits (GPUs or system RAM)."""
    per_stream = mem.kv_cells(ctx, runtime, rules)
    held = 1 if runtime.kv_pool == "paged" else options.concurrency  # sequences whose KV the placement holds
    share = streams * min(depth, per_stream) / (per_stream * held)
    kv = [int(d.kv_cache_bytes * share) for d in placement.devices]
    host_kv = int(placement.host.kv_cache_bytes * share)
    step = spd.decode_step(placement, rig, model, quant, runtime, rules, kv_depth_bytes=kv, streams=streams,
                           host_kv_bytes=host_kv)
    lt = link_times(placement, rig, model, runtime, rules, options.prompt_tokens, streams)
    return step.total_s + (lt.decode_s if lt else 0.0)


def prefill_seconds(placement: Placement, rig: Rig, model: ModelSpec, quant: QuantSpec, runtime: RuntimeSpec,
                    rules: Rulebook, prompt_tokens: int) -> float:
    pre = spd.prefill_time(placement, rig, model, quant, runtime, rules, prompt_tokens)
    lt = link_times(placement, rig, model, runtime, rules, prompt_tokens, 1)
    return pre.total_s + (lt.prefill_s if lt else 0.0)


def estimate_speed(placement: Placement, rig: Rig, model: ModelSpec, quant: QuantSpec, runtime: RuntimeSpec,
                   rules: Rulebook, options: Options, ctx: int) -> Speed:
    band = spd.error_band(spd.answer_kind(placement, rig, model, runtime), rules)
    if not placement.runs:
        return Speed(None, None, None, None, None, basis="does not run on this rig", error_band=band)
    if not rig.speed_known:
        return Speed(None, None, None, None, None, error_band=band,
                     basis="unknown GPU (not in the catalog): its bandwidth and throughput are not known")
    args = (placement, rig, model, quant, runtime, rules)
    decode = 1 / decode_seconds(*args, options, ctx, depth=0)
    at_ctx = 1 / decode_seconds(*args, options, ctx, depth=ctx)
    prefill = options.prompt_tokens / prefill_seconds(*args, options.prompt_tokens)
    agg = per_stream = None
    if options.concurrency > 1:
        # every stream reads its own KV cache; on average each is half-way through its context
        step_t = decode_seconds(*args, options, ctx, depth=ctx // 2, streams=options.concurrency)
        agg = options.concurrency / step_t
        per_stream = 1 / step_t
    where = {
        "single_gpu": "one GPU", "layer_split": "GPUs in turn (layer split)",
        "tensor_parallel": "GPUs in parallel (tensor parallel)", "cpu_offload": "GPUs plus system RAM",
        "moe_offload": "GPUs plus experts in system RAM", "cpu_only": "system RAM",
    }.get(placement.strategy, placement.strategy)
    basis = (f"decode: bytes read per token over the memory bandwidth of {where} at the achievable fraction "
             f"fitted to public llama-bench results; prefill: 2 x active parameters FLOPs per token over dense "
             f"FP16 tensor throughput at the fitted fraction")
    if not runtime.speed_fitted:
        basis += f" (fitted on llama.cpp; {runtime.name} is assumed to reach the same fractions)"
    if placement.host.weights_bytes and placement.strategy not in ("layer_split", "tensor_parallel"):
        basis += (f"; the part in system RAM is read at {rig.ram_bandwidth_gb_s:g} GB/s "
                  f"({rig.ram_bandwidth_basis or 'given'}) at the rulebook's CPU fraction")
    return Speed(round(decode, 1), round(prefill, 1), round(at_ctx, 1),
                 round(agg, 1) if agg else None, round(per_stream, 1) if per_stream else None,
                 basis=basis, error_band=band)


def interconnect_verdict(placement: Placement, rig: Rig, model: ModelSpec, quant: QuantSpec,
                         runtime: RuntimeSpec, rules: Rulebook, options: Options, ctx: int) -> Interconnect:
    used = [d for d in placement.devices if d.total_bytes > 0]
    if len(used) < 2:
        why = "one GPU: nothing crosses a GPU-to-GPU link" if rig.gpus else "no GPU: nothing crosses a GPU link"
        return Interconnect("not_applicable", 0.0, 1.0, why)
    if not placement.runs:
        return Interconnect("not_applicable", 0.0, 1.0, "does not run on this rig, so the link does not matter")
    if not rig.speed_known:
        return Interconnect("not_applicable", 0.0, 1.0,
                            "a GPU is not in the catalog: without its bandwidth and throughput the link's share "
                            "of the time cannot be estimated")
    streams = options.concurrency
    now = link_times(placement, rig, model, runtime, rules, options.prompt_tokens, streams)
    nv = link_times(placement, rig, model, runtime, rules, options.prompt_tokens, streams, mode="nvlink")
    pcie = link_times(placement, rig, model, runtime, rules, options.prompt_tokens, streams, mode="pcie")
    assert now is not None and nv is not None and pcie is not None
    step = spd.decode_step(placement, rig, model, quant, runtime, rules, streams=streams)
    pre = spd.prefill_time(placement, rig, model, quant, runtime, rules, options.prompt_tokens)
    # The question is always "PCIe or NVLink": a rig that has NVLink is judged by what it would lose.
    dec_pcie, dec_nv = step.total_s + pcie.decode_s, step.total_s + nv.decode_s
    pre_pcie, pre_nv = pre.total_s + pcie.prefill_s, pre.total_s + nv.prefill_s
    dec_speedup, pre_speedup = dec_pcie / dec_nv, pre_pcie / pre_nv
    dec_now, pre_now = step.total_s + now.decode_s, pre.total_s + now.prefill_s
    long_prompt = options.prompt_tokens >= int(rules.interconnect.verdict.long_prompt_tokens)
    phase = "decode"
    speedup, share = dec_speedup, now.decode_s / dec_now
    if (long_prompt or streams > 1) and pre_speedup > speedup:
        phase, speedup, share = "prefill", pre_speedup, now.prefill_s / pre_now
    v = rules.interconnect.verdict
    if speedup >= float(v.needed_above):
        verdict = "needed"
    elif speedup >= float(v.helps_above):
        verdict = "helps"
    else:
        verdict = "not_needed"
    if placement.strategy == "tensor_parallel" and placement.split_kind == "rows":
        what = f"row split synchronises {split_matrices(model, rules)} split matrix multiplies per token"
    elif placement.strategy == "tensor_parallel":
        what = "tensor parallel does 2 all-reduces per layer per token"
    else:
        what = f"layer split moves {model.hidden_size * 4 * streams / 1024:.0f} KiB per token between your GPUs"
    if now.link.kind == "network":
        summary = (f"{what}: {share:.1%} of the {phase} time on {now.link.label}; NVLink cannot join machines, "
                   f"so the split between them is what matters (see NVL005).")
    elif now.link.kind == "nvlink":
        summary = (f"{what}: {share:.1%} of the {phase} time on {now.link.label}; over PCIe ({pcie.link.label}) "
                   f"{phase} would be {speedup:.2f}x slower")
        summary += ", so the bridge pays." if verdict != "not_needed" else ", so the bridge changes little."
    else:
        summary = (f"{what}: {share:.1%} of the {phase} time on {now.link.label}; "
                   f"NVLink would make {phase} {speedup:.2f}x as fast")
        summary += "." if verdict != "not_needed" else ", so it would change little."
    details = (
        ("link", now.link.label),
        ("decode link time per token", f"{now.decode_s * 1e3:.3f} ms of {dec_now * 1e3:.2f} ms"),
        ("prefill link time", f"{now.prefill_s * 1e3:.1f} ms of {pre_now * 1e3:.1f} ms for {options.prompt_tokens} tokens"),
        ("decode speedup, NVLink over PCIe", f"{dec_speedup:.3f}x"),
        ("prefill speedup, NVLink over PCIe", f"{pre_speedup:.3f}x"),
    )
    return Interconnect(verdict, round(share, 4), round(max(speedup, 1.0), 3), summary, details)
