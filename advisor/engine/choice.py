"""Choosing for the user: which quantization and KV cache type to answer with, and the trade-off table.

The policy (rules/quality.toml):

1. A quality floor. A quantization whose published quality loss is past the knee (KL divergence vs
   16-bit over `floor.max_kld`, or for formats without one, fewer bits per weight than `floor.min_bpw`)
   is never chosen on the user's behalf; a model published in a low-bit format (gpt-oss, MXFP4)
   never goes below it. `--min-quality Q` lowers the floor to Q, `--allow-low-bit` removes it.
2. Targets first: the best quality above the floor that fits on the GPUs at the asked context and
   decodes at least at the speed target (reading speed unless `--min-tps`); else the best that
   reaches the speed with part of it in system RAM (MoE experts in RAM); else the best that fits.
   Then comfort: while that pick decodes under `targets.comfort_factor` x the target, the next
   faster quantization of the same tier is taken when the step adds at most the KL divergence of
   `targets.step_quant` (Q4_K_M): reading speed is the floor users tolerate, not what they settle
   for, and the steps down to IQ4_XS cost less quality than users notice (rules/quality.toml).
3. Quality order is the runtime's ladder (best first) and, within a quantization, the KV cache types
   of `targets.kv_types` (f16 first): a q8_0 cache costs less quality (KLD +0.0008) than any step down
   the weight ladder, so it is taken before fewer weight bits whenever that is what fits.

Every candidate measured on the way becomes a row of the trade-off table (`Choice`).
"""

from __future__ import annotations

from dataclasses import replace

from advisor.catalog.types import Catalog, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine.estimate import estimate_speed
from advisor.engine.options import DEFAULT_CTX, Options
from advisor.engine.placement import Placer
from advisor.engine.placement.records import plain_fit
from advisor.engine.quants import native_format, resolve_quant
from advisor.engine.scenario import Scenario
from advisor.engine.strategies import words_of
from advisor.record import Record, record



@record
class Floor(Record):
    """The lowest quality the advisor chooses on its own."""

    max_kld: float | None
    """Published KL divergence above which a quantization is below the floor; None: no KLD limit."""
    min_bpw: float | None
    """Bits per weight below which a format without a published KLD is below the floor."""
    text: str
    """The floor in words, with where it comes from."""
    lowest: str = ""
    """A quantization id under which nothing is chosen (native formats, per-model floors, --min-quality)."""
    lowest_bpw: float = 0.0

    def admits(self, q: QuantSpec) -> bool:
        if self.lowest and q.bits_per_weight < self.lowest_bpw and q.id != self.lowest:
            return False
        if self.max_kld is not None and q.kld is not None:
            return q.kld <= self.max_kld
        if self.min_bpw is not None:
            return q.bits_per_weight >= self.min_bpw
        return True


@record
class Choice(Record):
    """One row of the trade-off table: a quantization with a KV cache type on this rig."""

    quant: QuantSpec
    kv_type: str
    fits: bool
    """Fully on the GPUs at the asked context."""
    runs: bool
    strategy: str
    where: str
    """Where it lives: `GPU`, `GPUs`, `GPU, experts in RAM`, `GPU + RAM`, `RAM`."""
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    quality_loss: float | None
    """Published KL divergence vs 16-bit of the weights plus what the KV cache type adds; None: not published."""
    below_floor: bool
    meets_speed: bool
    max_context_tokens: int = 0
    """The largest context that fits fully on the GPUs (on a CPU-only rig: that runs)."""
    picked: bool = False
    why: str = ""


@record
class Policy(Record):
    """What the automatic choice aimed for, stated in the output."""

    target_tokens_per_s: float
    target_basis: str
    target_context: int
    floor: Floor
    chosen: bool
    """The advisor chose the quantization (no --quant, no model file fixing it)."""
    comfort_tokens_per_s: float = 0.0
    """Under this decode speed the choice takes a cheap step down the ladder (0: never)."""
    step_kld: float = 0.0
    """The most KL divergence one such step may add."""
    step_quant: str = ""
    comfort_basis: str = ""

    @property
    def text(self) -> str:
        comfort = (f"; then, while the pick decodes under {self.comfort_tokens_per_s:g} tok/s ({self.comfort_basis}), "
                   f"the next faster quantization when that step adds at most KLD {self.step_kld:.3f} "
                   f"({self.step_quant}'s own loss vs 16-bit)") if self.comfort_tokens_per_s else ""
        return (f"targets first: {self.target_context:,} context fully on the GPUs at {self.target_tokens_per_s:g} tok/s "
                f"or more ({self.target_basis}); then the best quality above the floor ({self.floor.text})" + comfort)


