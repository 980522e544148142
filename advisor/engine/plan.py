"""`plan`: the cheapest rigs that run a model at a target speed, NVLink or not.

Candidates: each priced PCIe card in the counts a platform takes (rules/plan.toml [platform]: slots,
lanes and power supply), SXM/OAM modules only on their 4- or 8-GPU baseboards, each unified-memory
machine, for MoE models one card in the MoE host build (EPYC with 12 channels of RAM, experts in RAM),
each added to the GPUs the user already owns, with and without an NVLink bridge where one is sold.
Each candidate is placed and timed by the same engine as `check`; those that fit fully (the host
build: that run) and reach the target decode speed are kept, cheapest first. With a budget, the
best within it, or the cheapest above it when nothing is. An NVLink option is kept only when it
reaches the target that the same GPUs without NVLink miss, or is cheaper.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.record import Record, record
from advisor.catalog.rulebook import PlatformRules
from advisor.catalog.types import GIB, Catalog, GpuSpec, ModelSpec, QuantSpec
from advisor.engine.check import check_options, estimate_speed, fallback_quant, resolve_quant
from advisor.engine.options import DEFAULT_CTX, Options
from advisor.engine.compat import refusal
from advisor.engine.placement import Placer
from advisor.engine.rig import MAX_RIG_GPUS, rig_of

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
    fits: bool = True
    """Fully on the GPUs (False: an MoE host build with its experts in system RAM)."""
    platform: str = ""
    """What the GPUs sit in: a desktop, a workstation, a server baseboard, a unified machine, the MoE host."""
    price_basis: tuple[str, ...] = ()
    """Each priced part with its condition and date (and the host build's source)."""
    host_build: bool = False
    """On rules/plan.toml's MoE host build (its price included)."""
    kv_cache_type: str = "f16"
    """The KV cache type it was planned with (q8_0 where that is what fits, as `check` chooses)."""


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
    over_budget: bool = False
    """Nothing reached the target within the budget: the option shown is the cheapest above it."""


def platform_for(parts: list[tuple[int, GpuSpec]], platforms: dict[str, PlatformRules]) -> PlatformRules | None:
    """The smallest platform (rules/plan.toml [platform]) that takes these PCIe cards: every card's
    category allowed, the count within its slots, board power plus its own within its PSUs' share."""
    count = sum(n for n, _ in parts)
    power = sum(n * s.power_w for n, s in parts)
    for p in sorted(platforms.values(), key=lambda p: (p.max_gpus, p.psu_w)):
        if all(s.category in p.categories for _, s in parts) and count <= p.max_gpus and \
                power + float(p.base_w) <= float(p.psu_w) * float(p.load_fraction):
            return p
    return None


def price_words(spec: GpuSpec, usd: float, given: bool) -> str:
    if given:
        return f"{spec.name} ${usd:,.0f} (--price)"
    assert spec.price is not None
    return f"{spec.name} ${usd:,.0f} ({spec.price.condition}, {spec.price.date})"


def make_plan(catalog: Catalog, model: ModelSpec, options: Options, *, min_tps: float | None = None,
              budget: float | None = None, have: list[tuple[int, str]] | None = None,
              prices: dict[str, float] | None = None, ram_bytes: int = 64 * GIB, kwh_usd: float | None = None,
              top: int = 5, used: bool | None = None) -> Plan:
    runtime = check_options(catalog, options)
    quant = resolve_quant(catalog, options.quant) if options.quant else fallback_quant(catalog, runtime, model)
    if not runtime.loads(quant):
        from advisor.errors import AdvisorError

        raise AdvisorError(f"{runtime.name} does not load {quant.id}", f"runtimes for {quant.id}: {', '.join(quant.runtimes)}")
    ctx = min(options.ctx or DEFAULT_CTX, model.max_context)
    opts = replace(options, quant=quant.id, ctx=ctx)
    prices = prices or {}
    owned = [(n, catalog.gpus[g]) for n, g in (have or [])]
    if used is None:
        used = bool(owned)  # an owner shops the used market too; a first rig is priced new unless --used
    if sum(n for n, _ in owned) > MAX_RIG_GPUS:
        from advisor.errors import AdvisorError

        raise AdvisorError(f"{sum(n for n, _ in owned)} owned GPUs is more than one rig holds",
                           f"use at most {MAX_RIG_GPUS} with --have and --rig together")
    plan_rules = catalog.rules.plan
    kwh = kwh_usd if kwh_usd is not None else float(plan_rules.electricity_usd_per_kwh)
    bridge = float(plan_rules.nvlink_bridge_usd)
    host = plan_rules.moe_host

    def price(spec: GpuSpec) -> float | None:
        """The user's price, else the catalog's; used-market prices only when asked for (--used) or for owners."""
        if spec.id in prices:
            return prices[spec.id]
        if spec.price is None or (spec.price.condition == "used" and not used):
            return None
        return spec.price.usd

    buyable = [g for g in catalog.gpus.values() if price(g) is not None]
    unpriced = tuple(sorted(g.id for g in catalog.gpus.values() if price(g) is None))
    weights_floor = model.params_total * quant.bits_per_weight / 8 * 0.9
    # (all parts, what is bought, NVLink, on the MoE host build)
    candidates: list[tuple[list[tuple[int, GpuSpec]], list[tuple[int, GpuSpec]], bool, bool]] = []
    owned_unified = any(s.unified_memory for _, s in owned)
    owned_modules = any(s.sold_in for _, s in owned)
    beyond_platform = 0
    if owned:  # what the user has, as it is: costs nothing
        candidates.append((owned, [], False, False))
    max_cards = max((p.max_gpus for p in plan_rules.platform.values()), default=MAX_PLAN_GPUS)
    for g in buyable:
        if g.unified_memory:
            counts: tuple[int, ...] = (1,)
        elif g.sold_in:
            counts = g.sold_in  # SXM/OAM: only the baseboards they are sold on
        else:
            counts = tuple(range(1, max_cards + 1))
        for n in counts:
            if owned and (g.unified_memory or owned_unified or any(s.vendor != g.vendor for _, s in owned)):
                continue  # a unified machine is a whole computer; one runtime drives one vendor's GPUs
            if owned and (g.sold_in or owned_modules):
                continue  # modules go on their own baseboard; cards do not join it
            parts = owned + [(n, g)]
            if sum(k for k, _ in parts) > MAX_PLAN_GPUS:
                continue
            if not g.unified_memory and not g.sold_in and platform_for(parts, plan_rules.platform) is None:
                beyond_platform += 1
                continue
            cap = sum(k * s.vram_bytes for k, s in parts)
            if cap >= weights_floor:
                candidates.append((parts, [(n, g)], False, False))
                all_specs = [s for _, s in parts]
                if sum(k for k, _ in parts) > 1 and all(s.id in plan_rules.nvlink_bridge_sold_for for s in all_specs) \
                        and all(s.nvlink and s.nvlink.topology == "bridge" for s in all_specs) \
                        and len({s.id for s in all_specs}) == 1:
                    candidates.append((parts, [(n, g)], True, False))
            if model.is_moe and n == 1 and not g.unified_memory and not g.sold_in and not owned \
                    and g.category in ("consumer", "workstation"):
                candidates.append((parts, [(n, g)], False, True))  # one card next to the experts in RAM
    if model.is_moe and owned and not owned_unified and not owned_modules:
        candidates.append((owned, [], False, True))  # the cards you have, moved into the MoE host build
    from advisor.engine.choice import kv_candidates

    kv_types = kv_candidates(catalog, runtime, opts)
    results: list[PlanOption] = []
    evaluated = 0
    plain_best: dict[tuple, PlanOption] = {}
    for parts, new, nvlink, on_host in candidates:
        specs = [s for n, s in parts for _ in range(n)]
        if on_host:
            rig = rig_of(specs, catalog.rules.memory.host, ram_bytes=int(float(host.ram_gib) * GIB), nvlink=False,
                         ram_bandwidth_gb_s=float(host.ram_bandwidth_gb_s), source="plan")
        else:
            rig = rig_of(specs, catalog.rules.memory.host, ram_bytes=ram_bytes, nvlink=nvlink, source="plan")
        if {s.vendor for _, s in parts} - set(runtime.vendors) or refusal(catalog, runtime, rig, model, quant):
            continue  # the runtime does not run there (rules/runtimes.toml): never proposed
        evaluated += 1
        for kv in kv_types:  # f16, then q8_0 where it is what fits (advisor.engine.choice)
            kv_opts = replace(opts, kv_type=kv)
            placement = Placer(model, quant, runtime, rig, kv_opts, catalog.rules).at(ctx)
            if placement.runs if on_host else placement.fits:
                break
        if not (placement.runs if on_host else placement.fits):
            continue
        speed = estimate_speed(placement, rig, model, quant, runtime, catalog.rules, kv_opts, ctx)
        tps = speed.decode_tokens_per_s or 0.0
        if min_tps is not None and tps < min_tps:
            continue
        cost = sum(n * price(s) for n, s in new) + (bridge * (sum(n for n, _ in parts) // 2) if nvlink else 0.0)
        basis = [price_words(s, price(s), s.id in prices) for _, s in new]
        if nvlink:
            basis.append(f"NVLink bridge ${bridge:,.0f} ({plan_rules.nvlink_bridge_basis})")
        if on_host:
            cost += float(host.usd)
            basis.append(f"{host.name} ${float(host.usd):,.0f} ({host.date}, rules/plan.toml [moe_host])")
        power = sum(n * s.power_w for n, s in parts) + (float(host.base_w) if on_host else 0.0)
        per_m = power / 1000 / (tps * 3600) * 1e6 * kwh if tps else float("inf")
        headroom = min(d.free_bytes for d in placement.devices) if placement.devices else 0
        label = " + ".join(f"{n}× {s.name}" for n, s in parts)
        if on_host:
            where = f"{label} in an {host.name} build, experts in system RAM ({placement.strategy.replace('_', ' ')})"
            platform = host.name
        elif parts[0][1].unified_memory:
            where, platform = f"{label}: {placement.strategy.replace('_', ' ')}", "unified-memory machine"
        elif parts[0][1].sold_in:
            where = f"{label}: an {sum(n for n, _ in parts)}-GPU baseboard, {placement.strategy.replace('_', ' ')}"
            platform = f"{sum(n for n, _ in parts)}-GPU baseboard (server not priced)"
        else:
            plat = platform_for(parts, plan_rules.platform)
            platform = plat.name if plat else ""
            where = f"{label} on a {platform}: {placement.strategy.replace('_', ' ')}"
            if plat is not None and new and (owned or float(plat.usd)):
                # a rig that outgrows the desktop needs the platform too (the owner's desktop costs nothing)
                cost += float(plat.usd)
                if float(plat.usd):
                    basis.append(f"platform ${float(plat.usd):,.0f}: {plat.price_basis}")
        why = (f"{where}, {tps:.1f} tok/s decode, {headroom / GIB:.1f} GiB to spare"
               + (f", {kv} KV cache" if kv != kv_types[0] else "") + (", NVLink bridge" if nvlink else ""))
        opt = PlanOption(gpus=tuple((n, s.id) for n, s in parts), new_gpus=tuple((n, s.id) for n, s in new),
                         price_usd=round(cost, 2), nvlink=nvlink, decode_tokens_per_s=tps,
                         prefill_tokens_per_s=speed.prefill_tokens_per_s or 0.0, headroom_bytes=headroom,
                         power_w=power, usd_per_million_tokens=round(per_m, 2), strategy=placement.strategy, why=why,
                         fits=placement.fits, platform=platform, price_basis=tuple(basis), host_build=on_host,
                         kv_cache_type=kv)
        key = tuple((n, s.id) for n, s in parts) + (("host",) if on_host else ())
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
    over_budget = False
    notes = []
    if budget is not None:
        within = [o for o in kept if o.price_usd <= budget]
        if within:
            kept = within
        elif kept:
            over_budget = True
            notes.append(f"Nothing reaches the target within ${budget:,.0f}; the cheapest rig that does costs "
                         f"${kept[0].price_usd:,.0f}.")
            kept = kept[:1]
    if any(o.nvlink for o in kept[:top]):
        note = "NVLink appears where it reaches the target that the same GPUs over PCIe miss."
    elif dropped_nvlink:
        note = (f"NVLink would buy nothing here: {dropped_nvlink} bridged option(s) reach the target no better "
                f"than the same GPUs over PCIe ({runtime.name}, {opts.split or runtime.default_split} split).")
    else:
        note = "No NVLink-capable option reaches the target; PCIe is what these rigs use."
    if kept:
        best = kept[0]
        owned_n = sum(n for n, _ in owned)
        if sum(n for n, _ in best.gpus) - owned_n == 1 and len(best.new_gpus) == 1 and not best.host_build:
            name = catalog.gpus[best.new_gpus[0][1]].name
            notes.append(f"{'One more GPU' if owned_n else 'One GPU'} is enough: another {name} would add memory, "
                         f"not single-stream speed (a layer split runs the GPUs in turn).")
        consumer = [o for o in kept if all(catalog.gpus[g].category != "datacenter" for _, g in o.new_gpus)]
        datacentre = [o for o in kept if any(catalog.gpus[g].category == "datacenter" for _, g in o.new_gpus)]
        if consumer and datacentre and datacentre[0].price_usd > consumer[0].price_usd:
            notes.append(f"A data-centre card buys nothing here: the cheapest that reaches the target costs "
                         f"${datacentre[0].price_usd:,.0f}, against ${consumer[0].price_usd:,.0f} for "
                         f"{', '.join(f'{n}x {g}' for n, g in consumer[0].new_gpus)}.")
    if any(o.host_build for o in kept[:top]):
        notes.append(f"The MoE host build ({host.name}) is priced from {host.source}, {host.date}; llama.cpp keeps "
                     f"the experts in its RAM (--n-cpu-moe) and the rest on the card.")
    limits = "; ".join(f"{p.name}: at most {p.max_gpus} cards and {float(p.psu_w) * float(p.load_fraction):,.0f} W "
                       f"with {float(p.base_w):,.0f} W for the platform" for p in plan_rules.platform.values())
    notes.append(f"Builds are held to their platform (rules/plan.toml): {limits}; SXM/OAM modules only on their "
                 f"4- or 8-GPU baseboards, at N x the per-GPU price (the server is extra)"
                 + (f"; {beyond_platform} rig(s) beyond every platform left out." if beyond_platform else "."))
    return Plan(model=model, quant=quant, context_tokens=ctx, min_tps=min_tps, budget_usd=budget, notes=tuple(notes),
                options=tuple(kept[:top]), evaluated=evaluated, nvlink_note=note, kwh_usd=kwh,
                kwh_basis=str(plan_rules.electricity_basis) if kwh_usd is None else "given with --kwh-price",
                unpriced=unpriced, used=used, over_budget=over_budget)
