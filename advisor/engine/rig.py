"""What the engine evaluates: a rig of GPUs (from the catalog, a probe or a rig file) and a host.

A `Rig` is plain frozen data. Probes (`advisor.probe`) and the `--gpu` parser build it; the engine
only reads it.
"""

from __future__ import annotations

from dataclasses import field

from advisor.record import Record, record
from advisor.catalog.rulebook import HostRules
from advisor.catalog.types import CpuSpec, GpuSpec
from advisor.errors import AdvisorError


DEFAULT_RAM_BW_BASIS = "default: dual-channel DDR4-3200 peak (rules/memory.toml)"


@record
class RigGpu(Record):
    """One GPU of a rig."""

    spec: GpuSpec
    """The catalog entry (or one synthesized from what a probe measured, for unknown cards)."""
    capacity_bytes: int
    """Memory the advisor may plan with on this GPU: total, or free when detected and asked for."""
    pcie_gen: int | None = None
    """Host link generation as installed (the slot may cap the card); None when unknown/SoC."""
    pcie_lanes: int | None = None
    """Host link width as installed."""
    index: int = 0
    """Position in the rig (CUDA/NVML order)."""
    name: str = ""
    """Name as detected (empty: the catalog name)."""
    capacity_basis: str = "total"
    """`total` (the card's memory) or `free` (what was free when detected)."""
    node: int = 0
    """Which machine the GPU sits in (rig files can describe several joined by a network)."""

    @property
    def label(self) -> str:
        return f"gpu{self.index}"


@record
class RigNode(Record):
    """One machine of a rig whose GPUs sit in several (rig-file `[[node]]` tables)."""

    index: int
    """The `node` number its GPUs carry."""
    host: str = ""
    """The address or name the other machines reach it by (empty: not given; launch lines then say NODE1_IP)."""
    ram_bytes: int | None = None
    """Its system RAM (None: the rig's `ram_gib`)."""
    os: str = ""
    """`linux`, `macos` or `windows` (empty: not given): which OS memory limits apply to a unified-memory GPU."""
    name: str = ""
    """What the machine is, in words."""

    @property
    def address(self) -> str:
        """The host to write in a command line: as given, else a placeholder naming the node."""
        return self.host or f"NODE{self.index}_IP"


@record
class Rig(Record):
    """GPUs, their links, and the host they sit in."""

    gpus: tuple[RigGpu, ...]
    """The GPUs, in index order; empty for a CPU-only rig."""
    ram_bytes: int
    """System RAM available for offload."""
    ram_bandwidth_gb_s: float
    """System RAM bandwidth used for offloaded layers, GB/s."""
    ram_bandwidth_basis: str = ""
    """Where the RAM bandwidth figure comes from."""
    nvlink_pairs: tuple[tuple[int, int], ...] = ()
    """GPU index pairs joined by NVLink (or an NVSwitch fabric)."""
    p2p: bool | None = None
    """PCIe peer-to-peer works between the GPUs (None: unknown, judged from the GPU models)."""
    topology: tuple[tuple[str, ...], ...] | None = None
    """`nvidia-smi topo -m` words between GPU pairs (X, NV#, PIX, PXB, PHB, NODE, SYS), if known."""
    cpu: str = ""
    """CPU model, if known."""
    cpu_spec: CpuSpec | None = None
    """The CPU's catalog entry (hardware_db/cpus.toml), where `cpu` names one: its compute and its fabric
    links bound CPU decode (None: unknown, bandwidth alone)."""
    cpu_sockets: int = 1
    """How many of that CPU the host has (a dual-socket server: 2)."""
    source: str = "flags"
    """How the rig was made: `flags`, `nvml`, `nvidia-smi-xml`, `rig-file`, `preset`, `cpu-only`."""
    warnings: tuple[str, ...] = field(default=())
    """What the probe could not read, and what changes the rig as detected (MIG mode, a GPU lost), in words."""
    network: str = ""
    """The link between machines when GPUs sit in several (`10gbe`, `ib-ndr`, `thunderbolt5-rdma`...)."""
    machines: tuple[RigNode, ...] = ()
    """Per machine: its host, RAM and OS, where a rig file described them (empty: nothing beyond `node`)."""

    @property
    def nvlink(self) -> bool:
        return bool(self.nvlink_pairs)

    @property
    def is_cpu_only(self) -> bool:
        return not self.gpus

    @property
    def nodes(self) -> int:
        return len({g.node for g in self.gpus}) if self.gpus else 1

    def node(self, index: int) -> RigNode:
        """Machine `index` as described, or one known only by its number."""
        return next((m for m in self.machines if m.index == index), RigNode(index=index))

    @property
    def node_ids(self) -> tuple[int, ...]:
        """The machines' numbers in order, the first one's (where the server runs) first."""
        return tuple(sorted({g.node for g in self.gpus})) if self.gpus else (0,)

    def gpus_on(self, node: int) -> tuple[RigGpu, ...]:
        return tuple(g for g in self.gpus if g.node == node)

    @property
    def unified(self) -> bool:
        return bool(self.gpus) and all(g.spec.unified_memory for g in self.gpus)

    @property
    def speed_known(self) -> bool:
        """Whether every GPU's bandwidth and throughput are known (a GPU missing from the catalog has neither)."""
        return all(g.spec.memory_bandwidth_gb_s > 0 and g.spec.fp16_tflops > 0 for g in self.gpus)

    def nvlinked(self, a: int, b: int) -> bool:
        return (a, b) in self.nvlink_pairs or (b, a) in self.nvlink_pairs


