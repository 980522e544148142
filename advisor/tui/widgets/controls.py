"""The inputs besides model and rig, one Select per option the option table gives a control
(advisor/engine/optiontable.py CONTROLS: quant, context, KV cache, runtime, split, streams, workload)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Select

from advisor.catalog.types import Catalog
from advisor.engine.options import Options
from advisor.engine.optiontable import CONTROLS, default_of, options_changes

AUTO = "auto"


def _row(label: str, select: Select) -> Horizontal:
    return Horizontal(Label(label), select, classes="control")


def _label(value: object) -> str:
    """A whole number of 1024s as `8k`, as the parser reads it; anything else as itself."""
    return f"{value // 1024}k" if isinstance(value, int) and value >= 1024 and value % 1024 == 0 else str(value)


class Controls(Vertical):
    """Every Select posts `Select.Changed`; the screen reads `options()` and recomputes."""

    def __init__(self, catalog: Catalog, model_name: str, initial: dict[str, object] | None = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.catalog = catalog
        self.model_name = model_name
        self.initial = initial or {}
        """Values to open on, by control id (a recorded checkpoint's runtime and quant); the rest as the table says."""

    def compose(self) -> ComposeResult:
        yield Horizontal(Label("model"), Button(self.model_name, id="model", compact=True), classes="control")
        runtime = self.initial.get("runtime", Options().runtime)
        for d in CONTROLS:
            w = d.widget
            first = AUTO if w.auto else (w.initial if w.initial is not None else default_of(d))
            yield _row(w.label, Select(self._values(d, runtime), value=self.initial.get(w.id, first),
                                       allow_blank=False, compact=True, id=w.id))

    def _values(self, d, runtime: str) -> list[tuple[str, object]]:
        """The entries of option `d`'s Select: `auto` first where it has one, then its presets, its choices, or
        the catalog's quants the runtime loads / runtimes."""
        w = d.widget
        if w.from_catalog == "quants":
            rt = self.catalog.runtimes[runtime]
            values: tuple = tuple(q.id for q in self.catalog.quants.values() if rt.loads(q))
        elif w.from_catalog == "runtimes":
            values = tuple(self.catalog.runtimes)
        else:
            values = w.presets or d.choices
        return ([(AUTO, AUTO)] if w.auto else []) + [(_label(v), v) for v in values]

    def set_model_name(self, name: str) -> None:
        self.query_one("#model", Button).label = name

    def sync_quants(self) -> None:
        """Offer only the quants the chosen runtime loads; keep the choice when it still applies."""
        quant = self.query_one("#quant", Select)
        current = quant.value
        choice = next(d for d in CONTROLS if d.widget.id == "quant")
        options = self._values(choice, self.query_one("#runtime", Select).value)
        quant.set_options(options)
        quant.value = current if any(v == current for _, v in options) else AUTO

    def options(self) -> Options:
        """The Options the controls say, through the same mapping as the command line's (an `auto` is not given)."""
        given = {}
        for d in CONTROLS:
            value = self.query_one(f"#{d.widget.id}", Select).value
            if not (d.widget.auto and value == AUTO):
                given[d.dest] = value
        return Options(**options_changes("check", lambda d: given.get(d.dest)))

    def set_value(self, sel: str, value: object) -> None:
        self.query_one(f"#{sel}", Select).value = value
