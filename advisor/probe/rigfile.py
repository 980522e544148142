"""Rig files: a rig as hand-editable TOML (`advisor detect --save` writes one, `--rig FILE` reads it).

```toml
[rig]
name = "two 3090s on an X570 board"   # optional
ram_gib = 64                          # system RAM for offload
ram_bandwidth_gb_s = 48               # optional (default: rules/memory.toml)
cpu = "AMD Ryzen 9 5950X"             # optional
p2p = false                           # optional: PCIe peer-to-peer works between the GPUs
nvlink = [[0, 1]]                     # optional: GPU index pairs joined by NVLink
topology = [["X", "NV4"], ["NV4", "X"]]   # optional: nvidia-smi topo -m words
network = "10gbe"                     # with GPUs in several machines: 1gbe 10gbe 25gbe 100gbe ib-hdr ib-ndr thunderbolt4 thunderbolt5

[[gpu]]
id = "rtx-3090"        # catalog id or a name (resolved like --gpu)
count = 2              # optional, default 1
memory_gib = 23.6      # optional: memory to plan with (default: the card's total)
pcie = "4x8"           # optional: host link as installed (generation x lanes)
name = "NVIDIA GeForce RTX 3090"   # optional
node = 0               # optional: which machine (0, 1, ...) when the rig spans several
```

A GPU missing from the catalog can be described in full under `[[gpu]]` with `id`, `vram_gib`,
`memory_bandwidth_gb_s` and `fp16_tflops` (and optionally `pcie_gen`, `pcie_lanes`, `power_w`).
"""

from __future__ import annotations

from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any

from advisor.catalog.load import read_toml
from advisor.catalog.resolve import resolve
from advisor.catalog.types import GIB, Catalog, GpuSpec
from advisor.engine.rig import DEFAULT_RAM_BW_BASIS, Rig, RigGpu
from advisor.errors import AdvisorError
from advisor.probe.flags import parse_pcie

_RIG_KEYS = {"name", "ram_gib", "ram_bandwidth_gb_s", "cpu", "p2p", "nvlink", "topology", "source", "network"}
_GPU_KEYS = {"id", "count", "memory_gib", "pcie", "name", "vram_gib", "memory_bandwidth_gb_s", "fp16_tflops",
             "pcie_gen", "pcie_lanes", "power_w", "memory_basis", "node"}


def _num(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise AdvisorError(f"{where} must be a number from {lo:g} to {hi:g}, not {value!r}")
    return float(value)


def load_rig(catalog: Catalog, path: Path) -> Rig:
    data = read_toml(Path(path))
    where = str(path)
    unknown = set(data) - {"rig", "gpu"}
    if unknown:
        raise AdvisorError(f"{where}: unknown table(s) {', '.join(sorted(unknown))}", "a rig file has [rig] and [[gpu]]")
    head = data.get("rig", {})
    if not isinstance(head, dict) or set(head) - _RIG_KEYS:
        raise AdvisorError(f"{where}: [rig] has unknown keys {sorted(set(head) - _RIG_KEYS)}",
                           f"known keys: {', '.join(sorted(_RIG_KEYS))}")
    host = catalog.rules.memory.host
    ram = int(_num(head.get("ram_gib", host.default_ram_gib), f"{where}: ram_gib", 0.001, 65536) * GIB)
    bw = head.get("ram_bandwidth_gb_s")
    gpus: list[RigGpu] = []
    entries = data.get("gpu", [])
    if not isinstance(entries, list):
        raise AdvisorError(f"{where}: gpu must be an array of tables ([[gpu]])")
    for n, entry in enumerate(entries, 1):
        w = f"{where}: [[gpu]] #{n}"
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise AdvisorError(f"{w}: needs a string `id`")
        if set(entry) - _GPU_KEYS:
            raise AdvisorError(f"{w}: unknown keys {sorted(set(entry) - _GPU_KEYS)}",
                               f"known keys: {', '.join(sorted(_GPU_KEYS))}")
        spec = _gpu_spec(catalog, entry, w)
        count = int(_num(entry.get("count", 1), f"{w}: count", 1, 64))
        gen, lanes = parse_pcie(entry["pcie"]) if "pcie" in entry else (spec.pcie_gen, spec.pcie_lanes)
        cap = int(_num(entry["memory_gib"], f"{w}: memory_gib", 0.001, 65536) * GIB) if "memory_gib" in entry \
            else spec.vram_bytes
        basis = entry.get("memory_basis", "free" if "memory_gib" in entry and cap < spec.vram_bytes else "total")
        node = int(_num(entry.get("node", 0), f"{w}: node", 0, 1024))
        for _ in range(count):
            gpus.append(RigGpu(spec=spec, capacity_bytes=cap, pcie_gen=gen, pcie_lanes=lanes, index=len(gpus),
                               name=str(entry.get("name", "")), capacity_basis=str(basis), node=node))
    if len(gpus) > 64:
        raise AdvisorError(f"{where}: {len(gpus)} GPUs is more than one rig holds")
    pairs = []
    for pair in head.get("nvlink", []):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(i, int) and 0 <= i < len(gpus) for i in pair)):
            raise AdvisorError(f"{where}: nvlink pairs must be [a, b] GPU indices below {len(gpus)}, not {pair!r}")
        pairs.append((pair[0], pair[1]))
    topo = head.get("topology")
    if topo is not None:
        if not (isinstance(topo, list) and len(topo) == len(gpus)
                and all(isinstance(r, list) and len(r) == len(gpus) and all(isinstance(c, str) for c in r) for r in topo)):
            raise AdvisorError(f"{where}: topology must be a {len(gpus)}x{len(gpus)} matrix of words")
        topo = tuple(tuple(r) for r in topo)
    p2p = head.get("p2p")
    if p2p is not None and not isinstance(p2p, bool):
        raise AdvisorError(f"{where}: p2p must be true or false")
    networks = catalog.rules.interconnect.network.gb_s
    network = head.get("network", "")
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
    return Rig(gpus=tuple(gpus), ram_bytes=gpus[0].spec.vram_bytes if unified else ram,
               ram_bandwidth_gb_s=_num(bw, f"{where}: ram_bandwidth_gb_s", 0.1, 100000) if bw is not None
               else (gpus[0].spec.memory_bandwidth_gb_s if unified else float(host.default_ram_bandwidth_gb_s)),
               ram_bandwidth_basis="rig file" if bw is not None else DEFAULT_RAM_BW_BASIS,
               nvlink_pairs=tuple(pairs), p2p=p2p, topology=topo, cpu=str(head.get("cpu", "")), source="rig-file",
               network=network)


