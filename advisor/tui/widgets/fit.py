"""What runs here: every catalog model with the best quant that fits, ranked as `advisor fit` ranks."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from advisor.engine.rank import TIER_WORDS, Ranked
from advisor.report.document import Doc
from advisor.report.text import STRATEGY_WORDS, rate


def right(text: str) -> Text:
    return Text(text, justify="right")


class FitView(Vertical):
    """A status line and a table; enter on a row opens that model in the Check tab."""

    def compose(self) -> ComposeResult:
        yield Static("", id="fit-status")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="fit-table")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("model", "params", "quant", "quality", "decode", "prefill",
                                              "max context", "placement")

    def show_status(self, text: str) -> None:
        self.query_one("#fit-status", Static).update(text)

    doc: Doc | None = None
    """The list on screen as `advisor fit` prints it (for export)."""

    def show(self, ranked: list[Ranked], what: str, doc: Doc | None = None) -> None:
        """`ranked` is `advisor.engine.rank.rank_models` output, best first; rows are those that fit."""
        self.doc = doc
        table = self.query_one(DataTable)
        table.clear()
        cpu = bool(ranked) and ranked[0].report.rig.is_cpu_only
        fits = [x for x in ranked if (x.report.runs if cpu else x.report.fits)]  # no GPU: what runs from RAM
        for x in fits:
            r = x.report
            quality = "CPU only" if cpu else TIER_WORDS[x.tier]
            table.add_row(r.model.name, right(f"{r.model.params_total / 1e9:.1f}B"), r.quant.id, quality,
                          right(rate(r.speed.decode_tokens_per_s)),
                          right(f"{r.speed.prefill_tokens_per_s or 0:,.0f} tok/s"), right(f"{r.max_context_tokens:,}"),
                          STRATEGY_WORDS.get(r.placement.strategy, r.placement.strategy), key=r.model.id)
        if cpu:
            self.show_status(f"No GPU: {len(fits)} of {len(ranked)} models run from system RAM ({what}). Best first: "
                             f"the biggest at reading speed. Enter opens one; r picks a rig with GPUs.")
        else:
            self.show_status(f"{len(fits)} of {len(ranked)} models fit fully ({what}). Best first: quality that "
                             f"fits, then size, then speed. Enter opens one.")
