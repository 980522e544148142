"""What runs here: every catalog model with the best quant that fits, ranked as `advisor fit` ranks.

A table people work in: `/` narrows it live by name, `s` (or a click on a header) sorts by a
column, the filter row keeps what fits fully, runs with offload, dense or MoE, fast or long enough.
Each row's run mode (GPU, experts in RAM, layers in RAM, CPU) is the engine's placement strategy,
read from its report, never recomputed here.
"""

from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Select, Static

from advisor.engine.rank import TIER_WORDS, Ranked
from advisor.engine.strategies import words_of
from advisor.tui.widgets.field import Field, parse_amount

# Quality tiers (advisor.engine.rank.TIER_WORDS) in at most 9 columns, for 80-column terminals.
TIER_SHORT = ("≈lossless", "good", "usable", "steep", "no fit")

# Which rows the fit-level filter keeps: (label, test on the engine's report).
LEVELS: dict[str, tuple[str, Callable]] = {
    "runs": ("runs here", lambda r: r.runs),
    "fits": ("fits on GPUs", lambda r: r.fits),
    "offload": ("with offload", lambda r: r.runs and not r.fits),
    "all": ("all models", lambda r: True),
}
KINDS: dict[str, tuple[str, Callable]] = {
    "any": ("dense+MoE", lambda m: True),
    "dense": ("dense", lambda m: not m.is_moe),
    "moe": ("MoE", lambda m: m.is_moe),
}
MIN_CONTEXTS = (0, 4096, 8192, 16384, 32768, 65536, 131072)


def right(text: str) -> Text:
    return Text(text, justify="right")


def _tps(x: float | None) -> str:
    return f"{x:,.1f}" if x else "—"


def _pp(x: float | None, narrow: bool) -> str:
    """Prefill tok/s; at 80 columns in thousands past 1,000 (12.8k, 136k)."""
    if not x:
        return "—"
    if narrow and x >= 1000:
        return f"{x / 1000:.{0 if x >= 99950 else 1}f}k"
    return f"{x:,.0f}"


