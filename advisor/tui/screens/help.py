"""`?` or F1: what each tab answers and the keys that work there. Esc (or ? / F1 again) closes it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from advisor.engine.optiontable import CONTROLS

# (group, what it is for, [(keys, what they do)]): the app's own help, tab by tab.
HELP = (
    ("Everywhere", "The rig is on top; the tabs below answer for it.", (
        ("c  f  p", "Check, Fit and Plan tabs"),
        ("m", "pick a model (type to search, enter picks)"),
        ("r", "rig dialog: a preset, this machine, or GPUs, PCIe, P2P, NVLink, RAM, nodes described"),
        ("e  E", "export what this tab shows, as Markdown / JSON, to a new file (asks before overwriting)"),
        ("? F1", "this help"),
        ("esc", "leave a text field, close a dialog or this help"),
        ("ctrl+p", "command palette: every action, model and preset by name"),
        ("q", "quit"),
    )),
    ("Check", "One model on this rig: the verdict, memory per GPU, speed, the NVLink verdict, findings.", (
        ("tab", f"move through {', '.join(d.widget.label for d in CONTROLS)}"),
        ("enter", "open a choice list; enter again picks"),
        ("", "max context = the largest context with everything on the GPUs; an offloaded run "
             "has none and runs at the context chosen here"),
    )),
    ("Fit", "Every catalog model on this rig with the best quantization that fits, best first.", (
        ("/", "search by name, live; enter goes back to the table, esc leaves the field"),
        ("s  S", "sort by the next column / reverse the order (or click a header)"),
        ("tab", "filters: fits on GPUs / with offload / all, dense or MoE, minimum tok/s and context"),
        ("enter", "open the highlighted model in Check"),
        ("", "runs on: GPU(s), experts in RAM (MoE experts offloaded), layers in RAM, CPU"),
    )),
    ("Plan", "What to buy: the cheapest rigs for this model at a minimum speed.", (
        ("tab", "min tok/s, budget, min headroom, count this rig as owned, used prices"),
        ("space", "tick or untick a checkbox (✓ when ticked)"),
        ("↑ ↓", "move through the options; the line below says why each one"),
    )),
)


def help_text() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(ratio=1)
    for group, about, keys in HELP:
        grid.add_row(Text(group, "bold underline"), Text(about, "italic"))
        for k, what in keys:
            grid.add_row(k, what)
        grid.add_row("", "")
    return grid


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("question_mark", "dismiss", "Close", show=False),
                Binding("f1", "dismiss", "Close", show=False)]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="help") as box:
            box.border_title = "advisor: help (esc closes)"
            yield Static(help_text())
