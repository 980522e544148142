"""Which quantizations a runtime tries for a model, and quant ids (or `exl2-<bpw>`/`exl3-<bpw>`) to QuantSpecs."""

from __future__ import annotations

import re

from advisor.catalog.resolve import resolve
from advisor.catalog.types import Catalog, ModelSpec, QuantSpec, RuntimeSpec
from advisor.errors import AdvisorError

_PARAMETRIC = re.compile(r"^([a-z0-9]+)-(\d+(?:\.\d+)?)$", re.IGNORECASE)


def resolve_quant(catalog: Catalog, text: str) -> QuantSpec:
    """A quant id (case-insensitive), or `<format>-<bpw>` of a format named by its bits per weight
    (rules/memory.toml [parametric]: `exl2-4.65`, `exl3-4.0`) synthesised from them."""
    m = _PARAMETRIC.match(text.strip())
    fmt = catalog.rules.memory.parametric.get(m.group(1).lower()) if m else None
    if fmt is not None:
        name, bpw = m.group(1).lower(), float(m.group(2))
        if not fmt.min_bpw <= bpw <= fmt.max_bpw:
            raise AdvisorError(f"--quant {text!r}: {name.upper()} bits per weight must be {fmt.min_bpw:g} to "
                               f"{fmt.max_bpw:g}")
        return QuantSpec(id=f"{name}-{m.group(2)}", format=name, bits_per_weight=bpw, bpw_basis=fmt.basis,
                         runtimes=tuple(r.id for r in catalog.runtimes.values() if name in r.formats),
                         kernel=name, linear_bits=bpw, embed_bits=16.0, head_bits=fmt.head_bits)
    by_lower = {q.lower(): q for q in catalog.quants}
    key = text.strip().lower()
    if key in by_lower:
        return catalog.quants[by_lower[key]]
    return catalog.quants[resolve(catalog.quants, text, "quant")]


def quant_ladder(catalog: Catalog, runtime: RuntimeSpec, model: ModelSpec | None = None) -> list[QuantSpec]:
    """The quantizations to try, best quality first. A model published in a low-bit format
    (`native_quant`) is tried in that format only: its 16-bit files only widen the small non-expert
    part, and GGUFs "below" it keep the experts in that format (so the ladder's bits per weight
    would describe files that do not exist)."""
    sel = catalog.rules.memory.selection
    ladder = [resolve_quant(catalog, q) for q in sel.ladder[runtime.ladder]]
    native = native_format(catalog, runtime, model)
    if native is not None:
        ladder = [native]
    return ladder


def fallback_quant(catalog: Catalog, runtime: RuntimeSpec, model: ModelSpec | None = None) -> QuantSpec:
    native = native_format(catalog, runtime, model)
    if native is not None:
        return native
    sel = catalog.rules.memory.selection
    return resolve_quant(catalog, sel.fallback[runtime.ladder])


def native_format(catalog: Catalog, runtime: RuntimeSpec, model: ModelSpec | None) -> QuantSpec | None:
    """The model's published low-bit format as `runtime` loads it (gpt-oss: MXFP4 GGUF for llama.cpp, the
    mxfp4-bf16 checkpoint for vLLM); None: none, or the runtime loads neither."""
    if model is None or not model.native_quant:
        return None
    q = resolve_quant(catalog, model.native_quant)
    if runtime.loads(q):
        return q
    # a runtime that loads the model's own repo (vLLM, SGLang): the format rules/checkpoints.toml lists it in
    for repo, c in catalog.rules.checkpoints.repo.items():
        if c.model == model.id and repo in model.aliases and runtime.loads(own := resolve_quant(catalog, c.quant)):
            return own
    return None
