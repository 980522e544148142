"""The Choices table (each quantization x KV cache type: largest context, speed, quality loss, where it
lives) at the width the answer column has.

The rows are `advisor.report.text.choices_section`'s, the same the CLI prints. Every cell is shown whole:
when the columns do not fit, the ones the charts and the wider layout carry drop out first (prefill,
then where, then the KV column folds into the quantization's), and a note says which, so an 80-column
terminal reads whole numbers instead of `131,0…` stubs.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from advisor.report.text import Section

DROPS = ("prefill", "where")
"""Dropped in this order when the table is too wide."""
GAP = 1
"""Cells apart (rich's padding (0, 1) on the inner edges only: two spaces between columns)."""


def _width(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> int:
    return sum(max(len(r[i]) for r in (header, *rows)) for i in range(len(header))) + 2 * GAP * (len(header) - 1)


def _without(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...], name: str):
    i = header.index(name)
    return header[:i] + header[i + 1:], tuple(r[:i] + r[i + 1:] for r in rows)


def _folded(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]):
    """quant and KV as one column: `Q4_K_M q8_0`."""
    q, kv = header.index("quant"), header.index("KV")
    rows = tuple(r[:q] + (f"{r[q]} {r[kv]}",) + r[q + 1:kv] + r[kv + 1:] for r in rows)
    return header[:q] + ("quant KV",) + header[q + 1:kv] + header[kv + 1:], rows


def fitted(sec: Section, width: int) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], list[str]]:
    """The columns that fit `width` whole, and the names of those left out."""
    header, rows, left = sec.header, sec.rows, []
    for name in DROPS:
        if _width(header, rows) <= width or name not in header:
            continue
        header, rows = _without(header, rows, name)
        left.append(name)
    if _width(header, rows) > width and "KV" in header:
        header, rows = _folded(header, rows)
    return header, rows, left


class ChoicesView(Static):
    """The trade-off table: its header, the pick in bold, its notes; redrawn when the column's width changes."""

    DEFAULT_CSS = """
    ChoicesView { height: auto; margin-top: 1; }
    """

    section: Section | None = None

    def show(self, sec: Section | None) -> None:
        self.section = sec
        self.display = sec is not None
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        sec = self.section
        if sec is None:
            return
        header, rows, left = fitted(sec, self.content_size.width or 80)
        table = Table(box=None, padding=(0, GAP), show_edge=False, header_style="dim", pad_edge=False)
        for i, name in enumerate(header):
            table.add_column(name, justify="left" if i < 2 or name in ("KV", "where") else "right", no_wrap=True)
        for row in rows:
            table.add_row(*row, style="bold" if row[0] else "")
        notes = [Text(line, "dim italic") for line in sec.lines]
        if left:
            notes.append(Text(f"{' and '.join(left)}: in a wider window, the export or `advisor check`", "dim italic"))
        self.update(Group(Text(sec.title, "bold"), table, *notes))
