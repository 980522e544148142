"""`fit`: every catalog model on one rig, with the best quantization that fits, ranked.

Ranking is what a self-hoster gets: first whether it fits fully on the GPUs, then the quality
that fits: a more capable model at a good quantization beats a lesser one at a higher precision (a
32B at Q4_K_M over an 8B at Q8_0), but not once the quantization's measured loss turns steep (KL
divergence over the rulebook's threshold, below ~Q3); capability is the model's effective size, its
parameters scaled by its release month (rules/quality.toml [rank]: capability per parameter doubles
every ~3.5 months), so a 2026 model outranks a bigger 2023 one; then decode speed. `rank_key` says it in words.
"""

from __future__ import annotations

import re
from dataclasses import replace

from advisor.record import Record, record
from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import GIB, Catalog, ModelSpec
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.strategies import words_of
from advisor.engine.result import Report
from advisor.engine.rig import Rig


@record
class Ranked(Record):
    model: ModelSpec
    report: Report
    tier: int
    """0 near-lossless, 1 good, 2 usable, 3 steep loss, 4 does not fit."""
    note: str


TIER_WORDS = ("near-lossless", "good", "usable", "steep quality loss", "does not fit on the GPUs")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def _month_index(text: str) -> int | None:
    m = _MONTH.match(text or "")
    return int(m.group(1)) * 12 + int(m.group(2)) - 1 if m and 1 <= int(m.group(2)) <= 12 else None


def effective_params(model: ModelSpec, rules: Rulebook) -> float:
    """Total parameters x 2^(months from the reference month to the release / the density doubling time)
    (rules/quality.toml [rank]); a model without a release month is taken as released at the reference."""
    r = rules.quality.rank
    ref = _month_index(r.reference_month)
    released = _month_index(model.released)
    months = (released - ref) if released is not None and ref is not None else 0
    return model.params_total * 2.0 ** (months / float(r.density_doubling_months))


def rank_key(rules: Rulebook, cpu_only: bool) -> str:
    """The ranking in words, for the output."""
    r = rules.quality.rank
    size = (f"effective size: parameters x 2^(months since {r.reference_month} / "
            f"{float(r.density_doubling_months):g}), as capability per parameter doubles every "
            f"{float(r.density_doubling_months):g} months (rules/quality.toml [rank])")
    first = "runs, decodes at reading speed" if cpu_only else "fits on the GPUs, then fits only tight"
    return f"ranked by: {first}, quality loss not steep, then {size}; then decode speed"


def quality_tier(report: Report, rules: Rulebook) -> int:
    if not report.fits:
        return 4
    kld = report.quant.kld
    if kld is None:
        return 1 if report.quant.bits_per_weight >= 4 else 3
    steep = float(rules.memory.selection.steep_kld)
    return 0 if kld < 0.01 else 1 if kld < 0.05 else 2 if kld < steep else 3


def rank_models(catalog: Catalog, rig: Rig, options: Options, models: list[ModelSpec] | None = None) -> list[Ranked]:
    out = []
    for m in models if models is not None else catalog.models.values():
        r = evaluate(catalog, rig, m, replace(options, quant=None), table=False)
        tier = quality_tier(r, catalog.rules)
        if r.fits:
            tps = f"{r.speed.decode_tokens_per_s:.0f} tok/s" if r.speed.decode_tokens_per_s else "speed unknown"
            kv = f" with {r.options.kv_type} KV" if r.options.kv_type != options.kv_type else ""
            room = f", up to {r.max_context_tokens:,} context" if r.max_context_tokens else ""
            note = f"{r.quant.id}{kv} ({TIER_WORDS[tier]}), {tps}{room}"
            note += f", {_released_words(m)}" + (_tight_words(r) if r.tight else "")
        elif r.runs and rig.is_cpu_only:
            note = f"{r.quant.id} on the CPU at {r.speed.decode_tokens_per_s or 0:.1f} tok/s, {_released_words(m)}"
        elif r.runs:
            note = f"does not fit on the GPUs; runs {words_of(r.placement.strategy).words} at " \
                   f"{r.speed.decode_tokens_per_s or 0:.1f} tok/s"
        else:
            note = f"does not run: {r.placement.problem or 'too large for this rig'}"
        out.append(Ranked(m, r, tier, note))
    if rig.is_cpu_only:
        # No GPU: the biggest model that still decodes at reading speed without a steep quality loss.
        reading = float(catalog.rules.memory.selection.reading_tokens_per_s)
        steep = float(catalog.rules.memory.selection.steep_kld)
        out.sort(key=lambda x: (not x.report.runs, (x.report.speed.decode_tokens_per_s or 0) < reading,
                                (x.report.quant.kld or 0) >= steep, -effective_params(x.model, catalog.rules),
                                -(x.report.speed.decode_tokens_per_s or 0)))
        return out
    out.sort(key=lambda x: (x.tier == 4, x.report.tight, x.tier == 3,
                            -effective_params(x.model, catalog.rules) if x.tier < 4 else 0,
                            -(x.report.speed.decode_tokens_per_s or 0)))
    return out


def _tight_words(r: Report) -> str:
    """FIT005's margin in a `fit` note: a model that fits only under the runtime's fit margin is said so."""
    d = r.tight_device
    return (f"; tight: {d.free_bytes / GIB:.1f} GiB free on {d.device}, under the "
            f"{r.fit_margin_bytes / GIB:.1f} GiB fit margin")


def _released_words(model: ModelSpec) -> str:
    known = _month_index(model.released) is not None
    return f"released {model.released}" if known else "release month not in the catalog"
