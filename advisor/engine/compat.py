"""Runtime x hardware x model compatibility, read from data: a runtime's lowest compute capability, its
quantization kernels' lowest compute capability, its back-ends and AMD GPU targets (rules/runtimes.toml), each
GPU's compute capability, back-end and gfx target (hardware_db), and the model families a runtime does not
implement. A refusal names the rule and what runs instead."""

from __future__ import annotations

from fnmatch import fnmatchcase

from advisor.catalog.types import Catalog, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine.rig import Rig


def _lowest_cc(rig: Rig) -> tuple[float, str] | None:
    known = [(g.spec.compute_capability, g.spec.name) for g in rig.gpus if g.spec.compute_capability is not None]
    return min(known) if known else None


def _missing_backends(runtime: RuntimeSpec, rig: Rig) -> list[str]:
    """The rig's GPU back-ends the runtime has no kernels for (rules/runtimes.toml `backends`)."""
    if not runtime.backends:
        return []
    return sorted({g.spec.backend for g in rig.gpus if g.spec.backend} - set(runtime.backends))


def _missing_targets(runtime: RuntimeSpec, rig: Rig) -> list[tuple[str, str]]:
    """(gfx target, GPU name) of the rig's AMD GPUs whose target the runtime has no kernels for
    (rules/runtimes.toml `gfx_targets` against hardware_db `gfx_target`); a GPU of unknown target passes."""
    if not runtime.gfx_targets:
        return []
    return sorted({(g.spec.gfx_target, g.spec.name) for g in rig.gpus
                   if g.spec.gfx_target and g.spec.gfx_target not in runtime.gfx_targets})


def runtime_runs_here(runtime: RuntimeSpec, rig: Rig) -> bool:
    low = _lowest_cc(rig)
    if runtime.max_gpus and len(rig.gpus) > runtime.max_gpus:
        return False
    if rig.nodes > 1 and runtime.multinode.split == "none":  # one machine only (rules/runtimes.toml multinode)
        return False
    if _missing_backends(runtime, rig) or _missing_targets(runtime, rig):
        return False
    return not (low and runtime.min_compute_capability and low[0] < runtime.min_compute_capability)


def quant_runs_here(runtime: RuntimeSpec, quant: QuantSpec, rig: Rig) -> bool:
    low = _lowest_cc(rig)
    need = runtime.quant_min_cc.get(quant.id, 0.0)
    return not (low and need and low[0] < need)


def _model_gap(runtime: RuntimeSpec, model: ModelSpec) -> str:
    """Why the runtime lacks code for this model (rules/runtimes.toml `unsupported_models`, patterns over the
    model's id; or, for a model read from a config.json, its class missing from the runtime's `architectures`),
    or "" when it has it."""
    why = next((why for pattern, why in runtime.unsupported_models.items()
                if fnmatchcase(model.id.lower(), pattern)), "")
    if not why and runtime.architectures and model.architecture and model.architecture not in runtime.architectures:
        why = f"{model.architecture} is not among the architectures it implements ({runtime.architectures_basis})"
    return why


def implements(runtime: RuntimeSpec, model: ModelSpec) -> bool:
    """The runtime has code for this model: its family (`unsupported_families`) and the model itself."""
    return model.family not in runtime.unsupported_families and not _model_gap(runtime, model)


def _accepts(runtime: RuntimeSpec, rig: Rig, model: ModelSpec, quant: QuantSpec | None) -> bool:
    """This runtime would take the request: it runs on these GPUs, implements the model and, when a quantization
    is asked for, loads it and has kernels for it here."""
    vendors = {g.spec.vendor for g in rig.gpus}
    if not (runtime_runs_here(runtime, rig) and vendors <= set(runtime.vendors) and implements(runtime, model)):
        return False
    if quant is None:
        return True
    backends = {g.spec.backend for g in rig.gpus if g.spec.backend}
    return (runtime.loads(quant) and quant_runs_here(runtime, quant, rig)
            and not (quant.id in runtime.quant_backends and backends - set(runtime.quant_backends[quant.id])))


def _others(catalog: Catalog, runtime: RuntimeSpec, rig: Rig, model: ModelSpec,
            quant: QuantSpec | None = None) -> list[str]:
    """Runtimes other than this one that run this model on this rig's GPUs (at this quantization, if given)."""
    return [r.id for r in catalog.runtimes.values() if r != runtime and _accepts(r, rig, model, quant)]


