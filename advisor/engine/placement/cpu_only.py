"""No GPU: everything in system RAM."""

from __future__ import annotations

from advisor.engine.placement.base import PlacerBase
from advisor.engine.placement.records import DeviceUse, Placement


def cpu_only(p: PlacerBase, ctx: int) -> Placement:
    kv = sum(p._kv(ctx))
    host = DeviceUse("cpu", p.rig.cpu or "system RAM", p.layout.total_bytes, kv,
                     p._overhead(ctx, True) + p._vision_on_host(), p.host_cap,
                     p.model.layers, expert_bytes=sum(p.layout.expert_bytes))
    runs = host.fits
    return Placement("cpu_only", (), host, fits=False, runs=runs, gpu_layers=0,
                     problem="" if runs else "the weights and KV cache do not fit in system RAM")
