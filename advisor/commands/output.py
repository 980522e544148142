"""The one place commands write their answer: the format asked for, stdout for data, the exit codes.

stdout is data (text, markdown or JSON); diagnostics go to stderr (`advisor.cli.main`). Exit codes
are API: 0 yes, 1 no, 2 bad input (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys

from advisor.errors import terminal_safe
from advisor.report.document import Doc, fenced, render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXIT_YES, EXIT_NO, EXIT_USAGE, EXIT_INTERRUPT = 0, 1, 2, 130


def fmt_of(args: argparse.Namespace) -> str:
    """`text`, `markdown` or `json` (`--json` is `--format json`)."""
    return "json" if getattr(args, "json", False) else (getattr(args, "format", None) or "text")


def emit(text: str) -> None:
    text = terminal_safe(text, keep_color=sys.stdout.isatty())  # names read from files cannot drive the terminal
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def say(line: str) -> None:
    """One line on stderr (a diagnostic, a warning beside JSON), if there is a stderr to write to."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def emit_json(obj: Any) -> None:
    emit(json.dumps(obj, indent=2, ensure_ascii=False))


def emit_doc(args: argparse.Namespace, doc: Doc) -> None:
    fmt = fmt_of(args)
    emit(wrapped(doc.text) if fmt == "text" else render(doc, fmt))


def emit_text(args: argparse.Namespace, title: str, text: str) -> None:
    """Plain text wrapped to the terminal, or for --format markdown the same under a heading in a fenced block."""
    emit(fenced(title, text) if fmt_of(args) == "markdown" else wrapped(text))


def wrapped(text: str) -> str:
    """Text for a terminal: every line wrapped to its width (80 columns in a pipe; `COLUMNS` honoured)."""
    from advisor.report.wrap import terminal_width, wrap_text

    return wrap_text(text, terminal_width())
