"""What to buy: the cheapest rigs that run the current model at a target speed, as `advisor plan` lists them.

The screen hands in the target (`set_target`: model, options, rig) whenever it changes and calls
`refresh_plan` when the tab is shown; the view's own inputs (minimum tok/s, budget, "count this
rig as owned", "used prices") recompute it at once. `make_plan` runs in a thread worker (about a
tenth of a second); a result that arrives after a newer request is dropped.
"""

from __future__ import annotations

import math
from collections import Counter

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Checkbox, DataTable, Input, Label, Static

from advisor.catalog.types import GIB, Catalog, ModelSpec
from advisor.engine.options import Options
from advisor.engine.plan import Plan, make_plan
from advisor.engine.rig import Rig
from advisor.report.document import Doc
from advisor.report.plan import plan_doc

DEFAULT_MIN_TPS = "10"
TOP = 5
UNPRICED_SHOWN = 12


def right(text: str) -> Text:
    return Text(text, justify="right")


def parse_amount(text: str, what: str) -> float | None:
    """'' -> None; '1,500' or '$1500' -> 1500.0; anything else that is not a positive number -> ValueError."""
    raw = text.strip().replace(",", "").replace("_", "").lstrip("$").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{what}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what}: {text.strip()!r} must be a positive number")
    return value


def owned_gpus(rig: Rig | None, catalog: Catalog) -> tuple[list[tuple[int, str]], list[str]]:
    """The rig's GPUs as make_plan's `have` ((count, id), in rig order), and the names left out (not in the catalog)."""
    if rig is None or rig.is_cpu_only:
        return [], []
    counts = Counter(g.spec.id for g in rig.gpus if g.spec.id in catalog.gpus)
    skipped = [g.spec.name for g in rig.gpus if g.spec.id not in catalog.gpus]
    return [(n, gid) for gid, n in counts.items()], skipped


