"""A document every front end renders the same way: a title, its text, its markdown and its JSON.

`advisor fit|plan --format text|markdown|json` and the app's export print the same `Doc`, built once
by `advisor.report.fit.fit_doc` / `advisor.report.plan.plan_doc`.
"""

from __future__ import annotations

import json

from advisor.record import Record, record
from advisor.report.wrap import table_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@record
class Doc(Record):
    title: str
    """What the document answers, e.g. `advisor plan llama-3.1-70b`."""
    text: str
    """For a terminal."""
    markdown: str
    """For a file or an issue."""
    data: Any
    """The same answer as JSON-able data (the contract's shape)."""


def render(doc: Doc, fmt: str) -> str:
    """`text`, `markdown` or `json`, ending in one newline."""
    out = json.dumps(doc.data, indent=2, ensure_ascii=False) if fmt == "json" else \
        doc.markdown if fmt == "markdown" else doc.text
    return out if out.endswith("\n") else out + "\n"


def fenced(title: str, text: str) -> str:
    """Plain text for markdown: under a heading, in a fenced block."""
    return f"## {title}\n\n```\n{text.rstrip()}\n```"


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool = False,
                 width: int | None = None) -> str:
    """Columns for a terminal (first and last left-aligned, numbers right-aligned; with `width`, text columns
    wrap to fit it), or a markdown table."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows])
    last = len(header) - 1
    return "\n".join(table_lines([header, *rows], tuple(0 < i < last for i in range(len(header))), width, indent=0))
