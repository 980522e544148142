"""The advisor's terminal app: the rig, the model, the options and the engine's answer on one screen.

Every change of input re-runs `evaluate` at once (a few ms). Slow things run in thread workers:
GPU detection (the probe callable), the Fit view (every catalog model) and the Plan view (what to
buy: the plan runs in the view's own worker), so first paint never waits on NVML.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Select, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from advisor.catalog.types import Catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.rank import rank_key, rank_models
from advisor.engine.result import Report
from advisor.engine.rig import Rig
from advisor.errors import AdvisorError
from advisor.probe.build import build_rig
from advisor.probe.types import Detection
from advisor.report.document import render
from advisor.report.fit import fit_doc
from advisor.tui.commands import AdvisorCommands
from advisor.tui.export import ConfirmOverwrite, as_text, free_name, taken, write_atomic
from advisor.tui.screens.help import HelpScreen
from advisor.tui.screens.pickers import ModelScreen, RigScreen, preset_rig
from advisor.tui.widgets.answer import Answer
from advisor.tui.widgets.charts import SpeedCurve
from advisor.tui.widgets.controls import Controls
from advisor.tui.widgets.fit import FitView
from advisor.tui.widgets.plan import PlanView
from advisor.tui.widgets.rig import RigPanel

Probe = Callable[[], Detection]
DEFAULT_MODEL = "llama-3.1-8b"


def _default_probe() -> Detection:
    from advisor.probe import detect

    return detect()


class MainScreen(Screen[None]):
    """The one screen: rig on top, then tabs (Check: controls and answer; Fit: what runs here; Plan: what to buy)."""

    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("f1", "help", "Help", show=False),
        Binding("m", "pick_model", "Model"),
        Binding("r", "pick_rig", "Rig"),
        Binding("c", "show_tab('check')", "Check"),
        Binding("f", "show_tab('fit')", "Fit"),
        Binding("p", "show_tab('plan')", "Plan"),
        Binding("e", "export('md')", "Export md"),
        Binding("E", "export('json')", "json"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, catalog: Catalog, model_id: str, rig: Rig | None, probe: Probe,
                 ram: str | None = None, empty: bool = False, loaded=None, initial: dict | None = None) -> None:
        super().__init__()
        self.catalog = catalog
        self.model_id = model_id
        self.initial = initial
        """Control values to open on (`Controls.initial`)."""
        self.loaded = loaded
        """A model read from its own file (advisor.engine.loaded.LoadedModel), or None."""
        self.rig = rig
        self.detected: Rig | None = None
        self.probe = probe
        self.ram, self.empty = ram, empty
        self.report: Report | None = None
        self._fit_stale = True
        self._inputs: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="banner")
        yield RigPanel(id="rig")
        with TabbedContent(initial="check"):
            with TabPane("Check", id="check"):
                yield Controls(self.catalog, self.catalog.models[self.model_id].name, self.initial, id="controls")
                yield Answer(id="answer")
            with TabPane("Fit: what runs here", id="fit"):
                yield FitView(id="fitview")
            with TabPane("Plan: what to buy", id="plan"):
                yield PlanView(self.catalog, id="planview")
        yield Footer()

    def on_mount(self) -> None:
        if self.rig is None:
            self.query_one(RigPanel).show_detecting()
            self.query_one(Answer).show_message("Detecting GPUs…")
            self.detect_rig()
        else:
            self.set_rig(self.rig)

    # -- inputs -------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="detect", exit_on_error=False)
    def detect_rig(self) -> None:
        try:
            detection = self.probe()
        except Exception as exc:  # noqa: BLE001 - a probe failure is a banner, never a crash
            detection = Detection(source="none", warnings=(f"GPU detection failed: {exc}",))
        try:
            rig = build_rig(self.catalog, ram=self.ram, empty=self.empty, detection=detection)
        except Exception as exc:  # noqa: BLE001 - e.g. a bad --ram: still open, on the CPU-only rig
            rig = build_rig(self.catalog, detection=Detection(source="none", warnings=(str(exc),)))
        self.app.call_from_thread(self._detected, rig)

    def _detected(self, rig: Rig) -> None:
        self.detected = rig
        self.set_rig(rig)

    def set_rig(self, rig: Rig) -> None:
        self.rig = rig
        self.query_one(RigPanel).show(rig)
        banner = self.query_one("#banner", Static)
        why = "; ".join(w.split(" Hint:")[0].rstrip(".") for w in rig.warnings)
        if rig.is_cpu_only:
            banner.update(f"No GPU found{f': {why}' if why else ''}. Showing the CPU-only rig: "
                          "press r to pick a preset rig or describe one.")
        else:
            banner.update(why)
        banner.set_class(rig.is_cpu_only or bool(why), "-show")
        self.recompute()

    def set_model(self, model_id: str) -> None:
        self.model_id = model_id
        self.query_one(Controls).set_model_name(self.catalog.models[model_id].name)
        self.recompute()

    def set_control(self, control: str, value: object) -> None:
        self.query_one(Controls).set_value(control, value)

    def pick_preset(self, preset_id: str) -> None:
        try:
            self.set_rig(preset_rig(self.catalog, preset_id))
        except AdvisorError as exc:
            self.notify(str(exc), severity="error")

    @on(Select.Changed)
    def _control_changed(self, event: Select.Changed) -> None:
        if event.select.id == "runtime":
            self.query_one(Controls).sync_quants()
        self.recompute()

    @on(Button.Pressed, "#model")
    def _model_button(self) -> None:
        self.action_pick_model()

    # -- the answer -----------------------------------------------------------------------------

    def options(self) -> Options:
        return self.query_one(Controls).options()

    def recompute(self) -> None:
        """Evaluate the model on the rig with the current options, and show it (or why not)."""
        answer = self.query_one(Answer)
        inputs = (self.rig, self.model_id, self.options())
        if self.rig is None or inputs == self._inputs:
            return  # Selects announce their first value on mount: nothing changed
        self._inputs = inputs
        try:
            model = self.loaded if self.loaded is not None and self.loaded.spec.id == self.model_id \
                else self.catalog.models[self.model_id]
            self.report = self._calibrated(evaluate(self.catalog, self.rig, model, self.options()))
        except AdvisorError as exc:
            self.report = None
            answer.show_message(str(exc), error=True)
        else:
            answer.show(self.report)
            answer.curve(self.catalog, model, self.report)
        self._fit_stale = True
        self._refresh_active()

    _calibration: object = False
    """This machine's calibration from `advisor verify` runs (advisor/measure/store.py), read once; False: not yet."""

    def _calibrated(self, report: Report) -> Report:
        """The answer with this rig's calibration, as `advisor check` shows it (a store that cannot be read:
        a notice, and the plain model)."""
        from advisor.engine.calibration import apply

        if self._calibration is False:
            from advisor.measure.store import load_calibration

            self._calibration = load_calibration(warn=lambda line: self.notify(line, severity="warning"))
        return apply(report, self._calibration)  # type: ignore[arg-type]

    def _refresh_active(self) -> None:
        """Bring the Fit or Plan tab up to date when it is the one shown (the others wait until shown)."""
        active = self.query_one(TabbedContent).active
        if active == "fit":
            self.refresh_fit()
        elif active == "plan":
            self.refresh_plan()

    def refresh_fit(self) -> None:
        if self.rig is None or not self._fit_stale:
            return
        self._fit_stale = False
        self.query_one(FitView).show_status("Evaluating every catalog model with quant auto…")
        self.compute_fit(self.rig, self.options())

    def refresh_plan(self) -> None:
        if self.rig is None:
            return
        plan = self.query_one(PlanView)
        plan.set_target(self.catalog.models[self.model_id], self.options(), self.rig)
        plan.refresh_plan()

    @work(thread=True, exclusive=True, group="fit", exit_on_error=False)
    def compute_fit(self, rig: Rig, options: Options) -> None:
        """`advisor fit` on this rig, off the UI thread (every catalog model: about half a second)."""
        view = self.query_one(FitView)
        try:
            ranked = rank_models(self.catalog, rig, options)
        except AdvisorError as exc:
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(view.show_status, str(exc))
            return
        what = f"quant auto, {options.ctx // 1024}k context, {options.kv_type} KV, {options.runtime}"
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(view.show, ranked, what)

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        self._refresh_active()

    @on(DataTable.RowSelected, "#fit-table")
    def _fit_row(self, event: DataTable.RowSelected) -> None:
        self.set_model(str(event.row_key.value))
        self.action_show_tab("check")

    def palette_commands(self, with_catalog: bool) -> list[tuple[str, Callable[[], object], str]]:
        """What the command palette (ctrl+p) offers on this screen; with the catalog, every model and preset."""
        out: list[tuple[str, Callable[[], object], str]] = [
            ("Pick model…", self.action_pick_model, "fuzzy search over the catalog (m)"),
            ("Pick rig…", self.action_pick_rig, "a preset, this machine, or GPUs described (r)"),
            ("Export as Markdown", partial(self.action_export, "md"), "what this tab shows, as advisor-*.md here (e)"),
            ("Export as JSON", partial(self.action_export, "json"), "what this tab shows, as advisor-*.json here (E)"),
            ("Show check view", partial(self.action_show_tab, "check"), "one model on this rig (c)"),
            ("Show fit view", partial(self.action_show_tab, "fit"), "every model that fits here, best first (f)"),
            ("Show plan view", partial(self.action_show_tab, "plan"), "what to buy: the cheapest rigs for this model (p)"),
            ("Help", self.action_help, "the keys of each tab (? or F1)"),
            ("Quant: auto", partial(self.set_control, "quant", "auto"), "the best quality that fits"),
        ]
        if with_catalog:
            cat = self.catalog
            out += [(f"Rig: {p.name}", partial(self.pick_preset, i), "preset rig") for i, p in cat.presets.items()]
            out += [(f"Model: {m.name}", partial(self.set_model, m.id), m.id) for m in cat.models.values()]
        return out

    # -- actions ----------------------------------------------------------------------------------

    def action_pick_model(self) -> None:
        self.app.push_screen(ModelScreen(self.catalog), lambda mid: mid and self.set_model(mid))

    def action_pick_rig(self) -> None:
        self.app.push_screen(RigScreen(self.catalog, self.detected, self.rig), lambda rig: rig and self.set_rig(rig))

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        # focus follows the tab (a focused widget on a hidden tab would pull its tab back)
        self.query_one({"check": "#model", "fit": "#fit-table", "plan": "#plan-table"}[tab]).focus()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def _export_content(self, tab: str, fmt: str) -> tuple[str, str] | None:
        """What the tab shows as (file stem, text), or None when it shows nothing yet. Fit's rows and Plan's
        options are written as `advisor fit --all` / `advisor plan` print them (one document, report/)."""
        if tab == "fit":
            view = self.query_one(FitView)
            if not view.ranked:
                return None
            doc = fit_doc(view.shown, self.rig, self.options().runtime, show_all=True,
                          key=rank_key(self.catalog.rules, self.rig.is_cpu_only))
            return "advisor-fit", render(doc, "json" if fmt == "json" else "markdown")
        if tab == "plan":
            doc = self.query_one(PlanView).document()
            if doc is None:
                return None
            return f"advisor-plan-{self.model_id}", render(doc, "json" if fmt == "json" else "markdown")
        if self.report is None:
            return None
        from advisor.report.curves import curve_markdown
        from advisor.report.jsonout import check_json
        from advisor.report.text import render_markdown

        curve = self.query_one(SpeedCurve)  # its chart as mermaid and a table, once drawn for this answer
        extra = "\n" + curve_markdown(curve.points) if curve.report is self.report and curve.points else ""
        text = as_text(fmt, render_markdown(self.report) + extra, check_json(self.report))
        return f"advisor-{self.report.model.id}", text

    def action_export(self, fmt: str) -> None:
        tab = self.query_one(TabbedContent).active
        content = self._export_content(tab, fmt)
        if content is None:
            self.notify("Nothing to export: this tab has no answer yet.", severity="warning")
            return
        stem, text = content
        path = Path.cwd() / f"{stem}.{fmt}"
        if not taken(path):
            self._write(path, text)
            return

        def chosen(answer: str | None) -> None:
            if answer == "overwrite":
                self._write(path, text)
            elif answer == "new":
                self._write(free_name(path), text)

        self.app.push_screen(ConfirmOverwrite(path), chosen)

    def _write(self, path: Path, text: str) -> None:
        try:
            write_atomic(path, text)
        except OSError as exc:
            self.notify(f"Could not write {path}: {exc.strerror}", severity="error")
            return
        self.notify(f"Wrote {path}", title="Exported")


class AdvisorApp(App[None]):
    """`AdvisorApp(catalog, model, rig=None, probe=detect)`: with no rig, the probe runs in a worker. `initial`: control
    values to open on, by control id (`advisor.commands.args.recorded_controls`)."""

    TITLE = "advisor"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {AdvisorCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    def __init__(self, catalog: Catalog, model: str | None = None, rig: Rig | None = None,
                 probe: Probe | None = None, ram: str | None = None, empty: bool = False, loaded=None,
                 initial: dict | None = None) -> None:
        super().__init__()
        if loaded is not None:  # a model file: it joins the catalog under its own id
            catalog = dataclasses.replace(catalog, models={**catalog.models, loaded.spec.id: loaded.spec})
            model = loaded.spec.id
        model = model or (DEFAULT_MODEL if DEFAULT_MODEL in catalog.models else next(iter(catalog.models)))
        self._main = MainScreen(catalog, model, rig, probe or _default_probe, ram=ram, empty=empty, loaded=loaded,
                                initial=initial)

    def get_default_screen(self) -> Screen:
        return self._main
