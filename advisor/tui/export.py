"""Writing what a tab shows to a file: Markdown or JSON, atomically, never over a file unasked.

`free_name` finds the next unused name (`advisor-fit.md`, `advisor-fit-2.md`, ...); the screen asks
before it writes over an existing file (`ConfirmOverwrite`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


def as_text(fmt: str, markdown: str, data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n" if fmt == "json" else markdown.rstrip("\n") + "\n"


def free_name(path: Path) -> Path:
    """`path` if nothing is there, else the first `stem-N.suffix` that is free."""
    n = 2
    out = path
    while out.exists():
        out = path.with_name(f"{path.stem}-{n}{path.suffix}")
        n += 1
    return out


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ConfirmOverwrite(ModalScreen[str | None]):
    """`path` exists: `o` overwrites it, `n` writes to the next free name, Esc writes nothing."""

    BINDINGS = [Binding("o", "dismiss('overwrite')", "Overwrite"), Binding("n", "dismiss('new')", "New name"),
                Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Export"
            yield Static(f"{self.path.name} already exists here.")
            yield Label(f"o overwrite it · n write {free_name(self.path).name} · esc cancel", classes="hint")
