"""Which quantizations a runtime tries for a model, and quant ids (or `exl2-<bpw>`/`exl3-<bpw>`) to QuantSpecs."""

from __future__ import annotations

import re

from advisor.catalog.resolve import resolve
from advisor.catalog.types import Catalog, ModelSpec, QuantSpec, RuntimeSpec
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
    if runtime.loads(q):
        return q
    # a runtime that loads the model's own repo (vLLM, SGLang): the format rules/checkpoints.toml lists it in
    for repo, c in catalog.rules.checkpoints.repo.items():
        if c.model == model.id and repo in model.aliases and runtime.loads(own := resolve_quant(catalog, c.quant)):
            return own
    return None
