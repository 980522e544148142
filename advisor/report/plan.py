"""`plan`'s document: the cheapest rigs that reach a target (`advisor.engine.plan.make_plan`)."""

from __future__ import annotations

from advisor.engine.plan import Plan
from advisor.report.document import Doc, fenced


def spec_words(parts) -> list[str]:
    """(count, id) pairs as `--gpu` takes them: `2xrtx-3090`."""
    return [f"{n}x{g}" if n > 1 else g for n, g in parts]


def plan_doc(plan: Plan, have: list[tuple[int, str]]) -> Doc:
    model = plan.model
    data = {
        "target": {"model": model.id, "quant": plan.quant.id, "context_tokens": plan.context_tokens,
                   "min_tokens_per_s": plan.min_tps, "budget_usd": plan.budget_usd,
                   "have": spec_words(have), "used_prices": plan.used},
        "options": [{"gpus": spec_words(o.gpus), "new_gpus": spec_words(o.new_gpus), "price_usd": o.price_usd,
                     "decode_tokens_per_s": o.decode_tokens_per_s, "prefill_tokens_per_s": o.prefill_tokens_per_s,
                     "fits": o.fits, "nvlink": o.nvlink, "headroom_bytes": o.headroom_bytes, "power_w": o.power_w,
                     "usd_per_million_tokens": o.usd_per_million_tokens, "strategy": o.strategy, "why": o.why,
                     "platform": o.platform, "price_basis": list(o.price_basis), "host_build": o.host_build, "kv_cache_type": o.kv_cache_type,
                     "unpriced_parts": list(o.unpriced_parts), "cooling": o.cooling or None,
                     "over_budget": plan.over_budget}
                    for o in plan.options],
        "nvlink_note": plan.nvlink_note,
        "notes": list(plan.notes),
        "rigs_evaluated": plan.evaluated,
        "electricity": {"usd_per_kwh": plan.kwh_usd, "basis": plan.kwh_basis},
        "unpriced_gpus": list(plan.unpriced),
        "stale_list_prices": list(plan.stale_list_prices),
    }
    target = f"{model.name} at {plan.quant.id}, {plan.context_tokens:,} context"
    if plan.min_tps:
        target += f", at least {plan.min_tps:g} tok/s"
    if plan.budget_usd:
        target += f", within ${plan.budget_usd:,.0f}"
    lines = [f"Cheapest rigs for {target}" + (f" (you have: {', '.join(spec_words(have))})" if have else ""), ""]
    if not plan.options:
        lines.append("  nothing in the catalog reaches this target")
    elif plan.over_budget:
        lines.append(f"  nothing reaches it within ${plan.budget_usd:,.0f}; the cheapest rig that does:")
    for i, o in enumerate(plan.options, 1):
        buy = ", ".join(spec_words(o.new_gpus)) or "nothing (what you have)"
        unknown = "".join(f" + {part} (price not known)" for part in o.unpriced_parts)
        lines.append(f"  {i}. ${o.price_usd:,.0f}{unknown}  buy {buy}{' + NVLink bridge' if o.nvlink else ''}")
        lines.append(f"     {o.why}; prefill {o.prefill_tokens_per_s:,.0f} tok/s; {o.power_w:,.0f} W board power, "
                     f"${o.usd_per_million_tokens:.2f} electricity per million tokens")
        if o.price_basis:
            lines.append(f"     prices: {'; '.join(o.price_basis)}")
        if o.cooling:
            lines.append(f"     cooling and power: {o.cooling}")
    lines += ["", plan.nvlink_note, *plan.notes,
              f"{plan.evaluated} rigs evaluated; prices are dated (as of) new and recent list prices from hardware_db"
              + (" and used-market prices (--used, the default with --have)" if plan.used
                 else " (--used adds used-market prices)")
              + f"; electricity at ${plan.kwh_usd}/kWh ({plan.kwh_basis})."]
    unpriced = [g for g in plan.unpriced if g not in plan.stale_list_prices]
    if unpriced:
        lines.append(f"Left out for lack of a price: {', '.join(unpriced[:12])}"
                     + (" ..." if len(unpriced) > 12 else "") + " (--price ID=USD adds one).")
    title = f"advisor plan {model.id}"
    text = "\n".join(lines)
    return Doc(title=title, text=text, markdown=fenced(title, text), data=data)
