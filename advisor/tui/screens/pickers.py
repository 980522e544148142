"""Modal pickers: a model (fuzzy search over the catalog) and a rig (a preset, or GPUs described)."""

from __future__ import annotations

import dataclasses

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Label, Select, Static

from advisor.catalog.types import Catalog
from advisor.engine.rig import Rig
from advisor.errors import AdvisorError
from advisor.probe.build import build_rig
from advisor.report.text import gib
from advisor.tui.widgets.picker import FuzzyPicker
from advisor.tui.widgets.rig import rig_title


def preset_rig(catalog: Catalog, preset_id: str) -> Rig:
    """A catalog preset (`hardware_db/presets.toml`) as a Rig."""
    p = catalog.presets[preset_id]
    rig = build_rig(catalog, gpus=list(p.gpus), nvlink=p.nvlink, ram=str(p.ram_gib))
    return dataclasses.replace(rig, source="preset")


class ModelScreen(ModalScreen[str | None]):
    """Pick a model; dismisses with its id (or None on escape)."""

    BINDINGS = [("escape", "dismiss(None)", "Close")]

    def __init__(self, catalog: Catalog) -> None:
        super().__init__()
        self.catalog = catalog

    def compose(self) -> ComposeResult:
        items = [(f"{m.name}  ({m.id}, {m.params_total / 1e9:.1f}B)", m.id) for m in self.catalog.models.values()]
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Model"
            yield FuzzyPicker(items, placeholder="model name or id, e.g. llama 70b")
            yield Label("type to filter · ↑↓ move · enter pick · esc close", classes="hint")

    @on(FuzzyPicker.Picked)
    def _picked(self, event: FuzzyPicker.Picked) -> None:
        self.dismiss(event.value)


class RigScreen(ModalScreen[Rig | None]):
    """Pick a preset rig, go back to this machine, or describe one: a GPU, how many, NVLink or not."""

    BINDINGS = [("escape", "dismiss(None)", "Close")]

    def __init__(self, catalog: Catalog, detected: Rig | None = None) -> None:
        super().__init__()
        self.catalog = catalog
        self.detected = detected

    def compose(self) -> ComposeResult:
        items = []
        if self.detected is not None:
            items.append((f"this machine: {rig_title(self.detected)}", "detected"))
        items += [(f"preset: {p.name}", f"preset:{i}") for i, p in self.catalog.presets.items()]
        items += [(f"{g.name}  ({gib(g.vram_bytes)})", f"gpu:{i}") for i, g in self.catalog.gpus.items()]
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Rig"
            yield FuzzyPicker(items, placeholder="preset or GPU, e.g. 3090")
            with Horizontal(classes="control"):
                yield Label("count")
                yield Select([(str(n), n) for n in (1, 2, 3, 4, 6, 8)], value=1, allow_blank=False, compact=True,
                             id="count")
                yield Checkbox("NVLink", id="nvlink", compact=True)
            yield Static("", id="rig-error")
            yield Label("preset, or GPU × count · enter pick · esc close", classes="hint")

    @on(FuzzyPicker.Picked)
    def _picked(self, event: FuzzyPicker.Picked) -> None:
        kind, _, ident = event.value.partition(":")
        try:
            if kind == "detected":
                rig = self.detected
            elif kind == "preset":
                rig = preset_rig(self.catalog, ident)
            else:
                count = self.query_one("#count", Select).value
                rig = build_rig(self.catalog, gpus=[f"{count}x{ident}"], nvlink=self.query_one(Checkbox).value)
        except AdvisorError as exc:
            self.query_one("#rig-error", Static).update(str(exc))
            return
        self.dismiss(rig)
