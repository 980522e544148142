"""The answer: the verdict, a stacked memory bar per device, and the report's own sections.

The words and numbers come from `advisor.report.text.document()`, the same sections the CLI
prints; only the memory table becomes bars here.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from advisor.engine.placement import DeviceUse
from advisor.engine.result import Report
from advisor.catalog.types import GIB
from advisor.report.text import Section, document, gib, headline, max_context_words, rate
from advisor.tui.widgets.charts import SpeedCurve, TradeOff
from advisor.tui.widgets.choices import ChoicesView

def key_figures(r: Report) -> Text:
    """The answer at a glance, one line: speed, largest context, NVLink verdict (training: memory per
    GPU, throughput, sharding)."""
    out = Text()
    if r.training is not None:
        t = r.training
        figures = (("per GPU", f"{gib(t.per_gpu_bytes)} of {gib(t.capacity_bytes)}"),
                   ("training", f"{t.tokens_per_s:,.0f} tok/s" if t.tokens_per_s else "—"),
                   ("NVLink", r.interconnect.nvlink.replace("_", " ")))
    else:
        figures = (("decode", rate(r.speed.decode_tokens_per_s)), ("prefill", rate(r.speed.prefill_tokens_per_s)),
                   max_context_words(r, "max context", offload_label="context"), ("NVLink", r.interconnect.nvlink.replace("_", " ")))
    for label, value in figures:
        if out:
            out.append("  ·  ", "dim")
        out.append(f"{label} ", "dim").append(value, "bold")
    return out


class MemoryBars(Widget):
    """One stacked bar per GPU (and system RAM when it holds part of the model)."""

    DEFAULT_CSS = """
    MemoryBars { height: auto; }
    MemoryBars > .memory-bars--weights { color: $primary; }
    MemoryBars > .memory-bars--kv { color: $success; }
    MemoryBars > .memory-bars--overhead { color: $warning; }
    MemoryBars > .memory-bars--free { color: $foreground 25%; }
    MemoryBars > .memory-bars--over { color: $error; }
    MemoryBars > .memory-bars--label { text-style: bold; }
    """
    COMPONENT_CLASSES = {"memory-bars--weights", "memory-bars--kv", "memory-bars--overhead",
                         "memory-bars--free", "memory-bars--over", "memory-bars--label"}

    report: reactive[Report | None] = reactive(None, layout=True)

    def _styles(self) -> dict[str, object]:
        return {k: self.get_component_rich_style(f"memory-bars--{k}")
                for k in ("weights", "kv", "overhead", "free", "over", "label")}

    def render(self) -> Text:
        r = self.report
        if r is None:
            return Text("")
        st = self._styles()
        devices = list(r.placement.devices)
        if r.placement.host.total_bytes:
            devices.append(r.placement.host)
        width = max(self.size.width, 20)
        out = Text()
        for d in devices:
            out.append_text(self._label(d, width, st))
            out.append("\n")
            out.append_text(self._bar(d, width, st))
            out.append("\n")
        legend = Text()
        for key, name in (("weights", "weights"), ("kv", "KV cache"), ("overhead", "overhead")):
            legend.append("█ ", st[key]).append(f"{name}  ")
        legend.append("░ ", st["free"]).append("free")
        out.append_text(legend)
        return out

    @staticmethod
    def _label(d: DeviceUse, width: int, st: dict) -> Text:
        free = d.capacity_bytes - d.total_bytes
        right = f"{d.total_bytes / GIB:.1f} / {gib(d.capacity_bytes)} · " + (
            f"{free / GIB:.1f} free" if free >= 0 else f"over by {gib(-free)}")
        left = Text(d.device, st["label"])
        if left.cell_len + len(d.name) + len(right) + 3 <= width:
            left.append(f" {d.name}")
        pad = max(width - left.cell_len - len(right), 1)
        return left.append(" " * pad).append(right, st["over"] if free < 0 else "")

    @staticmethod
    def _bar(d: DeviceUse, width: int, st: dict) -> Text:
        parts = [(d.weights_bytes, st["weights"]), (d.kv_cache_bytes, st["kv"]), (d.overhead_bytes, st["overhead"])]
        scale = max(d.capacity_bytes, d.total_bytes, 1)
        cap_cell = round(d.capacity_bytes / scale * width)
        bar = Text()
        start, acc = 0, 0
        for size, style in parts:
            acc += size
            end = round(acc / scale * width)
            for cell in range(start, end):
                bar.append("█", st["over"] if cell >= cap_cell else style)
            start = end
        bar.append("░" * max(cap_cell - start, 0), st["free"])
        return bar


class SectionView(Static):
    """One `document()` section: a title, key/value rows (or findings), and its notes."""

    DEFAULT_CSS = """
    SectionView { height: auto; margin-top: 1; }
    """

    def show(self, sec: Section | None) -> None:
        self.display = sec is not None
        if sec is None:
            return
        table = Table.grid(padding=(0, 2))
        if sec.title == "Findings":
            tone = {"info": "dim", "warning": "yellow", "error": "bold red"}
            table.add_column(no_wrap=True)
            table.add_column(ratio=1)
            for code, sev, msg in sec.rows:
                table.add_row(Text(code, tone.get(sev, "")), msg)
            if not sec.rows:
                table.add_row("none", "")
        elif sec.header:  # a table of its own (the trade-off table): its header, the pick in bold
            table = Table(box=None, padding=(0, 1), show_edge=False, header_style="dim")
            for i, name in enumerate(sec.header):
                table.add_column(name, justify="left" if i < 3 or i == len(sec.header) - 1 else "right",
                                 no_wrap=True)
            for row in sec.rows:
                table.add_row(*row, style="bold" if row[0] else "")
        else:
            table.add_column(style="dim", no_wrap=False, max_width=34)
            table.add_column(ratio=1)
            for key, value in sec.rows:
                table.add_row(key, value)
        notes = [Text(line, "dim italic") for line in sec.lines]
        self.update(Group(Text(sec.title, "bold"), table, *notes))


class Answer(VerticalScroll):
    """Everything the engine said about this model on this rig."""

    def compose(self) -> ComposeResult:
        yield Static(id="verdict")
        yield Static(id="figures")
        yield Static(id="problem")
        yield MemoryBars()
        with Horizontal(id="answer-grid"):
            with Vertical(classes="answer-col"):
                yield SectionView(id="sec-answer")
                # shown once the report's document() has them (issue 17's choices, issues 14/15's launch command)
                yield ChoicesView(id="sec-choices")
                yield TradeOff(id="chart-tradeoff")
                yield SectionView(id="sec-launch")
                yield SectionView(id="sec-speed")
                yield SpeedCurve(id="chart-speed")
                yield SectionView(id="sec-training")
            with Vertical(classes="answer-col"):
                yield SectionView(id="sec-interconnect")
                yield SectionView(id="sec-findings")

    def show_message(self, text: str, error: bool = False) -> None:
        """No report: say why (detecting, or the engine refused the input)."""
        verdict = self.query_one("#verdict", Static)
        verdict.update(text)
        verdict.set_classes("-error" if error else "-waiting")
        self.query_one("#figures", Static).display = False
        self.query_one("#problem", Static).display = False
        self.query_one(MemoryBars).display = False
        self.query_one("#answer-grid").display = False

    def show(self, r: Report) -> None:
        verdict = self.query_one("#verdict", Static)
        verdict.update(headline(r))
        verdict.set_classes("-fits" if r.fits else ("-offload" if r.runs else "-norun"))
        figures = self.query_one("#figures", Static)
        figures.update(key_figures(r))
        figures.display = True
        problem = self.query_one("#problem", Static)
        problem.update(r.placement.problem)
        problem.display = bool(r.placement.problem)
        bars = self.query_one(MemoryBars)
        bars.report = r
        bars.display = r.training is None  # the bars show the inference placement
        self.query_one("#answer-grid").display = True
        secs = {s.title.split(" ")[0].lower(): s for s in document(r)}
        for key in ("answer", "choices", "launch", "speed", "training", "interconnect", "findings"):
            self.query_one(f"#sec-{key}", SectionView | ChoicesView).show(secs.get("run" if key == "launch" else key))
        self.query_one(TradeOff).show(r)
        self.scroll_home(animate=False)  # a new answer starts at its verdict

    def curve(self, catalog, model, r: Report) -> None:
        """Start the speed-against-context chart for `r` (evaluated on `model`): a worker asks the engine again."""
        self.query_one(SpeedCurve).compute(catalog, model, r)
