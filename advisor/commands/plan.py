"""`advisor plan MODEL`: the cheapest rigs that reach a target."""

from __future__ import annotations

import argparse

from advisor.cli import EXIT_NO, EXIT_YES, _emit_json, _emit_text, _fmt, options_from
from advisor.errors import AdvisorError


def _spec_words(parts) -> list[str]:
    return [f"{n}x{g}" if n > 1 else g for n, g in parts]


def cmd_plan(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.catalog.resolve import parse_gpu_spec, resolve
    from advisor.catalog.types import GIB
    from advisor.engine.plan import make_plan
    from advisor.probe.flags import parse_ram
    from advisor.numbers import parse_float

    catalog = load_catalog()
    model = catalog.models[resolve(catalog.models, args.model, "model")]
    have = [parse_gpu_spec(catalog.gpus, h) for h in args.have]
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
    plan = make_plan(catalog, model, options_from(args), min_tps=args.min_tps, budget=args.budget, have=have,
                     prices=prices, ram_bytes=ram, kwh_usd=args.kwh_price, top=args.top, used=args.used)
    if _fmt(args) == "json":
        _emit_json({
            "target": {"model": model.id, "quant": plan.quant.id, "context_tokens": plan.context_tokens,
                       "min_tokens_per_s": plan.min_tps, "budget_usd": plan.budget_usd,
                       "have": _spec_words(have), "used_prices": plan.used},
            "options": [{"gpus": _spec_words(o.gpus), "new_gpus": _spec_words(o.new_gpus), "price_usd": o.price_usd,
                         "decode_tokens_per_s": o.decode_tokens_per_s, "prefill_tokens_per_s": o.prefill_tokens_per_s,
                         "fits": True, "nvlink": o.nvlink, "headroom_bytes": o.headroom_bytes, "power_w": o.power_w,
                         "usd_per_million_tokens": o.usd_per_million_tokens, "strategy": o.strategy, "why": o.why}
                        for o in plan.options],
            "nvlink_note": plan.nvlink_note,
            "notes": list(plan.notes),
            "rigs_evaluated": plan.evaluated,
            "electricity": {"usd_per_kwh": plan.kwh_usd, "basis": plan.kwh_basis},
            "unpriced_gpus": list(plan.unpriced),
        })
    else:
        target = f"{model.name} at {plan.quant.id}, {plan.context_tokens:,} context"
        if plan.min_tps:
            target += f", at least {plan.min_tps:g} tok/s"
        if plan.budget_usd:
            target += f", within ${plan.budget_usd:,.0f}"
        lines = [f"Cheapest rigs for {target}" + (f" (you have: {', '.join(_spec_words(have))})" if have else ""), ""]
        if not plan.options:
            lines.append("  nothing in the catalog reaches this target" + (" within the budget" if plan.budget_usd else ""))
        for i, o in enumerate(plan.options, 1):
            buy = ", ".join(_spec_words(o.new_gpus)) or "nothing (what you have)"
            lines.append(f"  {i}. ${o.price_usd:,.0f}  buy {buy}{' + NVLink bridge' if o.nvlink else ''}")
            lines.append(f"     {o.why}; prefill {o.prefill_tokens_per_s:,.0f} tok/s; {o.power_w:,.0f} W board power, "
                         f"${o.usd_per_million_tokens:.2f} electricity per million tokens")
        lines += ["", plan.nvlink_note, *plan.notes,
                  f"{plan.evaluated} rigs evaluated; prices are new/list prices from hardware_db"
                  + (" and used-market prices (--used)" if plan.used else " (--used adds used-market prices)")
                  + f"; electricity at ${plan.kwh_usd}/kWh ({plan.kwh_basis})."]
        if plan.unpriced:
            lines.append(f"Left out for lack of a price: {', '.join(plan.unpriced[:12])}"
                         + (" ..." if len(plan.unpriced) > 12 else "") + " (--price ID=USD adds one).")
        _emit_text(args, f"advisor plan {model.id}", "\n".join(lines))
    return EXIT_YES if plan.options else EXIT_NO
