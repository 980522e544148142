"""`advisor plan MODEL`: the cheapest rigs that reach a target."""

from __future__ import annotations

import argparse

from advisor.commands.args import options_from, with_recorded_quant
from advisor.commands.output import EXIT_NO, EXIT_YES, emit_doc
from advisor.errors import AdvisorError


def cmd_plan(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.catalog.resolve import parse_gpu_spec, resolve
    from advisor.catalog.types import GIB
    from advisor.engine.plan import make_plan
    from advisor.probe.flags import parse_ram
    from advisor.numbers import parse_float
    from advisor.report.plan import plan_doc

    catalog = load_catalog()
    model = catalog.models[resolve(catalog.models, args.model, "model")]
    platforms = tuple(h.strip().lower() for h in args.have if h.strip().lower() in catalog.rules.plan.platform)
    have = [parse_gpu_spec(catalog.gpus, h) for h in args.have if h.strip().lower() not in platforms]
    rig_ram = None
    if args.rig is not None:
        from collections import Counter

        from advisor.probe.rigfile import load_rig

        rig = load_rig(catalog, args.rig)
        unknown = sorted({g.spec.id for g in rig.gpus if g.spec.id not in catalog.gpus})
        if unknown:
            raise AdvisorError(f"{args.rig}: {', '.join(unknown)} is not in the catalog, so plan cannot price "
                               f"around it", "use --have with catalog ids")
        have += [(n, gid) for gid, n in Counter(g.spec.id for g in rig.gpus).items()]
        rig_ram = rig.ram_bytes
    prices = {}
    for item in args.price:
        gid, eq, usd = item.partition("=")
        if not eq:
            raise AdvisorError(f"--price {item!r} is not ID=USD", "e.g. --price rtx-3090=700")
        prices[resolve(catalog.gpus, gid, "gpu")] = parse_float(usd, f"--price {gid}", 0, 1e7)
    ram = parse_ram(args.ram) if args.ram else (rig_ram or int(catalog.rules.plan.default_ram_gib * GIB))
    options = with_recorded_quant(catalog, args.model, model, options_from(args))
    plan = make_plan(catalog, model, options, min_tps=args.min_tps, budget=args.budget, have=have,
                     prices=prices, ram_bytes=ram, kwh_usd=args.kwh_price, top=args.top, used=args.used,
                     platforms=platforms)
    emit_doc(args, plan_doc(plan, have))
    return EXIT_YES if plan.options and not plan.over_budget else EXIT_NO
