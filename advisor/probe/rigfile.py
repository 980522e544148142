"""Rig files: a rig as hand-editable TOML (`advisor detect --save` writes one, `--rig FILE` reads it).

```toml
[rig]
name = "two 3090s on an X570 board"   # optional
ram_gib = 64                          # system RAM for offload
ram_bandwidth_gb_s = 48               # optional (default: rules/memory.toml)
ram = "ddr5-6000x2"                   # optional instead: type-speed x channels (peak = channels x 8 B x MT/s)
cpu = "AMD Ryzen 9 5950X"             # optional
p2p = false                           # optional: PCIe peer-to-peer works between the GPUs
nvlink = [[0, 1]]                     # optional: GPU index pairs joined by NVLink
topology = [["X", "NV4"], ["NV4", "X"]]   # optional: nvidia-smi topo -m words
network = "10gbe"                     # with GPUs in several machines: rules/interconnect.toml [network] (1gbe 2.5gbe 5gbe
                                      # 10gbe 25gbe 100gbe 200gbe ib-hdr ib-ndr thunderbolt4 thunderbolt5 thunderbolt5-rdma)
os = "linux"                          # optional: linux, macos or windows (a unified-memory GPU's OS limit: Strix Halo's GTT)

[[gpu]]
id = "rtx-3090"        # catalog id or a name (resolved like --gpu)
count = 2              # optional, default 1
memory_gib = 23.6      # optional: memory to plan with (default: the card's total)
used_gib = 1.2         # optional instead: VRAM the desktop or other programs already hold (nvidia-smi "Memory-Usage")
pcie = "4x8"           # optional: host link as installed (generation x lanes)
name = "NVIDIA GeForce RTX 3090"   # optional
node = 0               # optional: which machine (0, 1, ...) when the rig spans several

[[node]]               # optional, one per machine of a rig that spans several
node = 1               # the `node` number its GPUs carry (0: the machine the server runs on)
host = "192.168.1.11"  # its address or name on the network (launch lines name it; else NODE1_IP)
ram_gib = 64           # optional: its RAM (default: [rig] ram_gib)
os = "linux"           # optional: linux, macos or windows (default: [rig] os)
name = "second box"    # optional
```

A GPU missing from the catalog can be described in full under `[[gpu]]` with `id`, `vram_gib`,
`memory_bandwidth_gb_s` and `fp16_tflops` (and optionally `pcie_gen`, `pcie_lanes`, `power_w`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any

from advisor.catalog.load import read_toml, validate_entry
from advisor.catalog.resolve import resolve
from advisor.catalog.types import _STRICT, GIB, Catalog, GpuSpec
from advisor.engine.rig import DEFAULT_RAM_BW_BASIS, MAX_RIG_GPUS, Rig, RigGpu, RigNode
from advisor.errors import AdvisorError, one_line
from advisor.probe.flags import parse_pcie
from advisor.record import Record, record


@record
class RigHead(Record):
    """The `[rig]` table of a rig file (validated by pydantic like a catalog entry, unknown keys refused)."""

    __pydantic_config__ = _STRICT

    name: str = ""
    """What the rig is, in words."""
    ram_gib: float | None = None
    """System RAM for offload, GiB (default: the rulebook's)."""
    ram_bandwidth_gb_s: float | None = None
    """System RAM bandwidth, GB/s (default: the rulebook's)."""
    ram: str | None = None
    """System RAM as a preset, `ddr5-6000x2` (type-speed x channels): its peak bandwidth, when
    `ram_bandwidth_gb_s` is not given."""
    cpu: str = ""
    """The CPU, in words."""
    p2p: bool | None = None
    """Whether PCIe peer-to-peer works between the GPUs."""
    nvlink: tuple[tuple[int, int], ...] = ()
    """GPU index pairs joined by NVLink."""
    topology: tuple[tuple[str, ...], ...] | None = None
    """The `nvidia-smi topo -m` words, one row per GPU."""
    source: str = ""
    """Where the rig was read from (written by `advisor detect --save`)."""
    network: str = ""
    """The network between machines when GPUs sit in several."""
    os: str = ""
    """The machines' OS (`linux`, `macos`, `windows`), unless a [[node]] says otherwise."""


OS_NAMES = ("linux", "macos", "windows")
"""What `os` may say."""

_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})|\[?[0-9A-Fa-f:.]{2,45}\]?")
"""An IPv4/IPv6 address or a host name: what a command line can carry unquoted (no spaces, no shell words)."""