class PlanView(Vertical):
    """Inputs on top, then the target line, the options table (cheapest first) and the notes."""

    BINDINGS = [Binding("escape", "leave_inputs", "Done", show=False)]

    def __init__(self, catalog: Catalog, **kwargs) -> None:
        super().__init__(**kwargs)
        self.catalog = catalog
        self.model: ModelSpec | None = None
        self.options: Options | None = None
        self.rig: Rig | None = None
        self.plan: Plan | None = None
        self.have: list[tuple[int, str]] = []
        self._stale = True
        self._seq = 0

    def compose(self) -> ComposeResult:
        with Horizontal(id="plan-inputs"):
            yield Label("min tok/s")
            yield Input(DEFAULT_MIN_TPS, placeholder="any", compact=True, id="plan-min-tps")
            yield Label("budget $")
            yield Input("", placeholder="none", compact=True, id="plan-budget")
            yield Checkbox("count GPUs in this rig as owned", True, compact=True, id="plan-have")
            yield Checkbox("include used prices", False, compact=True, id="plan-used")
        yield Static("", id="plan-error")
        yield Static("", id="plan-status")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="plan-table")
        yield Static("", id="plan-why")
        yield Static("", id="plan-notes")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("#", right("price"), "what to buy", right("decode"), right("headroom"),
                                              right("power"), right("$/M tok"), "NVLink")

    def action_leave_inputs(self) -> None:
        """Escape from a text box hands the keys back to the app (q, m, r, ...) by focusing the table."""
        self.query_one(DataTable).focus()

    # -- inputs -----------------------------------------------------------------------------------

    def set_target(self, model: ModelSpec, options: Options, rig: Rig | None) -> None:
        """The model, the control panel's options (quant None = auto) and the rig; computed on `refresh_plan`."""
        self.model, self.options, self.rig = model, options, rig
        self._stale = True

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _input_changed(self, event: Input.Changed | Checkbox.Changed) -> None:
        event.stop()
        self._stale = True
        self.refresh_plan()

    def _read_inputs(self) -> tuple[float | None, float | None]:
        min_tps = parse_amount(self.query_one("#plan-min-tps", Input).value, "min tok/s")
        budget = parse_amount(self.query_one("#plan-budget", Input).value, "budget")
        return min_tps, budget

    def refresh_plan(self) -> None:
        if self.model is None or self.options is None or not self._stale:
            return
        error = self.query_one("#plan-error", Static)
        try:
            min_tps, budget = self._read_inputs()
        except ValueError as exc:
            self._seq += 1  # a plan still on its way is for the old input: drop it
            error.update(str(exc))
            error.add_class("-show")
            self._clear("Fix the input above to plan.")
            return
        error.update("")
        error.remove_class("-show")
        self._stale = False
        have, skipped = owned_gpus(self.rig, self.catalog) if self.query_one("#plan-have", Checkbox).value else ([], [])
        used = self.query_one("#plan-used", Checkbox).value
        self._seq += 1
        self.query_one("#plan-status", Static).update(f"Planning for {self.model.name}…")
        self.compute(self._seq, self.model, self.options, min_tps, budget, have, skipped, used)

    # -- the plan ---------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="plan", exit_on_error=False)
    def compute(self, seq: int, model: ModelSpec, options: Options, min_tps: float | None, budget: float | None,
                have: list[tuple[int, str]], skipped: list[str], used: bool) -> None:
        """`advisor plan` for the current model, off the UI thread."""
        ram = int(self.catalog.rules.plan.default_ram_gib * GIB)
        try:
            plan = make_plan(self.catalog, model, options, min_tps=min_tps, budget=budget, have=have,
                             ram_bytes=ram, top=TOP, used=used)
        except Exception as exc:  # noqa: BLE001 - an AdvisorError (or worse) is a line in the view, never a crash
            self.app.call_from_thread(self._failed, seq, str(exc))
            return
        self.app.call_from_thread(self.show, seq, plan, have, skipped)

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

    def show(self, seq: int, plan: Plan, have: list[tuple[int, str]], skipped: list[str]) -> None:
        if seq != self._seq:
            return  # a newer request is on its way
        self.plan = plan
        self.have = have
        gpus = self.catalog.gpus
        target = f"{plan.model.name} at {plan.quant.id}, {plan.context_tokens:,} context"
        if plan.min_tps:
            target += f", at least {plan.min_tps:g} tok/s"
        if plan.budget_usd:
            target += f", within ${plan.budget_usd:,.0f}"
        owned = ", ".join(f"{n}× {gpus[g].name}" for n, g in have)
        status = f"Cheapest rigs for {target}" + (f" (you have: {owned})" if owned else "")
        if skipped:
            status += f"; not counted (not in the catalog): {', '.join(skipped)}"
        if not plan.options:
            status += ". Nothing in the catalog reaches this target" + (" within the budget." if plan.budget_usd else ".")
        self.query_one("#plan-status", Static).update(status)

        table = self.query_one(DataTable)
        table.clear()
        for i, o in enumerate(plan.options, 1):
            buy = ", ".join(f"{n}× {gpus[g].name}" for n, g in o.new_gpus) or "nothing (what you have)"
            if o.nvlink:
                buy += " + NVLink bridge"
            table.add_row(right(f"{i}."), right(f"${o.price_usd:,.0f}"), buy,
                          right(f"{o.decode_tokens_per_s:,.1f} tok/s"), right(f"{o.headroom_bytes / GIB:.1f} GiB"),
                          right(f"{o.power_w:,.0f} W"), right(f"${o.usd_per_million_tokens:.2f}"),
                          "yes" if o.nvlink else "no", key=str(i))
        self._show_why(0)

        prices = "new/list prices" + (" and used-market prices" if plan.used else "")
        notes = [plan.nvlink_note,
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
        """The plan on screen as `advisor plan` prints it (for export), or None before the first plan."""
        return plan_doc(self.plan, self.have) if self.plan is not None else None