def _gpu_spec(catalog: Catalog, entry: dict, where: str) -> GpuSpec:
    ident = entry["id"]
    if "vram_gib" in entry and ident not in catalog.gpus:
        return GpuSpec(
            id=ident, name=str(entry.get("name", ident)), vendor="nvidia", category="consumer", arch="unknown",
            vram_gib=_num(entry["vram_gib"], f"{where}: vram_gib", 0.001, 65536),
            memory_bandwidth_gb_s=_num(entry.get("memory_bandwidth_gb_s", 0), f"{where}: memory_bandwidth_gb_s", 0, 1e6),
            fp16_tflops=_num(entry.get("fp16_tflops", 0), f"{where}: fp16_tflops", 0, 1e6),
            power_w=_num(entry.get("power_w", 0), f"{where}: power_w", 0, 1e5),
            sources=("rig file",), pcie_gen=entry.get("pcie_gen"), pcie_lanes=entry.get("pcie_lanes"),
            notes="described in a rig file, not in the catalog")
    return catalog.gpus[resolve(catalog.gpus, ident, "gpu")]


def rig_toml(rig: Rig, name: str = "") -> str:
    """A rig as rig-file TOML (the inverse of load_rig)."""
    lines = ["# advisor rig file: edit freely; `advisor check MODEL --rig THIS_FILE` reads it.", "[rig]"]
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
    if rig.network:
        lines.append(f"network = {_q(rig.network)}")
    for g in rig.gpus:
        lines += ["", "[[gpu]]", f"id = {_q(g.spec.id)}"]
        if g.name:
            lines.append(f"name = {_q(g.name)}")
        if g.spec.arch == "unknown":
            lines += [f"vram_gib = {g.spec.vram_gib!r}", f"memory_bandwidth_gb_s = {g.spec.memory_bandwidth_gb_s:g}",
                      f"fp16_tflops = {g.spec.fp16_tflops:g}"]
        if g.capacity_bytes != g.spec.vram_bytes:
            lines.append(f"memory_gib = {g.capacity_bytes / GIB!r}")
            lines.append(f"memory_basis = {_q(g.capacity_basis)}")
        if g.pcie_gen and g.pcie_lanes:
            lines.append(f'pcie = "{g.pcie_gen}x{g.pcie_lanes}"')
        if g.node:
            lines.append(f"node = {g.node}")
    return "\n".join(lines) + "\n"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
