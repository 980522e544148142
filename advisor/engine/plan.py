"""`plan`: the cheapest rigs that run a model at a target speed, NVLink or not.

Candidates: each priced PCIe card in the counts a platform takes (rules/plan.toml [platform]: slots,
lanes and power supply), SXM/OAM modules only on their 4- or 8-GPU baseboards, each unified-memory
machine, for MoE models one card in the MoE host build (EPYC with 12 channels of RAM, experts in RAM),
each added to the GPUs the user already owns, with and without an NVLink bridge where one is sold.
Each candidate is placed and timed by the same engine as `check`; those that fit fully (the host
build: that run) and reach the target decode speed are kept, cheapest first. With a budget, the
best within it, or the cheapest above it when nothing is. An NVLink option is kept only when it
reaches the target that the same GPUs without NVLink miss, or is cheaper.

Prices are what a buyer can pay, each with its month: the user's (--price), else the cheapest dated
catalog price (used ones with --used or for owners; a launch list price only within list_price_months
of the newest market data). A part whose price is not known (the GPU server passive data-centre cards
need, the server around a baseboard, a second machine's computer) is named in the option, which then
comes after every fully priced one; a platform the user owns (--have server) costs nothing.
"""

from __future__ import annotations

import re
from dataclasses import replace

from advisor.record import Record, record
from advisor.catalog.rulebook import PlatformRules
from advisor.catalog.types import GIB, Catalog, GpuSpec, ModelSpec, Price, QuantSpec
from advisor.engine.check import check_options
from advisor.engine.choice import kv_candidates
from advisor.engine.compat import refusal
from advisor.engine.estimate import estimate_speed
from advisor.engine.memory import weights_layout
from advisor.engine.options import DEFAULT_CTX, Options
from advisor.engine.placement import Placer
from advisor.engine.placement.records import plain_fit
from advisor.engine.quants import fallback_quant, resolve_quant
from advisor.engine.rig import MAX_RIG_GPUS, rig_of
from advisor.engine.scenario import Scenario
from advisor.engine.strategies import words_of
from advisor.errors import AdvisorError

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
    unpriced_parts: tuple[str, ...] = ()
    """Parts it needs whose price is not known (a GPU server): `price_usd` leaves them out."""
    cooling: str = ""
    """Passive data-centre cards: the airflow they need and their board power, in words."""


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
    stale_list_prices: tuple[str, ...] = ()
    """GPUs left out because their only price is a launch list price too old to pay (rules/plan.toml)."""


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


def price_words(spec: GpuSpec, price: Price) -> str:
    """A part's price in words: its condition and the month it was seen (`as of`), or that the user gave it."""
    if price.condition == "given":
        return f"{spec.name} ${price.usd:,.0f} (--price)"
    return f"{spec.name} ${price.usd:,.0f} ({price.condition}, as of {price.date})"


def _month_index(text: str) -> int | None:
    m = re.match(r"^(\d{4})-(\d{2})", text or "")
    return int(m.group(1)) * 12 + int(m.group(2)) - 1 if m else None


@record
class PlanAsk(Record):
    """What a plan is asked for beyond the model and its options (`advisor plan` flags)."""

    min_tps: float | None = None
    """Decode speed every option must reach."""
    budget: float | None = None
    """The most to spend, USD: the best within it, or the cheapest rig above it."""
    have: tuple[tuple[int, str], ...] | list | None = None
    """(count, GPU id) the user owns: priced at nothing, built on."""
    prices: dict[str, float] | None = None
    """The user's own prices by GPU id (--price)."""
    ram_bytes: int = 64 * GIB
    """System RAM of a candidate rig."""
    kwh_usd: float | None = None
    """Electricity price; None: the rulebook's."""
    top: int = 5
    """How many options to show."""
    used: bool | None = None
    """Used-market prices too; None: for owners only."""
    platforms: tuple[str, ...] = ()
    """Platform ids (rules/plan.toml [platform]) the user owns (`--have server`): they add nothing to a price."""


@record
class _Candidate(Record):
    parts: tuple
    """(count, GpuSpec) of every GPU in the rig."""
    new: tuple
    """(count, GpuSpec) of what is bought."""
    nvlink: bool
    on_host: bool
    """On the MoE host build (experts in its system RAM)."""
    machines: int = 1
    """Machines the parts are shared between, joined by a network: `parts` lists one machine's, repeated."""


