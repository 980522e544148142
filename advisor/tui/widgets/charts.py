"""Charts where they say it at a glance: speed against context, and the quality/speed trade-off of the choices.

Both are plotext plots (textual-plotext). The speed curve is the engine asked again at each context
(`advisor.report.curves.speed_curve`, about a second for a long-context model), so it is computed in a
thread worker and drawn when it arrives; the trade-off plots the report's own choices.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from advisor.engine.findings import ktok
from advisor.engine.result import Report
from advisor.report.curves import CurvePoint, speed_curve

ON_GPU, OFFLOADED, PICKED, OTHER = "cyan", "orange", "green", "gray+"


class _Chart(Vertical):
    """A titled block of plots with a note under them, hidden while it has nothing to show."""

    DEFAULT_CSS = """
    _Chart { height: auto; margin-top: 1; display: none; }
    _Chart > PlotextPlot { height: 12; }
    _Chart > .chart-note { color: $text-muted; text-style: italic; }
    """
    TITLE = ""

    def compose(self) -> ComposeResult:
        yield Static(Text(self.TITLE, "bold"))
        yield from self.plots()
        yield Static(classes="chart-note")

    def plots(self) -> ComposeResult:
        yield PlotextPlot()

    def note(self, text: str) -> None:
        self.query_one(".chart-note", Static).update(text)


def _log2_ticks(plt, contexts: list[int]) -> None:
    """x is log2 of the context: a tick per power of two that is charted, labelled as people say it."""
    powers = [n for n in contexts if n & (n - 1) == 0]
    step = max(1, math.ceil(len(powers) / 6))  # about six labels fit a narrow plot
    shown = powers[::step]
    plt.xticks([math.log2(n) for n in shown], [ktok(n) for n in shown])


class SpeedCurve(_Chart):
    """Decode speed and time to first token of this answer's configuration as the context grows."""

    TITLE = "Speed against context"
    points: tuple[CurvePoint, ...] = ()
    """The curve drawn."""
    report: Report | None = None
    """The report it is of: the markdown export takes the curve only for the report shown."""

    def plots(self) -> ComposeResult:
        yield PlotextPlot(id="curve-decode")
        yield PlotextPlot(id="curve-ttft")

    def compute(self, catalog, model, report: Report) -> None:
        """Start the curve for `report` (evaluated on `model`); the old one stays until the new one arrives."""
        self._curve(catalog, model, report)

    @work(thread=True, exclusive=True, group="curve", exit_on_error=False)
    def _curve(self, catalog, model, report: Report) -> None:
        worker = get_current_worker()
        points = speed_curve(catalog, model, report, cancelled=lambda: worker.is_cancelled)
        if not worker.is_cancelled:
            self.app.call_from_thread(self.show, points, report)

    def show(self, points: tuple[CurvePoint, ...], report: Report) -> None:
        self.points, self.report = points, report
        context = report.context_tokens
        self.display = bool(points)
        if not points:
            return
        self._plot("#curve-decode", points, context, "decode tok/s", [p.decode_tokens_per_s for p in points])
        self._plot("#curve-ttft", points, context, "time to first token, s (log scale)", [p.ttft_s for p in points],
                   log=True)
        offloaded = [p for p in points if not p.fits and p.decode_tokens_per_s is not None]
        self.note(f"context across; │ yours ({ktok(context)}); " + ("orange: it no longer fits on the GPUs "
                                                                  "(offloaded)" if offloaded else "all on the GPUs"))

    def _plot(self, selector: str, points, context: int, title: str, values: list[float | None],
              log: bool = False) -> None:
        plot = self.query_one(selector, PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        plt.title(title)
        if log:
            plt.yscale("log")
        shown = [(math.log2(p.context_tokens), v, p.fits) for p, v in zip(points, values) if v is not None]
        on = [(x, y) for x, y, fits in shown if fits]
        off = on[-1:] + [(x, y) for x, y, fits in shown if not fits]  # the line turns orange where it leaves
        for part, color in ((on, ON_GPU), (off, OFFLOADED)):
            if len(part) > 1 or (part and part is on):
                plt.plot([x for x, _ in part], [y for _, y in part], color=color, marker="braille")
        plt.vline(math.log2(context), "gray")
        _log2_ticks(plt, [p.context_tokens for p in points])
        plot.refresh()


class TradeOff(_Chart):
    """The choices as points: decode speed across, quality loss (KL divergence vs 16-bit) up; the pick marked."""

    TITLE = "Quality against speed"

    def show(self, report: Report) -> None:
        pts = [c for c in report.choices if c.decode_tokens_per_s is not None and c.quality_loss is not None]
        self.display = len({c.quant.id for c in pts}) > 1 and report.training is None
        if not self.display:
            return
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        plt.title("quality loss (KLD) against decode tok/s")
        quants = list(dict.fromkeys(c.quant.id for c in pts))  # each quantization's point drawn as its number
        marks = dict(zip(quants, "123456789abcdefghijklmnopqrstuvwxyz"))
        for q in quants:
            mine = [c for c in pts if c.quant.id == q]
            picked = any(c.picked for c in mine)
            plt.scatter([c.decode_tokens_per_s for c in mine], [c.quality_loss for c in mine],
                        color=PICKED if picked else OTHER, marker=marks.get(q, "•"))
        xs = [c.decode_tokens_per_s for c in pts]
        pad = ((max(xs) - min(xs)) or max(xs) or 1.0) * 0.05
        plt.xlim(min(xs) - pad, max(xs) + pad)
        plot.refresh()
        self.marks = marks
        pick = next((c for c in pts if c.picked), None)
        key = "  ".join(f"{m} {q}" for q, m in marks.items())
        self.note(f"{key}\nlower is better, right is faster" + (f"; green: the pick ({pick.kv_type} KV)" if pick else ""))
