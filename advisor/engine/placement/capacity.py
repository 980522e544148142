"""How much memory each device lets a runtime use, and whether flash attention is on."""

from __future__ import annotations

from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import GIB, RuntimeSpec
from advisor.engine import memory as mem
from advisor.engine.options import Options
from advisor.engine.rig import Rig, gpu_backend


def rig_capacities(rig: Rig) -> list[int]:
    """Each GPU's memory as the runtime reads it (the card's total, or what was free when detected)."""
    return [g.capacity_bytes for g in rig.gpus]


def usable_capacity(rig: Rig, runtime: RuntimeSpec, rules: Rulebook, fraction: float | None = None) -> list[int]:
    """Per GPU: the memory the runtime may use (`fraction` replaces the runtime's own reservation). A
    runtime whose fraction is of the memory free at start (`fraction_of_free`) takes its CUDA context
    off the card before the fraction."""
    caps = []
    for g in rig.gpus:
        cap = g.capacity_bytes
        if not g.spec.unified_memory and g.capacity_basis == "total":
            cap -= int(rules.memory.discrete_gpu.reserved_mib(g.spec.id, g.spec.vendor, g.spec.category) * mem.MIB)
        if g.spec.unified_memory:
            if g.spec.vendor == "apple":
                cap = mem.apple_working_set(cap, rules)
            else:
                uni = rules.memory.unified
                table = uni.os_reserve_gib_linux if rig.node(g.node).os == "linux" else {}
                reserve = table.get(g.spec.id, uni.os_reserve_gib.get(g.spec.id, os_reserve_gib(cap, rules)))
                cap = max(cap - int(reserve * GIB), 0)
        share = fraction or runtime.gpu_memory_utilization
        if runtime.fraction_of_free and not g.spec.unified_memory:
            cap -= mem.context_bytes(runtime)
            if rig.nvlink and len(rig.gpus) > 1:
                cap -= int(runtime.context_mib_nvlink * mem.MIB)
            cap = max(cap, 0)
        if share:
            cap = int(cap * share)
        caps.append(cap)
    return caps


def os_reserve_gib(ram_bytes: int, rules: Rulebook) -> float:
    """System RAM the OS keeps, GiB: a headless OS's on machines small enough to be run headless (8 GB
    single-board computers), a desktop session's above (rules/memory.toml [host])."""
    host = rules.memory.host
    return host.headless_reserve_gib if ram_bytes <= host.headless_max_ram_gib * GIB else host.os_reserve_gib


def host_capacity(rig: Rig, rules: Rulebook) -> int:
    """System RAM a runtime may fill (on unified memory what the GPU holds comes out of the same RAM)."""
    return max(rig.ram_bytes - int(os_reserve_gib(rig.ram_bytes, rules) * GIB), 0)


def flash_attention_on(runtime: RuntimeSpec, rig: Rig, options: Options) -> bool:
    """Whether flash attention is on: as asked, or under `auto` where every device's backend runs it
    (the runtime declares which: rules/runtimes.toml flash_attention_backends)."""
    if options.flash_attn in ("on", "off"):
        return options.flash_attn == "on"
    backends = {gpu_backend(g.spec) for g in rig.gpus} or {"cpu"}
    return bool(runtime.flash_attention_backends) and backends <= set(runtime.flash_attention_backends)
