"""A text field that says how to leave it: Esc hands the keys back to the app's shortcuts.

While a field has focus every letter is typed into it (the app's one-letter shortcuts are
ordinary bindings, which a focused Input takes first); the footer shows `esc Leave field`.
"""

from __future__ import annotations

import math

from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Checkbox, DataTable, Input


class Field(Input):
    BINDINGS = [Binding("escape", "leave", "Leave field")]

    def action_leave(self) -> None:
        """Focus the table of the view this field belongs to (Fit, Plan), or nothing (then Esc closes a dialog)."""
        for node in self.ancestors:
            if isinstance(node, Screen) or not isinstance(node, Widget):
                break
            tables = node.query(DataTable)
            if tables:
                tables.first().focus()
                return
        self.screen.set_focus(None)


def parse_amount(text: str, what: str) -> float | None:
    """'' -> None; '1,500' or '$1500' -> 1500.0; anything else that is not a positive number -> ValueError."""
    raw = text.strip().replace(",", "").replace("_", "").lstrip("$").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{what}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what}: {text.strip()!r} must be a positive number")
    return value


class Tick(Checkbox):
    """A checkbox that reads without colour: ✓ when ticked, blank when not."""

    @property
    def _button(self):  # noqa: ANN202 - textual's own (private) render hook
        self.BUTTON_INNER = "✓" if self.value else " "
        return super()._button
