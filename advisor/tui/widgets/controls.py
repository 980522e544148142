"""The inputs besides model and rig: quant, context, KV cache, runtime, split, concurrency, workload."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Select

from advisor.catalog.types import Catalog
from advisor.engine.options import KV_TYPES, WORKLOADS, Options

AUTO = "auto"
CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
STREAMS = (1, 2, 4, 8, 16, 32, 64)


def _row(label: str, select: Select) -> Horizontal:
    return Horizontal(Label(label), select, classes="control")


class Controls(Vertical):
    """Every Select posts `Select.Changed`; the screen reads `options()` and recomputes."""

    def __init__(self, catalog: Catalog, model_name: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.catalog = catalog
        self.model_name = model_name

    def compose(self) -> ComposeResult:
        yield Horizontal(Label("model"), Button(self.model_name, id="model", compact=True), classes="control")
        yield _row("quant", Select(self._quants(Options().runtime), value=AUTO, allow_blank=False, compact=True, id="quant"))
        yield _row("context", Select([(f"{c // 1024}k", c) for c in CONTEXTS], value=8192, allow_blank=False,
                                     compact=True, id="ctx"))
        # auto: f16, or q8_0 where that fits a better quantization (the advisor's choice, advisor.engine.choice)
        yield _row("KV cache", Select([(AUTO, AUTO)] + [(k, k) for k in KV_TYPES], value=AUTO, allow_blank=False,
                                      compact=True, id="kv"))
        yield _row("runtime", Select([(r, r) for r in self.catalog.runtimes], value=Options().runtime,
                                     allow_blank=False, compact=True, id="runtime"))
        yield _row("split", Select([(AUTO, AUTO), ("layer", "layer"), ("tensor", "tensor")], value=AUTO,
                                   allow_blank=False, compact=True, id="split"))
        yield _row("streams", Select([(str(n), n) for n in STREAMS], value=1, allow_blank=False, compact=True,
                                     id="streams"))
        yield _row("workload", Select([(w, w) for w in WORKLOADS], value="inference", allow_blank=False,
                                      compact=True, id="workload"))

    def _quants(self, runtime: str) -> list[tuple[str, str]]:
        rt = self.catalog.runtimes[runtime]
        ids = [q.id for q in self.catalog.quants.values() if rt.loads(q)]
        return [("auto", AUTO)] + [(q, q) for q in ids]

    def set_model_name(self, name: str) -> None:
        self.query_one("#model", Button).label = name

    def sync_quants(self) -> None:
        """Offer only the quants the chosen runtime loads; keep the choice when it still applies."""
        quant = self.query_one("#quant", Select)
        current = quant.value
        options = self._quants(self.query_one("#runtime", Select).value)
        quant.set_options(options)
        quant.value = current if any(v == current for _, v in options) else AUTO

    def options(self) -> Options:
        value = lambda sel: self.query_one(f"#{sel}", Select).value  # noqa: E731
        quant, split = value("quant"), value("split")
        kv = value("kv")
        return Options(quant=None if quant == AUTO else quant, ctx=value("ctx"),
                       kv_type="f16" if kv == AUTO else kv, kv_fixed=kv != AUTO,
                       runtime=value("runtime"), split=None if split == AUTO else split,
                       concurrency=value("streams"), workload=value("workload"))

    def set_value(self, sel: str, value: object) -> None:
        self.query_one(f"#{sel}", Select).value = value
