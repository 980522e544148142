"""Modal pickers: a model (fuzzy search over the catalog) and a rig (a preset, or GPUs described)."""

from __future__ import annotations

import dataclasses

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select, Static

from advisor.catalog.types import GIB, Catalog
from advisor.engine.rig import Rig
from advisor.errors import AdvisorError
from advisor.probe.build import build_rig
from advisor.probe.rigfile import rig_toml
from advisor.report.text import gib
from advisor.tui.export import ConfirmOverwrite, free_name, taken, write_atomic
from advisor.tui.rigedit import RAM_PRESETS, edit_rig
from advisor.tui.widgets.field import Field, Tick
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


P2P = (("P2P: unknown", "unknown"), ("P2P works", "yes"), ("no P2P", "no"))
PCIE = ("", "5x16", "4x16", "4x8", "4x4", "3x16", "3x8", "3x4", "3x1")


class RigScreen(ModalScreen[Rig | None]):
    """The whole machine: a rig to start from (this one, this machine, a preset, or a GPU x count with or
    without NVLink), then its PCIe link as installed, P2P, RAM size and bandwidth, machines and network.

    Enter applies from any text field (or picks in the list); ctrl+s saves the rig as a rig file.
    """

    BINDINGS = [Binding("escape", "dismiss(None)", "Close"), Binding("ctrl+s", "save", "Save rig file")]

    def __init__(self, catalog: Catalog, detected: Rig | None = None, current: Rig | None = None) -> None:
        super().__init__()
        self.catalog = catalog
        self.detected = detected
        self.current = current

    def compose(self) -> ComposeResult:
        items = []
        if self.current is not None:
            items.append((f"this rig, as it is: {rig_title(self.current)}", "current"))
        if self.detected is not None:
            items.append((f"this machine: {rig_title(self.detected)}", "detected"))
        items += [(f"preset: {p.name}", f"preset:{i}") for i, p in self.catalog.presets.items()]
        items += [(f"{g.name}  ({gib(g.vram_bytes)})", f"gpu:{i}") for i, g in self.catalog.gpus.items()]
        cur = self.current
        networks = list(self.catalog.rules.interconnect.network.gb_s)
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Rig"
            yield FuzzyPicker(items, placeholder="this rig, a preset or a GPU, e.g. 3090")
            with Horizontal(classes="control"):
                yield Label("count")
                yield Select([(str(n), n) for n in (1, 2, 3, 4, 6, 8)], value=1, allow_blank=False, compact=True,
                             id="count")
                yield Tick("NVLink", id="nvlink", compact=True)
                yield Select([("PCIe as the card", "")] + [(f"PCIe {p[0]}.0 x{p[2:]}", p) for p in PCIE[1:]],
                             value="", allow_blank=False, compact=True, id="pcie")
                yield Select(P2P, value="unknown", allow_blank=False, compact=True, id="p2p")
            with Horizontal(classes="control"):
                yield Label("RAM GiB")
                yield Field("", placeholder=f"{cur.ram_bytes / GIB:g}" if cur else "64", compact=True, id="ram")
                yield Label("GB/s")
                yield Field("", placeholder=f"{cur.ram_bandwidth_gb_s:g} or {RAM_PRESETS[1]}" if cur else RAM_PRESETS[1],
                            compact=True, id="ram-bw")
            with Horizontal(classes="control"):
                yield Label("machines")
                yield Select([(str(n), n) for n in (1, 2, 4)], value=1, allow_blank=False, compact=True, id="nodes")
                yield Select([(n, n) for n in networks], value=networks[1] if len(networks) > 1 else networks[0],
                             allow_blank=False, compact=True, id="network")
            with Horizontal(classes="control"):
                yield Label("save as")
                yield Field("", placeholder="my-rig.toml (ctrl+s)", compact=True, id="save-path")
            yield Static("", id="rig-error", classes="-hidden")
            yield Label("enter applies · ctrl+s saves · esc closes · blank keeps the rig's own · count, NVLink: "
                        f"for a GPU from the list · GB/s: a number or {', '.join(RAM_PRESETS)}", classes="hint")

    def _error(self, text: str) -> None:
        error = self.query_one("#rig-error", Static)
        error.update(text)
        error.display = bool(text)

    def build(self, choice: str | None) -> Rig | None:
        """The rig the dialog describes with `choice` as its start; None (and the reason shown) when it cannot."""
        kind, _, ident = (choice or "").partition(":")
        value = lambda wid: self.query_one(f"#{wid}").value  # noqa: E731
        try:
            if kind == "current" and self.current is not None:
                rig = self.current
            elif kind == "detected" and self.detected is not None:
                rig = self.detected
            elif kind == "preset":
                rig = preset_rig(self.catalog, ident)
            elif kind == "gpu":
                rig = build_rig(self.catalog, gpus=[f"{value('count')}x{ident}"], nvlink=value("nvlink"))
            else:
                self._error("Nothing in the list matches: type a GPU or preset name.")
                return None
            p2p = {"yes": True, "no": False}.get(value("p2p"))
            return edit_rig(rig, pcie=value("pcie"), p2p=p2p, ram_gib=value("ram"), ram_bandwidth=value("ram-bw"),
                            nodes=value("nodes"), network=value("network"))
        except AdvisorError as exc:
            self._error(str(exc))
            return None

    @on(FuzzyPicker.Picked)
    def _picked(self, event: FuzzyPicker.Picked) -> None:
        rig = self.build(event.value)
        if rig is not None:
            self.dismiss(rig)

    @on(Input.Submitted)
    def _enter(self, event: Input.Submitted) -> None:
        """Enter in any field applies what the dialog shows, starting from the highlighted rig."""
        event.stop()
        if event.input.id == "save-path":
            self.action_save()
            return
        rig = self.build(self.query_one(FuzzyPicker).highlighted())
        if rig is not None:
            self.dismiss(rig)

    def action_save(self) -> None:
        rig = self.build(self.query_one(FuzzyPicker).highlighted())
        raw = self.query_one("#save-path", Field).value.strip()
        if rig is None:
            return
        if not raw:
            self._error("Type a file name after “save as”, then ctrl+s.")
            self.query_one("#save-path").focus()
            return
        path = Path(raw).expanduser()
        if not path.suffix:
            path = path.with_suffix(".toml")
        text = rig_toml(rig)

        def write(answer: str | None = "overwrite") -> None:
            target = path if answer == "overwrite" else free_name(path) if answer == "new" else None
            if target is None:
                return
            try:
                write_atomic(target, text)
            except OSError as exc:
                self._error(f"Could not write {target}: {exc.strerror}")
                return
            self._error("")
            self.notify(f"Wrote {target}: advisor --rig {target} opens it", title="Rig saved")

        if taken(path):
            self.app.push_screen(ConfirmOverwrite(path), write)
        else:
            write()
