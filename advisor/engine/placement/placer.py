"""`Placer`: puts one Scenario on its rig the way the runtime would; `at(ctx)` gives the placement.

The strategies live one module each beside this one (cpu_only, layer_split, tensor_parallel, meta_split,
row_split, staged); base.py holds what they share (capacities, KV cache per layer, per-GPU overhead); this
class picks the strategy the runtime and settings call for.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.placement import cpu_only, layer_split, meta_split, row_split, staged, tensor_parallel
from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import Placement, plain_fit

SPLITTERS = {"meta": meta_split.meta_split, "rows": row_split.row_split}
"""The placement of each kind of split that is not by heads or channels (RuntimeSpec.tensor_split)."""


class Placer(PlacerBase):
    """Places one Scenario on its rig; `at(ctx)` gives the placement."""

    def tensor_refusal(self) -> str:
        """Why the runtime's `--split tensor` refuses this configuration, or "" (placement.meta_split)."""
        return meta_split.tensor_refusal(self)

    def at(self, ctx: int) -> Placement:
        return replace(self._at(ctx), layout=self.layout)

    def _at(self, ctx: int) -> Placement:
        if self.fa_missing:
            return self._refused(ctx, f"{self.runtime.name} needs flash attention for a {self.options.kv_type} "
                                      f"V cache, and it is off here")
        if self.rig.is_cpu_only:
            return cpu_only.cpu_only(self, ctx)
        if self.split == "tensor" and (why := meta_split.tensor_refusal(self)):
            return self._refused(ctx, why)
        if self.runtime.pipeline_split == "even" and (len(self.rig.gpus) > 1 or self.options.cpu_offload_gb):
            return staged.staged(self, ctx)
        explicit = self.options.n_gpu_layers is not None or self.options.cpu_expert_layers is not None
        if len(self.rig.gpus) > 1 and self.split in ("tensor", "row"):
            placement = replace(SPLITTERS.get(self.split_kind, tensor_parallel.tensor_parallel)(self, ctx), split_kind=self.split_kind)
        elif explicit:  # the layers and experts the command line put where it put them
            ngl = self.model.layers + 1 if self.options.n_gpu_layers is None else self.options.n_gpu_layers
            return self._runs_or_not(layer_split.layers(self, ctx, min(ngl, self.model.layers + 1),
                                                  frozenset(self.options.cpu_expert_layers or ())))
        else:
            placement = layer_split.layers(self, ctx, self.model.layers + 1)
        if placement.fits or placement.problem:
            return placement
        return layer_split.offload(self, ctx)

    @property
    def context_limit(self) -> str:
        """What `max_context` measures: `fits` (fully on the GPUs), or `runs` where that is the question (no GPU,
        or a placement the command line fixed with -ngl or -ot: the largest context that still runs so)."""
        explicit = self.options.n_gpu_layers is not None or self.options.cpu_expert_layers is not None
        return "runs" if self.rig.is_cpu_only or explicit else "fits"

    def max_context(self) -> int:
        """The largest context (multiple of 256, up to the model's maximum) that still fits fully with the
        runtime's fit margin left on every GPU (a context that is only "tight" is not offered: `plain_fit`), or
        that still runs where `context_limit` says so."""
        limit = self.model.max_context
        ok = (lambda p: p.runs) if self.context_limit == "runs" else (lambda p: plain_fit(p, self.runtime))
        if not ok(self.at(256)):
            return 0
        if ok(self.at(limit)):
            return limit
        lo, hi = 1, limit // 256
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(self.at(mid * 256)):
                lo = mid
            else:
                hi = mid - 1
        return lo * 256