def quality_floor(catalog: Catalog, model: ModelSpec, options: Options) -> Floor:
    """The floor for this model under these options (rules/quality.toml [floor])."""
    f = catalog.rules.quality.floor
    if options.allow_low_bit:
        return Floor(None, None, "none: --allow-low-bit")
    if options.min_quality:
        q = resolve_quant(catalog, options.min_quality)
        return Floor(None, None, f"{q.id} or better: --min-quality", lowest=q.id, lowest_bpw=q.bits_per_weight)
    lowest, why = f.model.get(model.id, ""), "its own measurements (rules/quality.toml)"
    if not lowest and f.native_is_floor and model.native_quant:
        # the published format as the runtime loads it (vLLM's gpt-oss checkpoint is mxfp4-bf16, fewer bits per
        # weight than the MXFP4 GGUF's whole-file figure, and is the same weights)
        runtime = catalog.runtimes.get(options.runtime)
        own = native_format(catalog, runtime, model) if runtime else None
        lowest, why = (own.id if own else model.native_quant), "its published format"
    if lowest:
        q = resolve_quant(catalog, lowest)
        return Floor(f.max_kld, f.min_bpw, f"{q.id} or better for {model.name}: {why}",
                     lowest=q.id, lowest_bpw=q.bits_per_weight)
    return Floor(f.max_kld, f.min_bpw,
                 f"KL divergence vs 16-bit at most {f.max_kld:g}, or {f.min_bpw:g} bits per weight where none is "
                 f"published; --allow-low-bit or --min-quality lowers it")


def policy(catalog: Catalog, model: ModelSpec, options: Options, chosen: bool) -> Policy:
    sel = catalog.rules.memory.selection
    ctx = min(options.ctx or DEFAULT_CTX, model.max_context)
    if options.min_tps:
        target, basis = float(options.min_tps), "--min-tps"
    else:
        target, basis = float(sel.reading_tokens_per_s), "reading speed, rules/memory.toml"
    t = catalog.rules.quality.targets
    step = resolve_quant(catalog, t.step_quant)
    return Policy(target, basis, ctx, quality_floor(catalog, model, options), chosen,
                  comfort_tokens_per_s=float(t.comfort_factor) * target, step_kld=float(step.kld or 0.0),
                  step_quant=step.id, comfort_basis=t.comfort_basis)


def kv_candidates(catalog: Catalog, runtime: RuntimeSpec, options: Options) -> tuple[str, ...]:
    """The KV cache types the choice may use: the asked one when it was given, else the policy's list."""
    if options.kv_fixed:
        return (options.kv_type,)
    out = [k for k in catalog.rules.quality.targets.kv_types if k in runtime.kv_types]
    if options.kv_type not in out:
        out.insert(0, options.kv_type)
    return tuple(out)


def quality_loss(catalog: Catalog, q: QuantSpec, kv_type: str) -> float | None:
    if q.kld is None:
        return None
    kv = getattr(catalog.rules.quality.kv_kld, kv_type, None)
    return round(q.kld + (kv or 0.0), 6) if kv is not None or kv_type == "f16" else None


def measure(catalog: Catalog, sc: Scenario, q: QuantSpec, kv: str, pol: Policy) -> tuple[Choice, Placer]:
    """One row of the trade-off table: `q` with a `kv` cache at the policy's context, placed and timed."""
    at_q = sc.derive(quant=q, ctx=pol.target_context, kv_type=kv)
    p = Placer(at_q)
    at = p.at(pol.target_context)
    decode = prefill = None
    if at.runs:
        s = estimate_speed(at_q, at)
        decode, prefill = s.decode_tokens_per_s, s.prefill_tokens_per_s
    fast = decode is not None and decode >= pol.target_tokens_per_s
    # "fits" as check says it: under the runtime's fit margin it is "fits, tight" (FIT005), not offered as a fit
    return Choice(q, kv, plain_fit(at, at_q.runtime), at.runs, at.strategy, words_of(at.strategy).where, decode, prefill,
                  quality_loss(catalog, q, kv), not pol.floor.admits(q), fast), p