def refusal(catalog: Catalog, runtime: RuntimeSpec, rig: Rig, model: ModelSpec, quant: QuantSpec | None,
            asked: bool = False) -> str:
    """Why this runtime cannot run this model (at this quantization) on this rig, or "" when nothing forbids it.
    `asked`: the quantization is the user's (--quant, or the model file's own), so what runs instead must load it."""
    want = quant if asked else None

    def instead(lead: str, sep: str = " or ") -> str:
        """What runs instead, after `lead`: the runtimes that take the request as asked (the quantization too,
        when one was asked for), else those that run the model at another quantization, saying so."""
        if want is not None:
            same = _others(catalog, runtime, rig, model, want)
            if same:
                return lead + sep.join(same)
            return (f"no other runtime runs {want.id} here; at another quantization {lead.lstrip('; ')}"
                    + sep.join(_others(catalog, runtime, rig, model)))
        return lead + sep.join(_others(catalog, runtime, rig, model))

    if quant is not None and not runtime.loads(quant):  # its format, but type ids it does not have
        others = [r.id for r in catalog.runtimes.values() if r != runtime and r.loads(quant)]
        missing = ", ".join(sorted(set(quant.ggml_tables) - set(runtime.ggml_tables))) or ", ".join(quant.runtimes)
        return (f"{runtime.name} has no {quant.id} tensor types (ggml type ids only {missing} defines); "
                f"run it with --runtime {' or '.join(others) or ', '.join(quant.runtimes)}")
    if model.family in runtime.unsupported_families:
        return (f"{runtime.name} does not implement {model.family} models ({runtime.families_basis}); "
                + instead("runtimes that do: ", ", "))
    gap = _model_gap(runtime, model)
    if gap:
        return f"{runtime.name} does not implement {model.name} ({gap}); " + instead("runtimes that do: ", ", ")
    low = _lowest_cc(rig)
    missing = _missing_backends(runtime, rig)
    if missing:
        return (f"{runtime.name} has no {', '.join(missing)} back-end (it runs on {', '.join(runtime.backends)}: "
                f"{runtime.backends_basis}); " + instead("on this GPU use --runtime "))
    targets = _missing_targets(runtime, rig)
    if targets:
        return (f"{runtime.name} has no kernels for {' or '.join(f'{name} ({t})' for t, name in targets)}: its AMD "
                f"GPU targets are {', '.join(runtime.gfx_targets)} ({runtime.gfx_targets_basis}); "
                + instead("on this GPU use --runtime "))
    backends = {g.spec.backend for g in rig.gpus if g.spec.backend}
    if quant is not None and quant.id in runtime.quant_backends and backends - set(runtime.quant_backends[quant.id]):
        lacking = sorted(backends - set(runtime.quant_backends[quant.id]))
        return (f"{runtime.name} has no {quant.id} kernels for {', '.join(lacking)} ({runtime.quant_basis}); "
                f"its 16-bit and other quantized paths run there; " + instead("other runtimes: ", ", "))
    if runtime.max_gpus and len(rig.gpus) > runtime.max_gpus:
        return (f"{runtime.name} runs on {runtime.max_gpus} GPU{'s' if runtime.max_gpus > 1 else ''} as the advisor "
                f"models it and this rig has {len(rig.gpus)} ({runtime.hardware_basis}); describe one GPU with --gpu, "
                f"or " + instead("use --runtime "))
    if rig.nodes > 1 and runtime.multinode.split == "none":
        return (f"{runtime.name} runs on one machine and this rig's GPUs sit in {rig.nodes} machines; "
                + instead("across machines use --runtime "))
    if low and runtime.min_compute_capability and low[0] < runtime.min_compute_capability:
        return (f"{runtime.name} needs CUDA compute capability {runtime.min_compute_capability:g} or higher and "
                f"{low[1]} has {low[0]:g} ({runtime.hardware_basis}); " + instead("on this GPU use --runtime "))
    if quant is not None and low:
        need = runtime.quant_min_cc.get(quant.id, 0.0)
        if need and low[0] < need:
            ok = [q for q, cc in runtime.quant_min_cc.items() if cc <= low[0]]
            alt = f"its kernels for {', '.join(ok)} run there" if ok else "none of its quantized kernels runs there"
            return (f"{runtime.name}'s {quant.id} kernels need compute capability {need:g} and {low[1]} has "
                    f"{low[0]:g} ({runtime.quant_basis}); {alt}; " + instead("other runtimes: ", ", "))
    return ""