def _ctx_short(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 else (str(n) if n else "—")


class Column:
    """One column: its key, headers (wide, narrow), the value it sorts and exports by, and its cell."""

    def __init__(self, key: str, wide: str, narrow: str, value: Callable[[Ranked], object],
                 cell: Callable[[Ranked, bool], str], numeric: bool = False, width: tuple[int, int] | None = None):
        self.key, self.wide, self.narrow, self.value, self.cell = key, wide, narrow, value, cell
        self.numeric, self.width = numeric, width

    def text(self, x: Ranked, narrow: bool) -> Text | str:
        s = self.cell(x, narrow)
        return right(s) if self.numeric else s


def _quality(x: Ranked, narrow: bool) -> str:
    if x.report.rig.is_cpu_only:
        return "CPU only" if not narrow else "CPU"
    if x.report.runs and not x.report.fits:
        return "—"  # the engine grades quality for what fits on the GPUs; "runs on" says where the rest goes
    return (TIER_SHORT if narrow else TIER_WORDS)[x.tier] if x.report.runs else ("no" if narrow else "does not run")


def _max_ctx(x: Ranked, narrow: bool) -> str:
    """The largest context with everything on the GPUs; offloaded runs say so instead of 'none'."""
    r = x.report
    if r.max_context_tokens:
        return _ctx_short(r.max_context_tokens) if narrow else f"{r.max_context_tokens:,}"
    if r.runs and not narrow:
        return "offloaded"
    return "—"  # at 80 columns the line under the table says what it means for an offloaded run


COLUMNS = (
    Column("model", "model", "model", lambda x: x.model.name.lower(), lambda x, n: x.model.name, width=(30, 13)),
    Column("params", "params", "size", lambda x: x.model.params_total,
           lambda x, n: f"{x.model.params_total / 1e9:.{0 if n and x.model.params_total >= 1e10 else 1}f}B",
           numeric=True),
    Column("quant", "quant", "quant", lambda x: x.report.quant.bits_per_weight,
           lambda x, n: x.report.quant.id if x.report.runs else "—"),
    Column("quality", "quality", "quality", lambda x: x.tier, _quality),
    Column("decode", "decode tok/s", "tok/s", lambda x: x.report.speed.decode_tokens_per_s or 0,
           lambda x, n: _tps(x.report.speed.decode_tokens_per_s) if x.report.runs else "—", numeric=True),
    Column("prefill", "prefill tok/s", "pp/s", lambda x: x.report.speed.prefill_tokens_per_s or 0,
           lambda x, n: _pp(x.report.speed.prefill_tokens_per_s, n) if x.report.runs else "—", numeric=True),
    Column("max_context", "max context", "ctx", lambda x: x.report.max_context_tokens, _max_ctx, numeric=True),
    Column("run_mode", "run mode", "runs on", lambda x: words_of(x.report.placement.strategy).run_mode,
           lambda x, n: words_of(x.report.placement.strategy).run_mode),
)
BY_KEY = {c.key: c for c in COLUMNS}
# `s` cycles through these sort orders; "rank" is `advisor fit`'s order (best first).
SORTS = ("rank", "decode", "params", "max_context", "prefill", "quant", "model")
DESCENDING = {"decode", "params", "max_context", "prefill", "quant"}
NARROW_BELOW = 120


class FitView(Vertical):
    """Filters and search on top, the table, then the selected row in words; Enter opens it in Check."""

    BINDINGS = [
        Binding("slash", "search", "Search"),
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse", "Reverse", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ranked: list[Ranked] = []
        self.shown: list[Ranked] = []
        self.sort_key = "rank"
        self.reverse = False
        self.what = ""
        self._narrow: bool | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="fit-filters"):
            yield Select([(label, k) for k, (label, _) in LEVELS.items()], value="runs", allow_blank=False,
                         compact=True, id="fit-level")
            yield Select([(label, k) for k, (label, _) in KINDS.items()], value="any", allow_blank=False,
                         compact=True, id="fit-kind")
            yield Label("≥tok/s")
            yield Field("", placeholder="any", compact=True, id="fit-min-tps")
            yield Label("ctx≥")
            yield Select([("any" if c == 0 else _ctx_short(c), c) for c in MIN_CONTEXTS], value=0,
                         allow_blank=False, compact=True, id="fit-min-ctx")
        yield Field("", placeholder="search: type part of a name (esc leaves, enter goes to the table)",
                    compact=True, id="fit-search")
        yield Static("", id="fit-status")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="fit-table")
        yield Static("", id="fit-detail")

    def on_mount(self) -> None:
        self._columns()

    # -- layout -----------------------------------------------------------------------------------

    @property
    def narrow(self) -> bool:
        return self.app.size.width < NARROW_BELOW

    def _columns(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        self._narrow = self.narrow
        for c in COLUMNS:
            label = c.narrow if self._narrow else c.wide
            if c.key == self.sort_key:
                label += " ▲" if (c.key in DESCENDING) == self.reverse else " ▼"
            width = None if c.width is None else c.width[1 if self._narrow else 0]
            table.add_column(right(label) if c.numeric else label, key=c.key, width=width)

    def on_resize(self) -> None:
        if self._narrow is not None and self._narrow != self.narrow:
            self._fill()

    # -- data ---------------------------------------------------------------------------------------

    def show_status(self, text: str) -> None:
        self.query_one("#fit-status", Static).update(text)

    def show(self, ranked: list[Ranked], what: str) -> None:
        """`ranked` is `advisor.engine.rank.rank_models` output, best first."""
        self.ranked, self.what = ranked, what
        self._fill()

    def filters(self) -> tuple[Callable[[Ranked], bool], str | None]:
        """The rows the filter row and the search keep, and the error of a bad minimum (None when fine)."""
        level = LEVELS[self.query_one("#fit-level", Select).value][1]
        kind = KINDS[self.query_one("#fit-kind", Select).value][1]
        min_ctx = self.query_one("#fit-min-ctx", Select).value
        error = None
        try:
            min_tps = parse_amount(self.query_one("#fit-min-tps", Field).value, "min tok/s") or 0
        except ValueError as exc:
            min_tps, error = 0, str(exc)
        words = self.query_one("#fit-search", Field).value.lower().split()

        def keep(x: Ranked) -> bool:
            r = x.report
            hay = " ".join((x.model.name, x.model.id, *x.model.aliases)).lower()
            return (level(r) and kind(x.model) and (r.speed.decode_tokens_per_s or 0) >= min_tps
                    and (not min_ctx or r.max_context_tokens >= min_ctx or (not r.fits and r.runs
                                                                             and r.context_tokens >= min_ctx))
                    and all(w in hay for w in words))

        return keep, error

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        self._columns()
        keep, error = self.filters()
        rows = [x for x in self.ranked if keep(x)]
        if self.sort_key != "rank":
            col = BY_KEY[self.sort_key]
            rows.sort(key=col.value, reverse=(self.sort_key in DESCENDING) != self.reverse)
        elif self.reverse:
            rows.reverse()
        self.shown = rows
        narrow = self._narrow
        for x in rows:
            table.add_row(*(c.text(x, narrow) for c in COLUMNS), key=x.model.id)
        table.move_cursor(row=0, animate=False)
        table.scroll_home(animate=False)
        self._status(error)
        self._detail()

    def _status(self, error: str | None) -> None:
        if not self.ranked:
            return
        cpu = self.ranked[0].report.rig.is_cpu_only
        n_fit = sum(x.report.fits for x in self.ranked)
        n_run = sum(x.report.runs for x in self.ranked)
        sort = "best first" if self.sort_key == "rank" else f"by {BY_KEY[self.sort_key].wide}"
        head = (f"No GPU: {n_run} of {len(self.ranked)} run from system RAM" if cpu else
                f"{n_fit} of {len(self.ranked)} fit fully, {n_run - n_fit} more with offload")
        text = f"{head}; showing {len(self.shown)}, {sort} ({self.what})."
        if error:
            text = f"{error}. " + text
        self.show_status(text)

    def selected(self) -> Ranked | None:
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def _detail(self) -> None:
        """The highlighted row in the engine's words (its note), with what max context means."""
        x = self.selected()
        detail = self.query_one("#fit-detail", Static)
        if x is None:
            detail.update("Nothing matches: change the filters or the search (esc, then / to edit it)."
                          if self.ranked else "")
            return
        r = x.report
        line = f"{x.model.name}: {x.note}."
        if r.runs and not r.fits:
            line += f" Max context is for all-on-GPU runs; this one runs at the {r.context_tokens:,} set in Check."
        detail.update(line + " Enter opens it in Check.")

    # -- interaction --------------------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#fit-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()

    @on(DataTable.HeaderSelected, "#fit-table")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if key == self.sort_key:
            self.reverse = not self.reverse
        else:
            self.sort_key, self.reverse = key, False
        self._fill()

    @on(Select.Changed)
    @on(Input.Changed)
    def _filter_changed(self, event: Select.Changed | Input.Changed) -> None:
        event.stop()
        if self.ranked:
            self._fill()

    @on(Input.Submitted, "#fit-search")
    def _search_done(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(DataTable).focus()

    def action_search(self) -> None:
        self.query_one("#fit-search", Field).focus()

    def action_sort(self) -> None:
        self.sort_key = SORTS[(SORTS.index(self.sort_key) + 1) % len(SORTS)]
        self.reverse = False
        self._fill()
        self.app.notify(f"Sorted {'best first' if self.sort_key == 'rank' else 'by ' + BY_KEY[self.sort_key].wide}",
                        timeout=1.5)

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self._fill()