@record
class Decision(Record):
    placer: Placer | None
    kv_type: str
    why: str
    choices: tuple[Choice, ...]
    policy: Policy


def choose(catalog: Catalog, sc: Scenario, ladder: list[QuantSpec], fallback: QuantSpec,
           table: bool = True) -> Decision:
    """Measure every quantization x KV type of `ladder` and pick by the policy; placer None: nothing runs."""
    pol = policy(catalog, sc.model, sc.options, True)
    kvs = kv_candidates(catalog, sc.runtime, sc.options)
    rows: list[tuple[Choice, Placer]] = []
    for q, kv in [(q, kv) for q in ladder for kv in kvs]:
        rows.append(measure(catalog, sc, q, kv, pol))
        c = rows[-1][0]
        if not table and not c.below_floor and c.fits and (c.decode_tokens_per_s or 0) >= pol.comfort_tokens_per_s:
            break  # quality order: without a table, the first that fits at a comfortable speed ends the search
    pick, why = _pick(rows, pol, sc.rig.is_cpu_only, fallback, kvs[0])
    if pick is not None and pick[0].kv_type != kvs[0]:
        same = next((c for c, _ in rows if c.quant.id == pick[0].quant.id and c.kv_type == kvs[0]), None)
        if same is not None and not same.fits and pick[0].fits:
            why += f", with a {pick[0].kv_type} KV cache rather than fewer weight bits"
    shown = _table(catalog, rows, pick, why, pol) if table else ()
    if pick is None:
        return Decision(None, kvs[0], "", shown, pol)
    return Decision(pick[1], pick[0].kv_type, why, shown, pol)


def _pick(rows: list[tuple[Choice, Placer]], pol: Policy, cpu_only: bool, fallback: QuantSpec,
          first_kv: str) -> tuple[tuple[Choice, Placer] | None, str]:
    """The policy's tiers over the measured rows, best quality first: the pick and why, or (None, "")."""
    ok = [(c, p) for c, p in rows if not c.below_floor]
    target = f"{pol.target_tokens_per_s:g} tok/s"
    ctx = f"{pol.target_context:,}"
    tiers = [
        (lambda c: c.fits and c.meets_speed,
         f"the best quality above the floor that fits on the GPUs at {ctx} context and decodes at {target} or more"),
        (lambda c: c.runs and c.meets_speed and not cpu_only,
         f"nothing above the floor fits fully at {ctx} context; the best quality that still decodes at {target} "
         f"or more with part of it in system RAM"),
        (lambda c: c.runs and c.meets_speed,
         f"no GPU: the best quality above the floor that decodes at {target} or more from system RAM"),
        (lambda c: c.fits,
         f"fits, but nothing above the floor decodes at {target} here; the best quality that fits"),
    ]
    for test, text in tiers:
        pick = next(((c, p) for c, p in ok if test(c)), None)
        if pick:
            return _comfortable(pick, [(c, p) for c, p in ok if test(c)], pol, text)
    runners = [(c, p) for c, p in ok if c.runs]
    common = next(((c, p) for c, p in runners if c.quant.id == fallback.id and c.kv_type == first_kv), None)
    if cpu_only and runners:
        return runners[0], "no GPU: nothing above the floor reaches the speed target; the best quality that runs"
    if common is not None:
        return common, (f"nothing above the floor fits fully or reaches {target}; {fallback.id}, the common "
                        f"download, runs with part of it in system RAM")
    if runners:
        return runners[0], f"nothing above the floor fits fully or reaches {target}; the best quality that runs"
    return None, ""