class _Shop:
    """One plan's fixed inputs: the model at its quantization, the runtime, what is owned and how parts are
    priced."""

    def __init__(self, catalog: Catalog, model: ModelSpec, options: Options, ask: PlanAsk) -> None:
        self.catalog, self.model, self.ask = catalog, model, ask
        self.runtime = runtime = check_options(catalog, options)
        self.quant = resolve_quant(catalog, options.quant) if options.quant else fallback_quant(catalog, runtime, model)
        if not runtime.loads(self.quant):
            raise AdvisorError(f"{runtime.name} does not load {self.quant.id}",
                               f"runtimes for {self.quant.id}: {', '.join(self.quant.runtimes)}")
        self.ctx = min(options.ctx or DEFAULT_CTX, model.max_context)
        self.opts = replace(options, quant=self.quant.id, ctx=self.ctx)
        self.prices = ask.prices or {}
        self.owned = [(n, catalog.gpus[g]) for n, g in (ask.have or [])]
        # an owner shops the used market too; a first rig is priced new unless --used
        self.used = bool(self.owned) if ask.used is None else ask.used
        if sum(n for n, _ in self.owned) > MAX_RIG_GPUS:
            raise AdvisorError(f"{sum(n for n, _ in self.owned)} owned GPUs is more than one rig holds",
                               f"use at most {MAX_RIG_GPUS} with --have and --rig together")
        self.rules = catalog.rules.plan
        self.host = self.rules.moe_host
        self.kv_types = kv_candidates(catalog, runtime, self.opts)

    def offer(self, spec: GpuSpec) -> Price | None:
        """The user's price, else the cheapest catalog price a buyer can pay: used-market prices only when asked
        for (--used) or for owners, launch list prices only while recent (rules/plan.toml list_price_months)."""
        if spec.id in self.prices:
            return Price(usd=self.prices[spec.id], date="", source="--price", condition="given")
        offers = [p for p in (spec.price, spec.used_price) if p is not None and not self.stale(p)
                  and (p.condition != "used" or self.used)]
        return min(offers, key=lambda p: p.usd) if offers else None

    def price(self, spec: GpuSpec) -> float | None:
        offer = self.offer(spec)
        return None if offer is None else offer.usd

    def stale(self, price: Price) -> bool:
        """A launch list price from longer ago than the rulebook allows before its newest market prices."""
        rules = self.rules
        now, seen = _month_index(rules.prices_as_of), _month_index(price.date)
        return price.condition == "msrp" and bool(rules.list_price_months) and now is not None and \
            seen is not None and now - seen > float(rules.list_price_months)


def make_plan(catalog: Catalog, model: ModelSpec, options: Options, **ask) -> Plan:
    """The cheapest rigs that run `model` with `options` at the target; `ask` holds PlanAsk's fields."""
    shop = _Shop(catalog, model, options, PlanAsk(**ask))
    candidates, beyond_platform = _candidates(shop)
    results: list[PlanOption] = []
    evaluated = 0
    for cand in candidates:
        rig = _rig(shop, cand)
        if {s.vendor for _, s in cand.parts} - set(shop.runtime.vendors) or \
                refusal(catalog, shop.runtime, rig, model, shop.quant):
            continue  # the runtime does not run there (rules/runtimes.toml): never proposed
        evaluated += 1
        opt = _option(shop, cand, rig)
        if opt is not None:
            results.append(opt)
    kept, dropped_nvlink = _without_idle_bridges(results)
    kept.sort(key=lambda o: (bool(o.unpriced_parts), o.price_usd, -o.decode_tokens_per_s))
    kept, notes = _within_budget(kept, shop.ask.budget)
    notes += _notes(shop, kept, beyond_platform) + _price_notes(shop, kept)
    kwh = shop.ask.kwh_usd if shop.ask.kwh_usd is not None else float(shop.rules.electricity_usd_per_kwh)
    return Plan(model=model, quant=shop.quant, context_tokens=shop.ctx, min_tps=shop.ask.min_tps,
                budget_usd=shop.ask.budget, notes=tuple(notes), options=tuple(kept[:shop.ask.top]),
                evaluated=evaluated, nvlink_note=_nvlink_note(shop, kept, dropped_nvlink), kwh_usd=kwh,
                kwh_basis=str(shop.rules.electricity_basis) if shop.ask.kwh_usd is None else "given with --kwh-price",
                unpriced=tuple(sorted(g.id for g in catalog.gpus.values() if shop.price(g) is None)), used=shop.used,
                stale_list_prices=_stale_ids(shop),
                over_budget=bool(shop.ask.budget is not None and kept and kept[0].price_usd > shop.ask.budget))


