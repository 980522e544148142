"""`Scenario`: one question resolved once — which model, at which quantization, on which runtime and rig,
with which settings and context — and handed as one value to every stage of the engine.

Before it, eight inputs (placement, rig, model, quant, runtime, rules, options, ctx) were threaded by hand
through the engine in three argument orders, and a what-if rebuilt from them could silently drop one (a
model file's own tensor layout, say). A Scenario is frozen: a stage that asks "and with a q8_0 cache?"
derives a new one with `with_options`, which keeps everything else, the layout included.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine import memory as mem
from advisor.engine.options import Options
from advisor.engine.rig import Rig
from advisor.record import Record, record


@record
class Scenario(Record):
    """What is evaluated: the resolved inputs of one answer."""

    model: ModelSpec
    quant: QuantSpec
    runtime: RuntimeSpec
    rig: Rig
    options: Options
    """The effective settings (the runtime's defaults and the automatic choice's KV type applied)."""
    rules: Rulebook
    ctx: int
    """Context tokens the answer allocates for (the asked context, capped at the model's maximum)."""
    layout: mem.WeightsLayout
    """Where the weight bytes sit: a model file's real tensors, or the catalog's bits per weight."""
    file_layout: bool = False
    """`layout` was read from the model's own files."""

    @classmethod
    def of(cls, model: ModelSpec, quant: QuantSpec, runtime: RuntimeSpec, rig: Rig, options: Options,
           rules: Rulebook) -> Scenario:
        """A scenario from the catalog's estimate of the weights, at the asked context."""
        from advisor.engine.options import DEFAULT_CTX

        ctx = min(options.ctx or DEFAULT_CTX, model.max_context)
        return cls(model, quant, runtime, rig, options, rules, ctx, mem.weights_layout(model, quant))

    def derive(self, quant: QuantSpec | None = None, ctx: int | None = None, **options) -> Scenario:
        """The same scenario at another quantization (with the catalog's layout for it; the same quantization
        keeps its layout, so a model file's own bytes stay), context, or settings; one new value either way
        (the automatic choice derives thousands)."""
        changes: dict = {}
        if quant is not None and quant is not self.quant and quant.id != self.quant.id:
            changes.update(quant=quant, layout=mem.weights_layout(self.model, quant), file_layout=False)
        if ctx is not None:
            changes["ctx"] = ctx
        if options:
            changes["options"] = replace(self.options, **options)
        return self._copy(changes) if changes else self

    def with_rules(self, rules: Rulebook) -> Scenario:
        """The same scenario under another rulebook (bench/calibrate.py asks for one per row for every rulebook it
        tries: millions)."""
        return self._copy({"rules": rules})

    def _copy(self, changes: dict) -> Scenario:
        """A copy with `changes`, built without dataclasses.replace's field-by-field construction: the engine
        derives thousands of scenarios per answer. The fields stay frozen (Record.__setattr__)."""
        new = object.__new__(Scenario)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def with_options(self, **changes) -> Scenario:
        """The same scenario with some settings changed (layout, quantization and context kept)."""
        return self.derive(**changes)

    def with_quant(self, quant: QuantSpec) -> Scenario:
        """The same scenario at another quantization (see `derive`)."""
        return self.derive(quant=quant)

    def at_context(self, ctx: int) -> Scenario:
        return self.derive(ctx=ctx)