@record
class RigNodeEntry(Record):
    """One `[[node]]` table of a rig file: a machine of a rig that spans several."""

    __pydantic_config__ = _STRICT

    node: int
    """The `node` number its GPUs carry."""
    host: str = ""
    """Its address or name on the network."""
    ram_gib: float | None = None
    """Its system RAM, GiB."""
    os: str = ""
    """linux, macos or windows."""
    name: str = ""
    """What the machine is, in words."""


@record
class RigGpuEntry(Record):
    """One `[[gpu]]` table of a rig file."""

    __pydantic_config__ = _STRICT

    id: str
    """Catalog id or name, or an id of your own with `vram_gib` for a GPU not in the catalog."""
    count: int = 1
    """How many of this GPU."""
    memory_gib: float | None = None
    """Memory to plan with, GiB (default: the card's total)."""
    memory_basis: str | None = None
    """`free` or `total`: what `memory_gib` is."""
    used_gib: float | None = None
    """VRAM the desktop or other programs already hold, GiB: the GPU is planned with the rest (what the
    NVML probe reads as free memory), as memory_basis = "free"."""
    pcie: str | None = None
    """Host link as installed, GENxWIDTH."""
    name: str = ""
    """The GPU's name as the driver reports it."""
    node: int = 0
    """Which machine (0, 1, ...) when the rig spans several."""
    vram_gib: float | None = None
    """For a GPU not in the catalog: its memory, GiB."""
    memory_bandwidth_gb_s: float | None = None
    """For a GPU not in the catalog: its memory bandwidth, GB/s."""
    fp16_tflops: float | None = None
    """For a GPU not in the catalog: its dense FP16 throughput, TFLOPS."""
    pcie_gen: int | None = None
    """For a GPU not in the catalog: its PCIe generation."""
    pcie_lanes: int | None = None
    """For a GPU not in the catalog: its PCIe lanes."""
    power_w: float | None = None
    """For a GPU not in the catalog: its board power, W."""