def _counts(g: GpuSpec, max_cards: int) -> tuple[int, ...]:
    """How many of a GPU a rig may hold: one unified machine, a module's baseboards, or 1..max cards."""
    if g.unified_memory:
        return (1,)
    if g.sold_in:
        return g.sold_in  # SXM/OAM: only the baseboards they are sold on
    return tuple(range(1, max_cards + 1))


def _joins_owned(shop: _Shop, g: GpuSpec) -> bool:
    """Whether a bought GPU can join what the user owns: one vendor (one runtime drives them), no unified
    machine (a whole computer), no modules (they go on their own baseboard; cards do not join it)."""
    owned = shop.owned
    if not owned:
        return True
    if g.unified_memory or any(s.unified_memory for _, s in owned) or any(s.vendor != g.vendor for _, s in owned):
        return False
    return not (g.sold_in or any(s.sold_in for _, s in owned))


def _candidates(shop: _Shop) -> tuple[list[_Candidate], int]:
    """Every rig to place: what is owned, each priced GPU in the counts its platform takes added to it (with
    an NVLink bridge where one is sold), and for MoE models the MoE host build; and how many were beyond every
    platform."""
    owned, model, platforms = shop.owned, shop.model, shop.rules.platform
    out = [_Candidate(tuple(owned), (), False, False)] if owned else []
    weights_floor = model.params_total * shop.quant.bits_per_weight / 8 * 0.9
    max_cards = max((p.max_gpus for p in platforms.values()), default=MAX_PLAN_GPUS)
    beyond = 0
    for g in (g for g in shop.catalog.gpus.values() if shop.price(g) is not None and _joins_owned(shop, g)):
        for n in _counts(g, max_cards):
            parts = tuple(owned) + ((n, g),)
            if sum(k for k, _ in parts) > MAX_PLAN_GPUS:
                continue
            if not g.unified_memory and not g.sold_in and platform_for(list(parts), platforms) is None:
                beyond += 1
                continue
            if sum(k * s.vram_bytes for k, s in parts) >= weights_floor:
                out.append(_Candidate(parts, ((n, g),), False, False))
                if _bridgeable(shop, parts):
                    out.append(_Candidate(parts, ((n, g),), True, False))
            if model.is_moe and n == 1 and not g.unified_memory and not g.sold_in and not owned \
                    and g.category in ("consumer", "workstation"):
                out.append(_Candidate(parts, ((n, g),), False, True))  # one card next to the experts in RAM
    if model.is_moe and owned and all(not s.unified_memory and not s.sold_in for _, s in owned):
        out.append(_Candidate(tuple(owned), (), False, True))  # the cards you have, moved into the MoE host build
    return out + _second_machines(shop, weights_floor), beyond


def _second_machines(shop: _Shop, weights_floor: float) -> list[_Candidate]:
    """Two machines joined by a network (rules/plan.toml second_machine_network), where the runtime runs across
    machines: two of a unified machine, or the owned cards again in a second machine. `parts` are one machine's."""
    if shop.runtime.multinode.split == "none" or not shop.rules.second_machine_network:
        return []
    if shop.owned:
        owned = tuple(shop.owned)
        cards = all(not s.unified_memory and not s.sold_in for _, s in owned)
        return [_Candidate(owned, owned, False, False, machines=2)] if cards else []
    return [_Candidate(((1, g),), ((1, g),), False, False, machines=2)
            for g in shop.catalog.gpus.values()
            if g.unified_memory and shop.price(g) is not None and 2 * g.vram_bytes >= weights_floor]


def _bridgeable(shop: _Shop, parts: tuple) -> bool:
    """Several cards of one model that take an NVLink bridge still sold for them."""
    specs = [s for _, s in parts]
    return sum(k for k, _ in parts) > 1 and all(s.id in shop.rules.nvlink_bridge_sold_for for s in specs) \
        and all(s.nvlink and s.nvlink.topology == "bridge" for s in specs) and len({s.id for s in specs}) == 1


