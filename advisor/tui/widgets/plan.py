"""What to buy: the cheapest rigs that run the current model at a target speed, as `advisor plan` lists them.

The screen hands in the target (`set_target`: model, options, rig; a new one makes the list stale) and calls
`refresh_plan` when the tab is shown; the view's own inputs (minimum tok/s, budget, "count this
rig as owned", "used prices") recompute it at once. `make_plan` runs in a thread worker (about a
tenth of a second); a result that arrives after a newer request is dropped.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Checkbox, DataTable, Input, Label, Static

from advisor.catalog.types import GIB, Catalog, ModelSpec
from advisor.engine.options import Options
from advisor.engine.check import evaluate
from advisor.engine.plan import Plan, PlanOption, make_plan
from advisor.engine.rig import Rig
from advisor.errors import AdvisorError
from advisor.report.document import Doc
from advisor.report.plan import plan_doc
from advisor.tui.widgets.field import Field, Tick, parse_amount

DEFAULT_MIN_TPS = "10"
TOP = 30
"""Options asked of make_plan: more than a 200x60 screen shows; the table scrolls."""
UNPRICED_SHOWN = 12


def right(text: str) -> Text:
    return Text(text, justify="right")


def owned_gpus(rig: Rig | None, catalog: Catalog) -> tuple[list[tuple[int, str]], list[str]]:
    """The rig's GPUs as make_plan's `have` ((count, id), in rig order), and the names left out (not in the catalog)."""
    if rig is None or rig.is_cpu_only:
        return [], []
    counts = Counter(g.spec.id for g in rig.gpus if g.spec.id in catalog.gpus)
    skipped = [g.spec.name for g in rig.gpus if g.spec.id not in catalog.gpus]
    return [(n, gid) for gid, n in counts.items()], skipped


HEADERS = ("#", "price", "what to buy", "decode", "vs yours", "free GiB", "power", "$/M tok", "NVLink")
NARROW_HEADERS = ("#", "price", "what to buy", "tok/s", "×yours", "free", "W", "$/M", "NVL")
"""Below 120 columns: no "#", units move to the headers, "what to buy" is cut past 28 cells (the line
under the table has it whole)."""
RIGHT = {0, 1, 3, 4, 5, 6, 7}
NARROW_BELOW = 120
BUY_WIDTH_NARROW = 28
BUY_WIDTH_WIDE = 36
"""At 120 columns and more "what to buy" is cut past 36 cells, so a long name (RTX PRO 6000 Blackwell Max-Q
Workstation Edition) leaves the other columns on screen; the line under the table has it whole."""


class PlanView(Vertical):
    """Inputs on top, then the target line, the options table (cheapest first) and the notes."""

    def __init__(self, catalog: Catalog, **kwargs) -> None:
        super().__init__(**kwargs)
        self.catalog = catalog
        self.model: ModelSpec | None = None
        self.options: Options | None = None
        self.rig: Rig | None = None
        self.plan: Plan | None = None
        self._stale = True
        self._seq = 0
        self.have: list[tuple[int, str]] = []
        self.yours: float | None = None
        self._narrow: bool | None = None
        """Decode of the current model on the rig in use, at the plan's quant and context (None: does not run)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="plan-inputs"):
            yield Label("min tok/s")
            yield Field(DEFAULT_MIN_TPS, placeholder="any", compact=True, id="plan-min-tps")
            yield Label("budget $")
            yield Field("", placeholder="none", compact=True, id="plan-budget")
            yield Label("min free GiB")
            yield Field("", placeholder="any", compact=True, id="plan-headroom")
        with Horizontal(id="plan-ticks"):
            yield Tick("count GPUs in this rig as owned", True, compact=True, id="plan-have")
            yield Tick("include used prices", False, compact=True, id="plan-used")
        yield Static("", id="plan-error")
        yield Static("", id="plan-status")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="plan-table")
        yield Static("", id="plan-why")
        yield Static("", id="plan-notes")

    def on_mount(self) -> None:
        self._columns()

    @property
    def narrow(self) -> bool:
        return self.app.size.width < NARROW_BELOW

    def _columns(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        self._narrow = self.narrow
        for i, h in enumerate(NARROW_HEADERS if self._narrow else HEADERS):
            if self._narrow and i == 0:
                continue
            width = (BUY_WIDTH_NARROW if self._narrow else BUY_WIDTH_WIDE) if i == 2 else None
            table.add_column(right(h) if i in RIGHT else h, width=width)

    def on_resize(self) -> None:
        if self._narrow is not None and self._narrow != self.narrow and self.plan is not None:
            self._columns()
            self._rows()

    # -- inputs -----------------------------------------------------------------------------------

    def set_target(self, model: ModelSpec, options: Options, rig: Rig | None) -> None:
        """The model, the control panel's options (quant None = auto) and the rig; computed on `refresh_plan`."""
        if (model, options, rig) != (self.model, self.options, self.rig):
            self.model, self.options, self.rig = model, options, rig
            self._stale = True

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _input_changed(self, event: Input.Changed | Checkbox.Changed) -> None:
        event.stop()
        self._stale = True
        self.refresh_plan()

    def _read_inputs(self) -> tuple[float | None, float | None, float | None]:
        min_tps = parse_amount(self.query_one("#plan-min-tps", Input).value, "min tok/s")
        budget = parse_amount(self.query_one("#plan-budget", Input).value, "budget")
        headroom = parse_amount(self.query_one("#plan-headroom", Input).value, "min free GiB")
        return min_tps, budget, headroom

    def refresh_plan(self) -> None:
        if self.model is None or self.options is None or not self._stale:
            return
        error = self.query_one("#plan-error", Static)
        try:
            min_tps, budget, headroom = self._read_inputs()
        except ValueError as exc:
            self._seq += 1  # a plan still on its way is for the old input: drop it
            error.update(f"{exc}; the list below is for the last valid input.")
            error.add_class("-show")
            return
        error.update("")
        error.remove_class("-show")
        self._stale = False
        have, skipped = owned_gpus(self.rig, self.catalog) if self.query_one("#plan-have", Checkbox).value else ([], [])
        used = self.query_one("#plan-used", Checkbox).value
        self._seq += 1
        self.query_one("#plan-status", Static).update(f"Planning for {self.model.name}…")
        self.compute(self._seq, self.model, self.options, min_tps, budget, headroom, have, skipped, used, self.rig)

    # -- the plan ---------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="plan", exit_on_error=False)
    def compute(self, seq: int, model: ModelSpec, options: Options, min_tps: float | None, budget: float | None,
                headroom: float | None, have: list[tuple[int, str]], skipped: list[str], used: bool,
                rig: Rig | None) -> None:
        """`advisor plan` for the current model, off the UI thread, and the same target on the rig in use."""
        ram = int(self.catalog.rules.plan.default_ram_gib * GIB)
        try:
            plan = make_plan(self.catalog, model, options, min_tps=min_tps, budget=budget, have=have,
                             ram_bytes=ram, top=TOP, used=used or None)
        except Exception as exc:  # noqa: BLE001 - an AdvisorError (or worse) is a line in the view, never a crash
            self.app.call_from_thread(self._failed, seq, str(exc))
            return
        if headroom:
            kept = tuple(o for o in plan.options if o.headroom_bytes >= headroom * GIB)
            plan = dataclasses.replace(plan, options=kept)
        yours = None
        if rig is not None and not rig.is_cpu_only:
            try:
                mine = evaluate(self.catalog, rig, model, dataclasses.replace(options, quant=plan.quant.id,
                                                                              ctx=plan.context_tokens))
            except AdvisorError:
                mine = None
            if mine is not None and mine.runs and mine.speed.decode_tokens_per_s:
                yours = mine.speed.decode_tokens_per_s
        self.app.call_from_thread(self.show, seq, plan, have, skipped, yours)

    def _failed(self, seq: int, message: str) -> None:
        if seq != self._seq:
            return
        self._stale = True  # try again on the next change
        self._clear("")
        error = self.query_one("#plan-error", Static)
        error.update(message)
        error.add_class("-show")

    def _clear(self, status: str) -> None:
        self.plan = None
        self.query_one(DataTable).clear()
        for wid, text in (("#plan-status", status), ("#plan-why", ""), ("#plan-notes", "")):
            self.query_one(wid, Static).update(text)

    def target_line(self) -> str:
        plan = self.plan
        if plan is None:
            return ""
        target = f"{plan.model.name} at {plan.quant.id}, {plan.context_tokens:,} context"
        if plan.min_tps:
            target += f", at least {plan.min_tps:g} tok/s"
        if plan.budget_usd:
            target += f", within ${plan.budget_usd:,.0f}"
        return f"Cheapest rigs for {target}"

    def _cells(self, i: int, o: PlanOption, narrow: bool = False) -> list[str]:
        gpus = self.catalog.gpus
        buy = ", ".join(f"{n}× {gpus[g].name}" for n, g in o.new_gpus) or "nothing (what you have)"
        if o.nvlink:
            buy += " + NVLink bridge"
        vs = f"×{o.decode_tokens_per_s / self.yours:.1f}" if self.yours else "—"
        tps, watts = (f"{o.decode_tokens_per_s:,.1f}", f"{o.power_w:,.0f}") if narrow else \
            (f"{o.decode_tokens_per_s:,.1f} tok/s", f"{o.power_w:,.0f} W")
        price = f"${o.price_usd:,.0f}" + ("+?" if o.unpriced_parts else "")  # + a part whose price is not known
        return [f"{i}.", price, buy, tps, vs, f"{o.headroom_bytes / GIB:.1f}", watts,
                f"${o.usd_per_million_tokens:.2f}", "yes" if o.nvlink else "no"]

    def _rows(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for i, o in enumerate(self.plan.options if self.plan else (), 1):
            cells = [right(c) if k in RIGHT else c for k, c in enumerate(self._cells(i, o, self._narrow))]
            table.add_row(*(cells[1:] if self._narrow else cells), key=str(i))
        table.move_cursor(row=0, animate=False)
        table.scroll_home(animate=False)

    def show(self, seq: int, plan: Plan, have: list[tuple[int, str]], skipped: list[str],
             yours: float | None = None) -> None:
        if seq != self._seq:
            return  # a newer request is on its way
        self.yours, self.have = yours, have
        # paid options no faster than the GPUs you count as owned are not worth buying
        slower = [o for o in plan.options if have and yours and o.price_usd > 0 and o.decode_tokens_per_s <= yours]
        plan = dataclasses.replace(plan, options=tuple(o for o in plan.options if o not in slower))
        self.plan = plan
        gpus = self.catalog.gpus
        owned = ", ".join(f"{n}× {gpus[g].name}" for n, g in have)
        status = self.target_line() + (f" (you have: {owned}" + (f", {yours:,.1f} tok/s" if yours else "") + ")"
                                       if owned else "")
        if skipped:
            status += f"; not counted (not in the catalog): {', '.join(skipped)}"
        if slower:
            status += f"; {len(slower)} paid option(s) no faster than your rig left out"
        if not plan.options:
            status += ". Nothing in the catalog reaches this target."
        elif plan.over_budget:
            status += f". Nothing reaches it within ${plan.budget_usd:,.0f}: the cheapest rig that does is shown."
        self.query_one("#plan-status", Static).update(status)

        self._rows()
        self._show_why(0)

        prices = "new/list prices" + (" and used-market prices" if plan.used else "")
        notes = [plan.nvlink_note, *plan.notes,
                 f"{plan.evaluated} rigs evaluated; {prices}; electricity at ${plan.kwh_usd}/kWh ({plan.kwh_basis})."]
        if plan.unpriced:
            more = len(plan.unpriced) - UNPRICED_SHOWN
            used_priced = [g for g in plan.unpriced if gpus[g].price is not None and gpus[g].price.condition == "used"]
            notes.append("Left out for lack of a price: " + ", ".join(plan.unpriced[:UNPRICED_SHOWN])
                         + (f" and {more} more" if more > 0 else "")
                         + (f" ({len(used_priced)} have a used-market price: tick “include used prices”)."
                            if used_priced and not plan.used else "."))
        self.query_one("#plan-notes", Static).update("\n".join(notes))

    @on(DataTable.RowHighlighted, "#plan-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_why(event.cursor_row)

    def _show_why(self, row: int) -> None:
        why = self.query_one("#plan-why", Static)
        if self.plan is None or not 0 <= row < len(self.plan.options):
            why.update("")
            return
        o = self.plan.options[row]
        why.update(f"{row + 1}. {o.why}; prefill {o.prefill_tokens_per_s:,.0f} tok/s; {o.power_w:,.0f} W board power")

    def document(self) -> Doc | None:
        """The options on screen as `advisor plan` prints them (for export), or None before the first plan."""
        return plan_doc(self.plan, self.have) if self.plan is not None else None
