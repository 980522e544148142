"""`advisor fit`: every catalog model on the rig, ranked."""

from __future__ import annotations

import argparse

from advisor.cli import EXIT_NO, EXIT_YES, _emit, _emit_json, _fmt, _say, options_from, rig_from_args


def cmd_fit(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.engine.rank import rank_models

    catalog = load_catalog()
    rig = rig_from_args(args, catalog)
    models = [m for m in catalog.models.values()
              if (not args.family or m.family.lower() == args.family.lower())
              and (not args.moe or m.is_moe)
              and (not args.max_params or m.params_total <= args.max_params * 1e9)]
    ranked = rank_models(catalog, rig, options_from(args), models)
    if args.min_tps:
        ranked = [r for r in ranked if (r.report.speed.decode_tokens_per_s or 0) >= args.min_tps]
    cpu = rig.is_cpu_only
    usable = (lambda r: r.report.runs) if cpu else (lambda r: r.report.fits)
    shown = ranked if args.all or _fmt(args) == "json" else [r for r in ranked if usable(r)]
    if _fmt(args) == "json":
        for warning in rig.warnings:  # the JSON array is the contract; the warnings go beside it
            _say(f"advisor: warning: {warning}")
        _emit_json([{"model": r.model.id, "quant": r.report.quant.id if r.report.fits else None,
                     "fits": r.report.fits, "runs": r.report.runs,
                     "decode_tokens_per_s": r.report.speed.decode_tokens_per_s,
                     "max_context_tokens": r.report.max_context_tokens, "note": r.note} for r in shown])
    else:
        ctx = ranked[0].report.context_tokens if ranked else 0
        rig_words = ", ".join(g.name or g.spec.name for g in rig.gpus) or "CPU only"
        lines = [f"What runs on {rig_words} at {ctx:,} tokens of context ({args.runtime}), best first:"
                 if not cpu else f"No GPU: what runs on the CPU from system RAM at {ctx:,} tokens of context, "
                                 f"biggest first among those at reading speed (describe GPUs with --gpu to plan for them):", ""]
        lines.append(f"  {'model':<30} {'quant':<8} {'decode':>10} {'max ctx':>9}  note")
        md = _fmt(args) == "markdown"
        if md:
            lines = lines[:2] + ["| model | quant | decode tok/s | max ctx | note |", "|---|---|---|---|---|"]
        for r in shown:
            tps = f"{r.report.speed.decode_tokens_per_s:.1f}" if r.report.speed.decode_tokens_per_s else "—"
            quant = r.report.quant.id if usable(r) else "—"
            if md:
                lines.append(f"| {r.model.id} | {quant} | {tps} | {r.report.max_context_tokens:,} | {r.note} |")
            else:
                lines.append(f"  {r.model.id:<30} {quant:<8} {tps:>10} {r.report.max_context_tokens:>9,}  {r.note}")
        lines += [f"warning: {w}" for w in rig.warnings]
        hidden = len(ranked) - len(shown)
        if hidden:
            where = "in system RAM" if cpu else "fully on the GPUs"
            lines += ["", f"{hidden} more model(s) do not fit {where} (--all lists them)."]
        _emit("\n".join(lines))
    return EXIT_YES if any(usable(r) for r in ranked) else EXIT_NO