BACKENDS = {"apple": "metal", "amd": "rocm", "intel": "sycl", "nvidia": "cuda"}
"""The ggml backend llama.cpp builds for each GPU vendor (what runtime tables key on)."""


def gpu_backend(spec: GpuSpec) -> str:
    return BACKENDS.get(spec.vendor, "cuda")


MAX_RIG_GPUS = 64
"""The most GPUs one rig (rig file, --gpu flags, owned GPUs in a plan) may hold."""


def check_nvlink_capable(specs: list[GpuSpec]) -> None:
    for s in specs:
        if s.nvlink is None:
            raise AdvisorError(f"--nvlink: the {s.name} has no NVLink",
                               "drop --nvlink; GPUs without NVLink talk over PCIe")


def nvlink_pairs(specs: list[GpuSpec]) -> tuple[tuple[int, int], ...]:
    """NVLink pairs as the hardware allows: bridges join neighbours two by two (or up to max_gpus
    for bridge sets), switch/mesh parts join all in groups of max_gpus."""
    check_nvlink_capable(specs)
    pairs = []
    n = len(specs)
    i = 0
    while i < n:
        group = specs[i].nvlink.max_gpus if specs[i].nvlink else 1
        members = list(range(i, min(i + group, n)))
        # a bridge only joins identical cards
        members = [m for m in members if specs[m].id == specs[i].id]
        pairs += [(a, b) for k, a in enumerate(members) for b in members[k + 1:]]
        i = members[-1] + 1
    return tuple(pairs)


def rig_of(specs: list[GpuSpec], host_rules: HostRules, ram: tuple[int, float | None], *, nvlink: bool = False,
           pcie: tuple[int | None, int | None] = (None, None), source: str = "flags") -> Rig:
    """A rig of catalog GPUs as sold, at their total memory: what `--gpu` flags and `plan` describe.

    `ram`: system RAM bytes and its bandwidth in GB/s (None: the rulebook's default). NVLink joins them as
    the hardware allows (`nvlink`), and always for switch/mesh parts (SXM). A unified-memory machine's RAM
    and bandwidth are its unified memory's."""
    ram_bytes, ram_bandwidth_gb_s = ram
    gen, lanes = pcie
    gpus = tuple(RigGpu(spec=s, capacity_bytes=s.vram_bytes, pcie_gen=gen or s.pcie_gen,
                        pcie_lanes=lanes or s.pcie_lanes, index=i) for i, s in enumerate(specs))
    implicit = all(s.nvlink is not None and s.nvlink.topology in ("switch", "mesh") for s in specs)
    pairs = nvlink_pairs(specs) if (nvlink or implicit) and len(specs) > 1 else ()
    if specs and specs[0].unified_memory:
        ram_bytes = specs[0].vram_bytes
        bw, basis = specs[0].memory_bandwidth_gb_s, f"{specs[0].name} unified memory"
    elif ram_bandwidth_gb_s:
        bw, basis = ram_bandwidth_gb_s, "measured or given"
    else:
        bw, basis = float(host_rules.default_ram_bandwidth_gb_s), DEFAULT_RAM_BW_BASIS
    return Rig(gpus=gpus, ram_bytes=ram_bytes, ram_bandwidth_gb_s=bw, ram_bandwidth_basis=basis,
               nvlink_pairs=pairs, source=source if specs else "cpu-only")
