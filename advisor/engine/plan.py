"""`plan`: the cheapest rigs that run a model at a target speed, NVLink or not.

Candidates: 1 to 8 of each priced catalog GPU (all alike), each unified-memory machine, each of
those added to the GPUs the user already owns, with and without NVLink where the cards have it.
Each candidate is placed and timed by the same engine as `check`; those that fit fully and reach
the target decode speed are kept, cheapest first. An NVLink option is kept only when it reaches
the target that the same GPUs without NVLink miss, or is cheaper.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.record import Record, record
from advisor.catalog.types import GIB, Catalog, GpuSpec, ModelSpec, QuantSpec
from advisor.engine.check import check_options, estimate_speed, fallback_quant, resolve_quant
from advisor.engine.options import DEFAULT_CTX, Options
from advisor.engine.compat import refusal
from advisor.engine.placement import Placer
from advisor.engine.rig import MAX_RIG_GPUS, rig_of

COUNTS = (1, 2, 3, 4, 6, 8)
MAX_PLAN_GPUS = 16
"""Candidate rigs hold at most this many GPUs (two 8-GPU servers); what is owned counts too."""


@record
class PlanOption(Record):
    gpus: tuple[tuple[int, str], ...]
    """(count, id) of every GPU in the rig."""
    new_gpus: tuple[tuple[int, str], ...]
    """(count, id) of what must be bought."""
    price_usd: float
    nvlink: bool
    decode_tokens_per_s: float
    prefill_tokens_per_s: float
    headroom_bytes: int
    """Free memory on the fullest GPU at the target context."""
    power_w: float
    """Board power of all GPUs (an upper bound for decode)."""
    usd_per_million_tokens: float
    """Electricity per million generated tokens at board power."""
    strategy: str
    why: str


@record
class Plan(Record):
    model: ModelSpec
    quant: QuantSpec
    context_tokens: int
    min_tps: float | None
    budget_usd: float | None
    options: tuple[PlanOption, ...]
    evaluated: int
    """How many candidate rigs were placed and timed."""
    nvlink_note: str
    kwh_usd: float
    kwh_basis: str
    unpriced: tuple[str, ...]
    """GPUs left out because the catalog has no price for them (or only a used one, without --used)."""
    notes: tuple[str, ...]
    """What would buy nothing here, in words (a second GPU, a data-centre card)."""
    used: bool
    """Used-market prices were allowed."""


def make_plan(catalog: Catalog, model: ModelSpec, options: Options, *, min_tps: float | None = None,
              budget: float | None = None, have: list[tuple[int, str]] | None = None,
              prices: dict[str, float] | None = None, ram_bytes: int = 64 * GIB, kwh_usd: float | None = None,
              top: int = 5, used: bool = False) -> Plan:
    runtime = check_options(catalog, options)
    quant = resolve_quant(catalog, options.quant) if options.quant else fallback_quant(catalog, runtime, model)
    if not runtime.loads(quant):
        from advisor.errors import AdvisorError

        raise AdvisorError(f"{runtime.name} does not load {quant.id}", f"runtimes for {quant.id}: {', '.join(quant.runtimes)}")
    ctx = min(options.ctx or DEFAULT_CTX, model.max_context)
    opts = replace(options, quant=quant.id, ctx=ctx)
    prices = prices or {}
    owned = [(n, catalog.gpus[g]) for n, g in (have or [])]
    if sum(n for n, _ in owned) > MAX_RIG_GPUS:
        from advisor.errors import AdvisorError

        raise AdvisorError(f"{sum(n for n, _ in owned)} owned GPUs is more than one rig holds",
                           f"use at most {MAX_RIG_GPUS} with --have and --rig together")
    power_rules = catalog.rules.plan
    kwh = kwh_usd if kwh_usd is not None else float(power_rules.electricity_usd_per_kwh)
    bridge = float(power_rules.nvlink_bridge_usd)

    def price(spec: GpuSpec) -> float | None:
        """The user's price, else the catalog's; used-market prices only when asked for (--used)."""
        if spec.id in prices:
            return prices[spec.id]
        if spec.price is None or (spec.price.condition == "used" and not used):
            return None
        return spec.price.usd

    buyable = [g for g in catalog.gpus.values() if price(g) is not None]
    unpriced = tuple(sorted(g.id for g in catalog.gpus.values() if price(g) is None))
    weights_floor = model.params_total * quant.bits_per_weight / 8 * 0.9
    candidates: list[tuple[list[tuple[int, GpuSpec]], list[tuple[int, GpuSpec]], bool]] = []
    owned_unified = any(s.unified_memory for _, s in owned)
    if owned:  # what the user has, as it is: costs nothing
        candidates.append((owned, [], False))
    for g in buyable:
        counts = (1,) if g.unified_memory else COUNTS
        for n in counts:
            if owned and (g.unified_memory or owned_unified or any(s.vendor != g.vendor for _, s in owned)):
                continue  # a unified machine is a whole computer; one runtime drives one vendor's GPUs
            parts = owned + [(n, g)]
            if sum(k for k, _ in parts) > MAX_PLAN_GPUS:
                continue
            cap = sum(k * s.vram_bytes for k, s in parts)
            if cap < weights_floor or (budget is not None and n * price(g) > budget):
                continue
            candidates.append((parts, [(n, g)], False))
            all_specs = [s for _, s in parts]
            if sum(k for k, _ in parts) > 1 and all(s.nvlink for s in all_specs) and \
                    all(s.nvlink.topology == "bridge" for s in all_specs) and len({s.id for s in all_specs}) == 1:
                candidates.append((parts, [(n, g)], True))
    results: list[PlanOption] = []
    evaluated = 0
    plain_best: dict[tuple, PlanOption] = {}
    for parts, new, nvlink in candidates:
        rig = rig_of([s for n, s in parts for _ in range(n)], catalog.rules.memory.host, ram_bytes=ram_bytes,
                     nvlink=nvlink, source="plan")
        if {s.vendor for _, s in parts} - set(runtime.vendors) or refusal(catalog, runtime, rig, model, quant):
            continue  # the runtime does not run there (rules/runtimes.toml): never proposed
        placer = Placer(model, quant, runtime, rig, opts, catalog.rules)
        evaluated += 1
        placement = placer.at(ctx)
        if not placement.fits:
            continue
        speed = estimate_speed(placement, rig, model, quant, runtime, catalog.rules, opts, ctx)
        tps = speed.decode_tokens_per_s or 0.0
        if min_tps is not None and tps < min_tps:
            continue
        cost = sum(n * price(s) for n, s in new) + (bridge * (sum(n for n, _ in parts) // 2) if nvlink else 0.0)
        if budget is not None and cost > budget:
            continue
        power = sum(n * s.power_w for n, s in parts)
        per_m = power / 1000 / (tps * 3600) * 1e6 * kwh if tps else float("inf")
        headroom = min(d.free_bytes for d in placement.devices) if placement.devices else 0
        label = " + ".join(f"{n}× {s.name}" for n, s in parts)
        why = (f"{label}: {placement.strategy.replace('_', ' ')}, {tps:.1f} tok/s decode, "
               f"{headroom / GIB:.1f} GiB to spare" + (", NVLink bridge" if nvlink else ""))
        opt = PlanOption(gpus=tuple((n, s.id) for n, s in parts), new_gpus=tuple((n, s.id) for n, s in new),
                         price_usd=round(cost, 2), nvlink=nvlink, decode_tokens_per_s=tps,
                         prefill_tokens_per_s=speed.prefill_tokens_per_s or 0.0, headroom_bytes=headroom,
                         power_w=power, usd_per_million_tokens=round(per_m, 2), strategy=placement.strategy, why=why)
        key = tuple((n, s.id) for n, s in parts)
        if not nvlink:
            plain_best[key] = opt
        results.append(opt)
    # NVLink options stay only where they beat the same GPUs without NVLink.
    kept, dropped_nvlink = [], 0
    for o in results:
        if o.nvlink:
            plain = plain_best.get(o.gpus)
            if plain is not None and plain.price_usd <= o.price_usd:
                dropped_nvlink += 1
                continue
        kept.append(o)
    kept.sort(key=lambda o: (o.price_usd, -o.decode_tokens_per_s))
    if any(o.nvlink for o in kept[:top]):
        note = "NVLink appears where it reaches the target that the same GPUs over PCIe miss."
    elif dropped_nvlink:
        note = (f"NVLink would buy nothing here: {dropped_nvlink} bridged option(s) reach the target no better "
                f"than the same GPUs over PCIe ({runtime.name}, {opts.split or runtime.default_split} split).")
    else:
        note = "No NVLink-capable option reaches the target; PCIe is what these rigs use."
    notes = []
    if kept:
        best = kept[0]
        owned_n = sum(n for n, _ in owned)
        if sum(n for n, _ in best.gpus) - owned_n == 1 and len(best.new_gpus) == 1:
            name = catalog.gpus[best.new_gpus[0][1]].name
            notes.append(f"{'One more GPU' if owned_n else 'One GPU'} is enough: another {name} would add memory, "
                         f"not single-stream speed (a layer split runs the GPUs in turn).")
        consumer = [o for o in kept if all(catalog.gpus[g].category != "datacenter" for _, g in o.new_gpus)]
        datacentre = [o for o in kept if any(catalog.gpus[g].category == "datacenter" for _, g in o.new_gpus)]
        if consumer and datacentre and datacentre[0].price_usd > consumer[0].price_usd:
            notes.append(f"A data-centre card buys nothing here: the cheapest that reaches the target costs "
                         f"${datacentre[0].price_usd:,.0f}, against ${consumer[0].price_usd:,.0f} for "
                         f"{', '.join(f'{n}x {g}' for n, g in consumer[0].new_gpus)}.")
    return Plan(model=model, quant=quant, context_tokens=ctx, min_tps=min_tps, budget_usd=budget, notes=tuple(notes),
                options=tuple(kept[:top]), evaluated=evaluated, nvlink_note=note, kwh_usd=kwh,
                kwh_basis=str(power_rules.electricity_basis) if kwh_usd is None else "given with --kwh-price",
                unpriced=unpriced, used=used)
