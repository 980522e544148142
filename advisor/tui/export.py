"""Writing what a tab shows to a file: Markdown or JSON, atomically, never over a file unasked.

`free_name` finds the next unused name (`advisor-fit.md`, `advisor-fit-2.md`, ...); the screen asks
before it writes over anything already there (`taken`: a dangling symlink too), with `ConfirmOverwrite`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


def as_text(fmt: str, markdown: str, data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n" if fmt == "json" else markdown.rstrip("\n") + "\n"


def taken(path: Path) -> bool:
    """Something is at `path`: a file, a folder, or a symbolic link, even one whose target is gone
    (`Path.exists` follows the link and says no; writing would then replace the link unasked)."""
    return os.path.lexists(path)


def free_name(path: Path) -> Path:
    """`path` if nothing is there, else the first `stem-N.suffix` that is free."""
    n = 2
    out = path
    while taken(out):
        out = path.with_name(f"{path.stem}-{n}{path.suffix}")
        n += 1
    return out


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over: a reader never sees half a file,
    and a file replaced keeps its permissions (advisor.files.replace_file; OSError on failure)."""
    from advisor.files import replace_file

    replace_file(path, text.encode("utf-8"))


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