def _rig(shop: _Shop, cand: _Candidate):
    specs = [s for n, s in cand.parts for _ in range(n)]
    host_rules = shop.catalog.rules.memory.host
    if cand.machines > 1:  # the same machine again, each its own node, joined by the plan's network
        one = rig_of(specs, host_rules, (shop.ask.ram_bytes, None), source="plan")
        gpus = tuple(replace(g, index=m * len(specs) + i, node=m)
                     for m in range(cand.machines) for i, g in enumerate(one.gpus))
        net = shop.rules.builtin_network.get(specs[0].id, shop.rules.second_machine_network)
        return replace(one, gpus=gpus, network=net)
    if cand.on_host:
        return rig_of(specs, host_rules, (int(float(shop.host.ram_gib) * GIB), float(shop.host.ram_bandwidth_gb_s)),
                      nvlink=False, source="plan")
    return rig_of(specs, host_rules, (shop.ask.ram_bytes, None), nvlink=cand.nvlink, source="plan")


def _option(shop: _Shop, cand: _Candidate, rig) -> PlanOption | None:
    """A candidate placed and timed by the engine, priced; None when it does not fit (the host build: run) or
    misses the speed target."""
    ok = (lambda p: p.runs) if cand.on_host else (lambda p: plain_fit(p, shop.runtime))  # a tight fit is no plan
    base = Scenario(shop.model, shop.quant, shop.runtime, rig, shop.opts, shop.catalog.rules, shop.ctx,
                    weights_layout(shop.model, shop.quant))
    for kv in shop.kv_types:  # f16, then q8_0 where it is what fits (advisor.engine.choice)
        sc = base.with_options(kv_type=kv)
        placement = Placer(sc).at(shop.ctx)
        if ok(placement):
            break
    if not ok(placement):
        return None
    speed = estimate_speed(sc, placement)
    tps = speed.decode_tokens_per_s or 0.0
    if shop.ask.min_tps is not None and tps < shop.ask.min_tps:
        return None
    cost, basis, platform, where, unknown = _priced(shop, cand, placement.strategy)
    power = cand.machines * sum(n * s.power_w for n, s in cand.parts) + (float(shop.host.base_w) if cand.on_host else 0.0)
    kwh = shop.ask.kwh_usd if shop.ask.kwh_usd is not None else float(shop.rules.electricity_usd_per_kwh)
    per_m = power / 1000 / (tps * 3600) * 1e6 * kwh if tps else float("inf")
    headroom = min(d.free_bytes for d in placement.devices) if placement.devices else 0
    kv = sc.options.kv_type
    why = (f"{where}, {tps:.1f} tok/s decode, {headroom / GIB:.1f} GiB to spare"
           + (f", {kv} KV cache" if kv != shop.kv_types[0] else "") + (", NVLink bridge" if cand.nvlink else ""))
    bought = cand.new if shop.owned or cand.machines == 1 else tuple((n * cand.machines, s) for n, s in cand.new)
    return PlanOption(gpus=tuple((n * cand.machines, s.id) for n, s in cand.parts),
                      new_gpus=tuple((n, s.id) for n, s in bought),
                      price_usd=round(cost, 2), nvlink=cand.nvlink, decode_tokens_per_s=tps,
                      prefill_tokens_per_s=speed.prefill_tokens_per_s or 0.0, headroom_bytes=headroom,
                      power_w=power, usd_per_million_tokens=round(per_m, 2), strategy=placement.strategy, why=why,
                      fits=placement.fits, platform=platform, price_basis=tuple(basis), host_build=cand.on_host,
                      kv_cache_type=kv, unpriced_parts=tuple(unknown), cooling=_cooling(shop, cand))


def _cooling(shop: _Shop, cand: _Candidate) -> str:
    """What the passive data-centre cards of a candidate need (rules/plan.toml [cooling]), with their power."""
    rules = shop.rules.cooling
    passive = [(n, s) for n, s in cand.parts if rules is not None and s.category in rules.passive_categories
               and not s.unified_memory]
    if not passive:
        return ""
    cards = ", ".join(f"{n * cand.machines}× {s.name} {s.power_w:,.0f} W each" for n, s in passive)
    return f"{cards}: {rules.passive_words}"


