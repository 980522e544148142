"""`fit`'s document: every model on one rig, ranked (`advisor.engine.rank.rank_models`)."""

from __future__ import annotations

from advisor.engine.rank import Ranked
from advisor.engine.rig import Rig
from advisor.report.document import Doc
from advisor.report.wrap import fill, table_lines


def usable(r: Ranked, cpu: bool) -> bool:
    """What the list shows by default: fits fully on the GPUs, or on a CPU-only rig, runs from RAM."""
    return r.report.runs if cpu else r.report.fits


def fit_doc(ranked: list[Ranked], rig: Rig, runtime: str, show_all: bool = False, width: int | None = None,
            key: str = "") -> Doc:
    """The ranked models as a document; `width` wraps the text's table to a terminal (its notes wrap in their
    column); `key` is the ranking in words (advisor.engine.rank.rank_key), said under the table."""
    cpu = rig.is_cpu_only
    shown = ranked if show_all else [r for r in ranked if usable(r, cpu)]
    data = [{"model": r.model.id, "quant": r.report.quant.id if r.report.fits else None,
             "fits": r.report.fits, "tight": r.report.tight, "runs": r.report.runs,
             "decode_tokens_per_s": r.report.speed.decode_tokens_per_s,
             "max_context_tokens": r.report.max_context_tokens, "note": r.note,
             "released": r.model.released or None} for r in ranked]
    ctx = ranked[0].report.context_tokens if ranked else 0
    rig_words = ", ".join(g.name or g.spec.name for g in rig.gpus) or "CPU only"
    intro = (f"What runs on {rig_words} at {ctx:,} tokens of context ({runtime}), best first:" if not cpu else
             f"No GPU: what runs on the CPU from system RAM at {ctx:,} tokens of context, most capable first "
             f"among those at reading speed (describe GPUs with --gpu to plan for them):")
    rows = [("model", "quant", "decode", "max ctx", "note")]
    md = [intro, "", "| model | quant | decode tok/s | max ctx | note |", "|---|---|---|---|---|"]
    for r in shown:
        tps = f"{r.report.speed.decode_tokens_per_s:.1f}" if r.report.speed.decode_tokens_per_s else "—"
        quant = r.report.quant.id if usable(r, cpu) else "—"
        rows.append((r.model.id, quant, tps, f"{r.report.max_context_tokens:,}", r.note))
        md.append(f"| {r.model.id} | {quant} | {tps} | {r.report.max_context_tokens:,} | {r.note} |")
    text = [intro, "", *table_lines(rows, (False, False, True, True, False), width)]
    if key:
        text, md = text + ["", *_wrapped(key, width)], md + ["", key]
    warnings = [f"warning: {w}" for w in rig.warnings] if rig.gpus else []  # MIG, a GPU lost: the answer carries it
    text, md = text + warnings, md + warnings
    hidden = len(ranked) - len(shown)
    if hidden:
        where = "in system RAM" if cpu else "fully on the GPUs"
        tail = ["", f"{hidden} more model(s) do not fit {where} (--all lists them)."]
        refused = [r for r in ranked if r not in shown and r.report.refusal]
        if refused:  # the runtime cannot run them here at all (CMP001): say why once
            tail.append(f"{len(refused)} of them {runtime} does not run on this rig; the first: "
                        f"{refused[0].report.refusal}.")
        text, md = text + tail, md + tail
    return Doc(title=f"advisor fit on {rig_words}", text="\n".join(text), markdown="\n".join(md), data=data)


def _wrapped(text: str, width: int | None) -> list[str]:
    return fill(text, width, 0) if width else [text]