def _comfortable(pick: tuple[Choice, Placer], tier: list[tuple[Choice, Placer]], pol: Policy,
                 text: str) -> tuple[tuple[Choice, Placer], str]:
    """From the tier's best-quality row, cheap steps down while it decodes under the comfortable speed: the next
    faster row (quality order) whose loss exceeds the current one's by at most `pol.step_kld`."""
    first = cur = pick
    for row in tier[tier.index(pick) + 1:]:
        speed, now = row[0].decode_tokens_per_s or 0.0, cur[0].decode_tokens_per_s or 0.0
        if now >= pol.comfort_tokens_per_s:
            break
        if speed <= now:
            continue  # the same weights with a smaller KV cache, or slower: buys no speed
        if row[0].quality_loss is None or cur[0].quality_loss is None or \
                row[0].quality_loss - cur[0].quality_loss > pol.step_kld + 1e-9:
            break  # the next faster step costs more quality than the rule allows
        cur = row
    if cur is first:
        return pick, text
    c0, c = first[0], cur[0]
    return cur, (f"{text}; {c0.quant.id} would decode {c0.decode_tokens_per_s or 0:.1f} tok/s, under the comfortable "
                 f"{pol.comfort_tokens_per_s:g}, so it steps down while a step adds at most KLD {pol.step_kld:.3f} "
                 f"({pol.step_quant}'s loss): {c.quant.id} at {c.decode_tokens_per_s or 0:.1f} tok/s for KLD "
                 f"+{(c.quality_loss or 0) - (c0.quality_loss or 0):.3f}")


def table_for(catalog: Catalog, sc: Scenario, ladder: list[QuantSpec], why: str, pol: Policy) -> tuple[Choice, ...]:
    """The trade-off table when the quantization was given (--quant or a model file): the given one is the pick."""
    quant, options = sc.quant, sc.options
    kvs = kv_candidates(catalog, sc.runtime, replace(options, kv_fixed=False))
    qs = ladder if any(q.id == quant.id for q in ladder) else [quant] + ladder
    rows = [measure(catalog, sc, q, kv, pol) for q in qs for kv in kvs]
    pick = next(((c, p) for c, p in rows if c.quant.id == quant.id and c.kv_type == options.kv_type), None)
    return _table(catalog, rows, pick, why, pol)


def _table(catalog: Catalog, rows: list[tuple[Choice, Placer]], pick: tuple[Choice, Placer] | None, why: str,
           pol: Policy) -> tuple[Choice, ...]:
    """The viable rows (above the floor, running, and either fully on the GPUs or fast enough), plus the best one below the floor that fits when
    nothing above it does, each with its largest context and why it is or is not the pick."""
    shown = [(c, p) for c, p in rows if c.runs and not c.below_floor
             and (c.fits or c.meets_speed or c.strategy == "cpu_only")]
    if not any(c.fits for c, _ in shown):
        low = next(((c, p) for c, p in rows if c.below_floor and (c.fits or (c.strategy == "cpu_only" and c.runs))), None)
        if low is not None:
            shown.append(low)
    if pick is not None and all(c is not pick[0] for c, _ in shown):
        shown.insert(0, pick)
    out = []
    for c, p in shown:
        is_pick = pick is not None and c is pick[0]
        if is_pick:
            reason = why
        elif c.below_floor:
            reason = f"below the quality floor ({pol.floor.text.split(':')[0]})"
        elif not c.runs:
            reason = "does not run"
        elif not c.fits and not c.meets_speed:
            reason = f"does not fit fully at {pol.target_context:,} context and decodes under {pol.target_tokens_per_s:g} tok/s"
        elif not c.meets_speed:
            reason = f"decodes under {pol.target_tokens_per_s:g} tok/s"
        elif pick is not None and c.where == pick[0].where and _rank(rows, c) < _rank(rows, pick[0]) and \
                (c.decode_tokens_per_s or 0) < pol.comfort_tokens_per_s:
            reason = (f"better quality, but under the comfortable {pol.comfort_tokens_per_s:g} tok/s, and the pick "
                      f"costs little quality more")
        elif not c.fits:
            reason = f"does not fit fully at {pol.target_context:,} context"
        elif pick is not None and _rank(rows, c) < _rank(rows, pick[0]):
            reason = "better quality, but misses a target"
        else:
            reason = "reaches the targets at lower quality than the pick"
        out.append(replace(c, max_context_tokens=p.max_context(), picked=is_pick, why=reason))
    return tuple(out)


def _rank(rows: list[tuple[Choice, Placer]], c: Choice) -> int:
    return next(i for i, (r, _) in enumerate(rows) if r is c)
