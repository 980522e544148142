"""`advisor fit`: every catalog model on the rig, ranked."""

from __future__ import annotations

import argparse

from advisor.commands.args import options_from, rig_from_args
from advisor.commands.output import EXIT_NO, EXIT_YES, emit_doc, fmt_of, say


def cmd_fit(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.engine.rank import rank_key, rank_models
    from advisor.report.fit import fit_doc, usable

    catalog = load_catalog()
    rig = rig_from_args(args, catalog)
    models = [m for m in catalog.models.values()
              if (not args.family or m.family.lower() == args.family.lower())
              and (not args.moe or m.is_moe)
              and (not args.max_params or m.params_total <= args.max_params * 1e9)]
    ranked = rank_models(catalog, rig, options_from(args), models)
    if args.min_tps:
        ranked = [r for r in ranked if (r.report.speed.decode_tokens_per_s or 0) >= args.min_tps]
    if fmt_of(args) == "json":  # the JSON array is the contract: the rig's warnings go beside it
        for warning in rig.warnings if rig.gpus else ():
            say(f"advisor: warning: {warning}")
    from advisor.report.wrap import terminal_width

    emit_doc(args, fit_doc(ranked, rig, args.runtime, show_all=args.all, width=terminal_width(),
                           key=rank_key(catalog.rules, rig.is_cpu_only)))
    return EXIT_YES if any(usable(r, rig.is_cpu_only) for r in ranked) else EXIT_NO