def _validated(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise AdvisorError(f"{where}: must be a table, not {type(data).__name__}",
                           "a rig file has one [rig] table and [[gpu]] tables")
    try:
        return validate_entry(cls, data)
    except Exception as exc:  # pydantic.ValidationError or a bound, kept lazy
        from advisor.catalog.load import _format_validation

        raise AdvisorError(f"{where}: {_format_validation(exc)}",
                           "every key of a rig file is described in the README and advisor/probe/rigfile.py") from None


def load_rig(catalog: Catalog, path: Path) -> Rig:
    return rig_from_data(catalog, read_toml(Path(path)), str(path))


def rig_from_data(catalog: Catalog, data: dict[str, Any], where: str) -> Rig:
    """A rig from a parsed rig file; every key validated, every problem an AdvisorError naming `where`."""
    unknown = set(data) - {"rig", "gpu", "node"}
    if unknown:
        raise AdvisorError(f"{where}: unknown table(s) {', '.join(sorted(unknown))}",
                           "a rig file has [rig], [[gpu]] and, for several machines, [[node]]")
    head: RigHead = _validated(RigHead, data.get("rig", {}), f"{where}: [rig]")
    host = catalog.rules.memory.host
    ram = int((head.ram_gib if head.ram_gib is not None else host.default_ram_gib) * GIB)
    bw = head.ram_bandwidth_gb_s
    bw_basis = "rig file"
    if bw is None and head.ram:
        from advisor.probe.flags import parse_ram_bw

        try:
            bw, bw_basis = parse_ram_bw(head.ram)
        except AdvisorError as exc:
            raise AdvisorError(f"{where}: [rig] ram = {head.ram!r}: {exc.message}", exc.hint) from None
        bw_basis = f"rig file, {bw_basis}"
    gpus: list[RigGpu] = []
    entries = data.get("gpu", [])
    if not isinstance(entries, list):
        raise AdvisorError(f"{where}: gpu must be an array of tables ([[gpu]])")
    if len(entries) > MAX_RIG_GPUS:
        raise AdvisorError(f"{where}: {len(entries)} [[gpu]] tables is more than one rig holds")
    for n, raw in enumerate(entries, 1):
        w = f"{where}: [[gpu]] #{n}"
        entry: RigGpuEntry = _validated(RigGpuEntry, raw, w)
        if entry.memory_basis not in (None, "free", "total"):
            raise AdvisorError(f"{w}: memory_basis must be \"free\" or \"total\", not {entry.memory_basis!r}")
        spec = _gpu_spec(catalog, entry, w)
        gen, lanes = parse_pcie(entry.pcie) if entry.pcie is not None else (spec.pcie_gen, spec.pcie_lanes)
        reserved = catalog.rules.memory.discrete_gpu.reserved_mib(spec.id, spec.vendor, spec.category)
        cap, basis = _capacity(entry, spec, w, reserved)
        if len(gpus) + entry.count > MAX_RIG_GPUS:
            raise AdvisorError(f"{where}: more than {MAX_RIG_GPUS} GPUs is more than one rig holds")
        for _ in range(entry.count):
            gpus.append(RigGpu(spec=spec, capacity_bytes=cap, pcie_gen=gen, pcie_lanes=lanes, index=len(gpus),
                               name=one_line(entry.name, 200), capacity_basis=basis, node=entry.node))
    pairs = []
    for pair in head.nvlink:
        if not all(0 <= i < len(gpus) for i in pair) or pair[0] == pair[1]:
            raise AdvisorError(f"{where}: nvlink pairs must be [a, b] distinct GPU indices below {len(gpus)}, not {list(pair)!r}")
        pairs.append(pair)
    for i in sorted({i for pair in pairs for i in pair}):
        if gpus[i].spec.nvlink is None and gpus[i].spec.arch != "unknown":  # the catalog says it has none
            raise AdvisorError(f"{where}: nvlink names GPU {i}, but the {gpus[i].spec.name} has no NVLink",
                               "drop the pair; GPUs without NVLink talk over PCIe")
    topo = head.topology
    if topo is not None and not (len(topo) == len(gpus) and all(len(r) == len(gpus) for r in topo)):
        raise AdvisorError(f"{where}: topology must be a {len(gpus)}x{len(gpus)} matrix of words")
    networks = catalog.rules.interconnect.network.gb_s
    network = head.network
    if network and network not in networks:
        raise AdvisorError(f"{where}: unknown network {network!r}", f"use one of: {', '.join(networks)}")
    if len({g.node for g in gpus}) > 1 and not network:
        raise AdvisorError(f"{where}: GPUs sit in several machines (node = ...) but [rig] names no network",
                           f"add network = one of: {', '.join(networks)}")
    if any(a_node != b_node for a_node, b_node in ((gpus[a].node, gpus[b].node) for a, b in pairs)):
        raise AdvisorError(f"{where}: NVLink cannot join GPUs in different machines")
    if len({g.spec.unified_memory for g in gpus}) > 1 or \
            (gpus and gpus[0].spec.unified_memory and len({g.node for g in gpus}) != len(gpus)):
        raise AdvisorError(f"{where}: a unified-memory machine is a node of its own",
                           "give each Mac / DGX Spark / Strix Halo its own node, and no other GPU")
    unified = gpus and gpus[0].spec.unified_memory
    machines = _machines(data.get("node", []), head, {g.node for g in gpus}, where)
    if machines and not unified and machines[0].index == 0 and machines[0].ram_bytes is not None \
            and head.ram_gib is None:
        ram = machines[0].ram_bytes  # the machine the server runs on offloads to its own RAM
    return Rig(gpus=tuple(gpus), ram_bytes=gpus[0].spec.vram_bytes if unified else ram,
               ram_bandwidth_gb_s=bw if bw is not None
               else (gpus[0].spec.memory_bandwidth_gb_s if unified else float(host.default_ram_bandwidth_gb_s)),
               ram_bandwidth_basis=bw_basis if bw is not None else DEFAULT_RAM_BW_BASIS,
               nvlink_pairs=tuple(pairs), p2p=head.p2p, topology=topo, cpu=one_line(head.cpu, 200), source="rig-file",
               network=network, machines=machines)


def _machines(entries: Any, head: RigHead, nodes: set[int], where: str) -> tuple[RigNode, ...]:
    """The [[node]] tables as machines, one per node number its GPUs carry; [rig] os for those that name none."""
    if not isinstance(entries, list):
        raise AdvisorError(f"{where}: node must be an array of tables ([[node]])")
    if len(entries) > MAX_RIG_GPUS:
        raise AdvisorError(f"{where}: {len(entries)} [[node]] tables is more machines than one rig holds")
    for os_name, w in ((head.os, f"{where}: [rig]"),):
        if os_name and os_name not in OS_NAMES:
            raise AdvisorError(f"{w}: os = {os_name!r} is not one of {', '.join(OS_NAMES)}")
    out: dict[int, RigNode] = {}
    for n, raw in enumerate(entries, 1):
        w = f"{where}: [[node]] #{n}"
        e: RigNodeEntry = _validated(RigNodeEntry, raw, w)
        if e.node not in nodes:
            raise AdvisorError(f"{w}: node = {e.node} has no GPU (no [[gpu]] says node = {e.node})",
                               f"number the machines as the [[gpu]] tables do: {', '.join(map(str, sorted(nodes)))}")
        if e.node in out:
            raise AdvisorError(f"{w}: node {e.node} is described twice")
        if e.host and (len(e.host) > 253 or not _HOST.fullmatch(e.host)):
            raise AdvisorError(f"{w}: host = {one_line(e.host, 80)!r} is not an address or host name",
                               "an IPv4/IPv6 address or a name such as 192.168.1.11 or box2.local")
        if e.os and e.os not in OS_NAMES:
            raise AdvisorError(f"{w}: os = {e.os!r} is not one of {', '.join(OS_NAMES)}")
        if e.ram_gib is not None and not 0 < e.ram_gib <= 1e6:
            raise AdvisorError(f"{w}: ram_gib = {e.ram_gib!r} is not a size of RAM in GiB")
        out[e.node] = RigNode(index=e.node, host=e.host, ram_bytes=None if e.ram_gib is None else int(e.ram_gib * GIB),
                              os=e.os or head.os, name=one_line(e.name, 200))
    if head.os:
        out.update({i: RigNode(index=i, os=head.os) for i in nodes if i not in out})
    return tuple(out[i] for i in sorted(out))


def _capacity(entry: RigGpuEntry, spec: GpuSpec, where: str, reserved_mib: float) -> tuple[int, str]:
    """A [[gpu]]'s memory to plan with and what it is (`free` or `total`): memory_gib as given, or the card's
    total less used_gib and the driver's reserve for the card's vendor (`reserved_mib`: NVIDIA's, which nvidia-smi -q
    lists apart from "Used", rules/memory.toml [discrete_gpu]): the same free memory the NVML probe reads live."""
    if entry.used_gib is not None:
        if entry.memory_gib is not None:
            raise AdvisorError(f"{where}: memory_gib and used_gib both set the memory to plan with", "keep one of them")
        used = int(entry.used_gib * GIB)
        if used >= spec.vram_bytes:
            raise AdvisorError(f"{where}: used_gib = {entry.used_gib:g} is all of the {spec.name}'s {spec.vram_gib:g} GiB",
                               "give the VRAM other programs hold (nvidia-smi Memory-Usage), below the card's total")
        reserve = int(reserved_mib * 2**20) if not spec.unified_memory else 0
        return max(spec.vram_bytes - used - reserve, 0), "free"
    cap = int(entry.memory_gib * GIB) if entry.memory_gib is not None else spec.vram_bytes
    return cap, entry.memory_basis or ("free" if entry.memory_gib is not None and cap < spec.vram_bytes else "total")


def _gpu_spec(catalog: Catalog, entry: RigGpuEntry, where: str) -> GpuSpec:
    if entry.vram_gib is not None and entry.id not in catalog.gpus:
        return GpuSpec(
            id=entry.id, name=one_line(entry.name or entry.id, 200), vendor="nvidia", category="consumer", arch="unknown",
            vram_gib=entry.vram_gib, memory_bandwidth_gb_s=entry.memory_bandwidth_gb_s or 0.0,
            fp16_tflops=entry.fp16_tflops or 0.0, power_w=entry.power_w or 0.0,
            sources=("rig file",), pcie_gen=entry.pcie_gen, pcie_lanes=entry.pcie_lanes,
            notes="described in a rig file, not in the catalog")
    return catalog.gpus[resolve(catalog.gpus, entry.id, "gpu")]


def rig_toml(rig: Rig, name: str = "") -> str:
    """A rig as rig-file TOML (the inverse of load_rig)."""
    lines = [f"{RIG_FILE_MARK}: edit freely; `advisor check MODEL --rig THIS_FILE` reads it.", "[rig]"]
    if name:
        lines.append(f"name = {_q(name)}")
    lines.append(f"ram_gib = {rig.ram_bytes / GIB!r}")
    if rig.ram_bandwidth_basis not in ("", DEFAULT_RAM_BW_BASIS):
        lines.append(f"ram_bandwidth_gb_s = {rig.ram_bandwidth_gb_s:g}  # {rig.ram_bandwidth_basis}")
    if rig.cpu:
        lines.append(f"cpu = {_q(rig.cpu)}")
    if rig.p2p is not None:
        lines.append(f"p2p = {'true' if rig.p2p else 'false'}")
    if rig.nvlink_pairs:
        lines.append("nvlink = [" + ", ".join(f"[{a}, {b}]" for a, b in rig.nvlink_pairs) + "]")
    if rig.topology:
        lines.append("topology = [" + ", ".join("[" + ", ".join(_q(c) for c in row) + "]" for row in rig.topology) + "]")
    lines.append(f"source = {_q(rig.source)}")
    lines += [f"# warning: {one_line(w)}" for w in rig.warnings]
    if rig.network:
        lines.append(f"network = {_q(rig.network)}")
    for g in rig.gpus:
        lines += ["", "[[gpu]]", f"id = {_q(g.spec.id)}"]
        if g.name:
            lines.append(f"name = {_q(g.name)}")
        if g.spec.arch == "unknown":  # a GPU not in the catalog: what is known of it (unknown speeds left out)
            lines.append(f"vram_gib = {g.spec.vram_gib!r}")
            lines += [f"{key} = {value:g}" for key, value in (("memory_bandwidth_gb_s", g.spec.memory_bandwidth_gb_s),
                                                              ("fp16_tflops", g.spec.fp16_tflops)) if value > 0]
        if g.capacity_bytes != g.spec.vram_bytes:
            lines.append(f"memory_gib = {g.capacity_bytes / GIB!r}")
            lines.append(f"memory_basis = {_q(g.capacity_basis)}")
        if g.pcie_gen and g.pcie_lanes:
            link = f"{g.pcie_gen}x{g.pcie_lanes}"
            try:
                parse_pcie(link)
                lines.append(f"pcie = {_q(link)}")
            except AdvisorError:  # a link the rulebook has no rate for: recorded, not planned with
                lines.append(f"# pcie = {_q(link)}  (as detected; not a link this advisor can plan with)")
        if g.node:
            lines.append(f"node = {g.node}")
    for m in rig.machines:
        lines += ["", "[[node]]", f"node = {m.index}"]
        lines += [f"{key} = {_q(value)}" for key, value in (("host", m.host), ("os", m.os), ("name", m.name)) if value]
        if m.ram_bytes is not None:
            lines.append(f"ram_gib = {m.ram_bytes / GIB!r}")
    return "\n".join(lines) + "\n"


RIG_FILE_MARK = "# advisor rig file"


def save_rig(catalog: Catalog, path: Path, rig: Rig, name: str = "", source: Path | None = None,
             force: bool = False) -> None:
    """Write `rig` as a rig file, atomically, keeping the permissions of the file it replaces.
    Refused: overwriting `source` (the file it was read from), a rig this reader would not read
    back, and, unless `force`, a symbolic link, a read-only file or a file this advisor did not
    write (its first line is not RIG_FILE_MARK: a hand-written rig file is the user's)."""
    import os

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    from advisor.files import check_overwrite, write_atomic

    where = one_line(str(path), 300)
    if source is not None and os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
        raise AdvisorError(f"--save {where}: that is the --from input; not overwriting it", "save to another file")
    check_overwrite(path, "--save", lambda head: head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(RIG_FILE_MARK.encode()),
                    force)
    text = rig_toml(rig, name=name)
    try:
        rig_from_data(catalog, tomllib.loads(text), where)
    except (AdvisorError, tomllib.TOMLDecodeError) as exc:
        raise AdvisorError(f"--save {where}: what was read does not make a rig file this advisor reads back ({exc})",
                           "nothing was written; describe the rig by hand (see the README)") from None
    write_atomic(path, text)


def _q(text: str) -> str:
    """A TOML basic string: quotes, backslashes and every control character escaped."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else "\ufffd" if 0xD800 <= ord(c) < 0xE000
                         else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                         else f"\\U{ord(c):08x}" for c in text) + '"'
