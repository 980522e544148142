"""What a probe found: plain frozen data, no I/O.

Sizes are integer bytes; a value that could not be read is `None`, never 0 (rules read `None` as
"unknown"). `Detection.to_json()` is the `advisor detect --json` object of the public contract.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Callable
from advisor.record import Record, record


@record
class PcieLink(Record):
    """A GPU's PCIe host link."""

    gen_max: int | None = None
    """Highest generation this card can reach in this slot (NVML `MaxPcieLinkGeneration`: card ∧ slot)."""
    width_max: int | None = None
    """Widest link this card can reach in this slot, lanes (NVML `MaxPcieLinkWidth`: card ∧ slot)."""
    gen_card_max: int | None = None
    """The card's own highest generation (NVML `GpuMaxPcieLinkGeneration`, XML `max_device_link_gen`)."""
    width_card_max: int | None = None
    """The card's own widest link, lanes (known from sysfs; NVML has no such query)."""
    gen_current: int | None = None
    """Generation right now. Drops to 1 at idle: never read it as a downgrade on its own."""
    width_current: int | None = None
    """Width right now, lanes."""

    def to_json(self) -> dict[str, Any]:
        return {
            "gen_max": self.gen_max,
            "width_max": self.width_max,
            "gen_current": self.gen_current,
            "width_current": self.width_current,
            "gen_card_max": self.gen_card_max,
            "width_card_max": self.width_card_max,
        }


@record
class DetectedGpu(Record):
    """One GPU as a probe saw it."""

    index: int
    """Position in the probe's order (NVML index, XML order, sysfs card order)."""
    name: str
    """Product name as the driver reports it (e.g. `NVIDIA GeForce RTX 3090`); empty when unreadable."""
    uuid: str | None = None
    pci_bus_id: str | None = None
    """As the driver prints it, e.g. `00000000:01:00.0`."""
    vram_bytes: int | None = None
    """Total framebuffer memory (for unified-memory machines: the shared pool, or None)."""
    vram_reserved_bytes: int | None = None
    """Reserved by the driver/firmware (NVML v2 memory info, XML `reserved`)."""
    vram_free_bytes: int | None = None
    compute_capability: str | None = None
    """CUDA compute capability like `8.6`."""
    power_limit_w: float | None = None
    """Enforced power limit, watts."""
    mig: bool | None = None
    """MIG mode on (True), off or unsupported (False), unknown (None)."""
    mig_memory_bytes: tuple[int, ...] = ()
    """With MIG on: the memory of each MIG instance (what a CUDA process sees as its device)."""
    pcie: PcieLink | None = None
    nvlink_peers: tuple[int, ...] = ()
    """Indices of the GPUs this one reaches over NVLink (a bridge or an NVSwitch fabric)."""
    lost: bool = False
    """The GPU stopped answering while it was read (NVML `GpuIsLost`): what is here is partial."""
    unified_memory: bool = False
    """The GPU has no dedicated framebuffer and shares system memory (DGX Spark, Apple silicon, APUs)."""

    def to_json(self, catalog_id: str | None = None) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "catalog_id": catalog_id,
            "uuid": self.uuid,
            "pci_bus_id": self.pci_bus_id,
            "vram_bytes": self.vram_bytes,
            "vram_free_bytes": self.vram_free_bytes,
            "vram_reserved_bytes": self.vram_reserved_bytes,
            "pcie": self.pcie.to_json() if self.pcie is not None else None,
            "nvlink_peers": list(self.nvlink_peers),
            "mig": self.mig,
            "mig_memory_bytes": list(self.mig_memory_bytes) if self.mig else None,
            "compute_capability": self.compute_capability,
            "power_limit_w": self.power_limit_w,
            "lost": self.lost,
            "unified_memory": self.unified_memory,
        }


@record
class SystemInfo(Record):
    """The host: memory and CPU."""

    ram_bytes: int | None = None
    cpu: str | None = None
    ram_bandwidth_gb_s: float | None = None
    """System RAM bandwidth estimate, GB/s (None: not knowable here; the engine has a default)."""
    ram_bandwidth_basis: str = "unknown"
    """Where the estimate comes from, in one phrase."""
    apple: dict[str, Any] | None = None
    """Apple silicon facts (chip, memsize_bytes, wired_limit_mb, gpu_working_set_bytes), or None."""

    def to_json(self) -> dict[str, Any]:
        return {
            "ram_bytes": self.ram_bytes,
            "cpu": self.cpu,
            "ram_bandwidth_gb_s": self.ram_bandwidth_gb_s,
            "ram_bandwidth_basis": self.ram_bandwidth_basis,
            "apple": dict(self.apple) if self.apple is not None else None,
        }


@record
class Detection(Record):
    """Everything one probe run found."""

    source: str
    """`nvml`, `nvidia-smi-xml`, `sysfs` (AMD), `apple`, `rig-file` or `none` (nothing readable)."""
    driver_version: str | None = None
    cuda_version: str | None = None
    """The newest CUDA the driver supports, `12.2`."""
    gpus: tuple[DetectedGpu, ...] = ()
    topology: tuple[tuple[str, ...], ...] | None = None
    """`nvidia-smi topo -m` words between GPUs in `gpus` order (X, NV#, PIX, PXB, PHB, NODE, SYS)."""
    p2p: tuple[tuple[str, ...], ...] | None = None
    """`nvidia-smi topo -p2p r` words (X, OK, CNS, GNS, TNS, NS, U) in `gpus` order."""
    system: SystemInfo = field(default_factory=SystemInfo)
    warnings: tuple[str, ...] = ()
    """What could not be read, and why, in words."""

    def to_json(self, catalog_id: Callable[[str], str | None] | None = None) -> dict[str, Any]:
        """The `advisor detect --json` object; `catalog_id` maps a detected name to a catalog id."""
        return {
            "source": self.source,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "gpus": [g.to_json(catalog_id(g.name) if catalog_id and g.name else None) for g in self.gpus],
            "topology": _matrix(self.topology),
            "p2p": _matrix(self.p2p),
            "system": self.system.to_json(),
            "warnings": list(self.warnings),
        }


def _matrix(m: tuple[tuple[str, ...], ...] | None) -> list[list[str]] | None:
    return [list(row) for row in m] if m is not None else None
