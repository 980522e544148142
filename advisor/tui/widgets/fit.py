"""What runs here: every catalog model with the best quant that fits, best first."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from advisor.engine.result import Report
from advisor.report.text import STRATEGY_WORDS, rate


def right(text: str) -> Text:
    return Text(text, justify="right")


def rank(r: Report) -> tuple:
    """Best first: 4+ bits per weight before heavier compression, then the larger model, then speed."""
    return (r.quant.bits_per_weight >= 4, r.model.params_total, r.speed.decode_tokens_per_s or 0.0)


class FitView(Vertical):
    """A status line and a table; enter on a row opens that model in the Check tab."""

    def compose(self) -> ComposeResult:
        yield Static("", id="fit-status")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="fit-table")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("model", "params", "quant", "decode", "prefill", "max context",
                                              "placement")

    def show_busy(self) -> None:
        self.query_one("#fit-status", Static).update("Evaluating every catalog model with quant auto…")

    def show(self, reports: list[Report], total: int, what: str) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for r in sorted(reports, key=rank, reverse=True):
            table.add_row(r.model.name, right(f"{r.model.params_total / 1e9:.1f}B"), r.quant.id,
                          right(rate(r.speed.decode_tokens_per_s)),
                          right(f"{r.speed.prefill_tokens_per_s or 0:,.0f} tok/s"), right(f"{r.max_context_tokens:,}"),
                          STRATEGY_WORDS.get(r.placement.strategy, r.placement.strategy), key=r.model.id)
        self.query_one("#fit-status", Static).update(
            f"{len(reports)} of {total} models fit fully ({what}). Best first: 4+ bits per weight, then larger, "
            f"then faster. Enter opens one.")