def _priced(shop: _Shop, cand: _Candidate, strategy: str) -> tuple[float, list[str], str, str, list[str]]:
    """(cost, each priced part in words, the platform, where it runs in words, the parts whose price is not known)
    of a candidate."""
    parts, new, host = cand.parts, cand.new, shop.host
    if cand.machines > 1:
        return _priced_machines(shop, cand, strategy)
    bridge = float(shop.rules.nvlink_bridge_usd)
    cost = sum(n * shop.price(s) for n, s in new) + (bridge * (sum(n for n, _ in parts) // 2) if cand.nvlink else 0.0)
    basis = [price_words(s, shop.offer(s)) for _, s in new]
    if cand.nvlink:
        basis.append(f"NVLink bridge ${bridge:,.0f} ({shop.rules.nvlink_bridge_basis})")
    label = " + ".join(f"{n}× {s.name}" for n, s in parts)
    mode = words_of(strategy).words
    if cand.on_host:
        cost += float(host.usd)
        basis.append(f"{host.name} ${float(host.usd):,.0f} (as of {host.date}, rules/plan.toml [moe_host])")
        return cost, basis, host.name, f"{label} in an {host.name} build, experts in system RAM ({mode})", []
    if parts[0][1].unified_memory:
        return cost, basis, "unified-memory machine", f"{label}: {mode}", []
    count = sum(n for n, _ in parts)
    if parts[0][1].sold_in:
        return (cost, basis, f"{count}-GPU baseboard (server price not known)",
                f"{label}: an {count}-GPU baseboard, {mode}", [f"the server around the {count}-GPU baseboard"])
    plat = platform_for(list(parts), shop.rules.platform)
    platform = plat.name if plat else ""
    unknown = []
    if plat is not None and new and not _owns(shop, plat):
        # a rig that outgrows the desktop needs the platform too (the desktop you have costs nothing)
        if plat.usd is None:
            unknown.append(plat.name)
        else:
            cost += float(plat.usd)
            basis.append(f"platform ${float(plat.usd):,.0f}: {plat.price_basis}")
    elif plat is not None and not plat.owned and _owns(shop, plat):
        basis.append(f"{plat.name}: yours (--have)")
    return cost, basis, platform, f"{label} on a {platform}: {mode}", unknown


def _owns(shop: _Shop, plat: PlatformRules) -> bool:
    """The platform is the user's: the desktop they have, or one named with --have."""
    return plat.owned or any(shop.rules.platform.get(p) is plat for p in shop.ask.platforms)


def _priced_machines(shop: _Shop, cand: _Candidate, strategy: str) -> tuple[float, list[str], str, str, list[str]]:
    """Two machines: what is bought for the second (a unified machine: both), the network between them."""
    rules = shop.rules
    net = rules.builtin_network.get(cand.parts[0][1].id, rules.second_machine_network)
    label = " + ".join(f"{n}× {s.name}" for n, s in cand.parts)
    bought = cand.new if shop.owned else tuple((n * cand.machines, s) for n, s in cand.new)
    cost = sum(n * shop.price(s) for n, s in bought)
    basis = [price_words(s, shop.offer(s)) for _, s in bought]
    in_words = shop.catalog.rules.interconnect.network.label.get(net, net)
    if net == rules.second_machine_network:
        basis.append(rules.second_machine_basis)
    where = f"{cand.machines} machines of {label} over {in_words}: {words_of(strategy).words}"
    # cards need a second computer around them (board, CPU, RAM), whose price is not known; a unified machine is one
    unknown = [] if cand.parts[0][1].unified_memory else ["the second machine's board, CPU and RAM"]
    return cost, basis, f"{cand.machines} machines", where, unknown


def _without_idle_bridges(results: list[PlanOption]) -> tuple[list[PlanOption], int]:
    """NVLink options stay only where they beat the same GPUs without NVLink; how many were dropped."""
    plain_best = {o.gpus + (("host",) if o.host_build else ()): o for o in results if not o.nvlink}
    kept, dropped = [], 0
    for o in results:
        plain = plain_best.get(o.gpus) if o.nvlink else None
        if plain is not None and plain.price_usd <= o.price_usd:
            dropped += 1
            continue
        kept.append(o)
    return kept, dropped


def _within_budget(kept: list[PlanOption], budget: float | None) -> tuple[list[PlanOption], list[str]]:
    """The options within the budget, or the cheapest above it (said in a note) when none is."""
    if budget is None:
        return kept, []
    within = [o for o in kept if o.price_usd <= budget and not o.unpriced_parts]
    if within or not kept:
        return within, []
    return kept[:1], [f"Nothing reaches the target within ${budget:,.0f}; the cheapest rig that does costs "
                      f"${kept[0].price_usd:,.0f}."]


def _nvlink_note(shop: _Shop, kept: list[PlanOption], dropped_nvlink: int) -> str:
    if any(o.nvlink for o in kept[:shop.ask.top]):
        return "NVLink appears where it reaches the target that the same GPUs over PCIe miss."
    if dropped_nvlink:
        return (f"NVLink would buy nothing here: {dropped_nvlink} bridged option(s) reach the target no better "
                f"than the same GPUs over PCIe ({shop.runtime.name}, {shop.opts.split or shop.runtime.default_split} "
                f"split).")
    return "No NVLink-capable option reaches the target; PCIe is what these rigs use."


def _stale_ids(shop: _Shop) -> tuple[str, ...]:
    """GPUs left out because their only price is a launch list price too old to pay (rules/plan.toml)."""
    return tuple(sorted(g.id for g in shop.catalog.gpus.values()
                        if g.price is not None and shop.stale(g.price) and shop.price(g) is None))


def _price_notes(shop: _Shop, kept: list[PlanOption]) -> list[str]:
    """Options ranked after the priced ones for a part whose price is not known; list prices too old to pay."""
    notes = []
    unknown = [o for o in kept if o.unpriced_parts]
    if unknown:
        o = unknown[0]
        notes.append(f"{len(unknown)} option(s) need a part whose price is not known, so they come after every fully "
                     f"priced one: the cheapest, {', '.join(f'{n}x {g}' for n, g in o.new_gpus)}, is "
                     f"${o.price_usd:,.0f} + {' + '.join(o.unpriced_parts)} (--have server counts a GPU server you "
                     f"own).")
    stale = _stale_ids(shop)
    if stale:
        r = shop.rules
        notes.append(f"Left out, {len(stale)} GPU(s) whose only price is a launch list price from more than "
                     f"{float(r.list_price_months):g} months before {r.prices_as_of}, the newest dated market prices "
                     f"(rules/plan.toml): not what a buyer pays today, so price not known: "
                     f"{', '.join(stale[:8])}{' ...' if len(stale) > 8 else ''}; --price ID=USD gives one.")
    return notes


def _notes(shop: _Shop, kept: list[PlanOption], beyond_platform: int) -> list[str]:
    """What would buy nothing here (a second GPU, a data-centre card), the host build's source, the platforms."""
    gpus, notes, host = shop.catalog.gpus, [], shop.host
    if kept:
        best = kept[0]
        owned_n = sum(n for n, _ in shop.owned)
        if sum(n for n, _ in best.gpus) - owned_n == 1 and len(best.new_gpus) == 1 and not best.host_build:
            notes.append(f"{'One more GPU' if owned_n else 'One GPU'} is enough: another {gpus[best.new_gpus[0][1]].name} "
                         f"would add memory, not single-stream speed (a layer split runs the GPUs in turn).")
        consumer = [o for o in kept if all(gpus[g].category != "datacenter" for _, g in o.new_gpus)]
        datacentre = [o for o in kept if any(gpus[g].category == "datacenter" for _, g in o.new_gpus)]
        if consumer and datacentre and datacentre[0].price_usd > consumer[0].price_usd:
            notes.append(f"A data-centre card buys nothing here: the cheapest that reaches the target costs "
                         f"${datacentre[0].price_usd:,.0f}, against ${consumer[0].price_usd:,.0f} for "
                         f"{', '.join(f'{n}x {g}' for n, g in consumer[0].new_gpus)}.")
    if any(o.host_build for o in kept[:shop.ask.top]):
        notes.append(f"The MoE host build ({host.name}) is priced from {host.source}, {host.date}; llama.cpp keeps "
                     f"the experts in its RAM (--n-cpu-moe) and the rest on the card.")
    limits = "; ".join(f"{p.name}: at most {p.max_gpus} cards and {float(p.psu_w) * float(p.load_fraction):,.0f} W "
                       f"with {float(p.base_w):,.0f} W for the platform" for p in shop.rules.platform.values())
    notes.append(f"Builds are held to their platform (rules/plan.toml): {limits}; SXM/OAM modules only on their "
                 f"4- or 8-GPU baseboards, at N x the per-GPU price (the server is extra)"
                 + (f"; {beyond_platform} rig(s) beyond every platform left out." if beyond_platform else "."))
    return notes
