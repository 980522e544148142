"""The rig dialog's edits on a rig: PCIe as installed, P2P, RAM size and bandwidth, nodes and network.

Pure functions on the frozen `Rig` (no widgets), so the dialog and its tests share them. A blank
field keeps what the chosen rig has.
"""

from __future__ import annotations

import dataclasses
import re

from advisor.engine.rig import Rig
from advisor.errors import AdvisorError
from advisor.probe.flags import parse_pcie, parse_ram

# A DDR4/DDR5 channel moves 64 bits (8 bytes) per transfer (JEDEC JESD79-4 / JESD79-5; DDR5 splits
# it into two 32-bit subchannels): peak GB/s = channels x 8 bytes x MT/s / 1000, as rules/memory.toml
# works out DDR4-3200 dual channel (51.2) and advisor.probe.system reads SMBIOS.
_DDR = re.compile(r"^\s*(?:l?p?ddr[345]x?)[-\s]*(\d{3,5})\s*[x×]\s*(\d{1,2})\s*$", re.IGNORECASE)
CHANNEL_BYTES = 8
RAM_PRESETS = ("ddr4-3200x2", "ddr5-6000x2", "ddr5-4800x8", "ddr5-6400x12")
"""Examples the dialog offers: a desktop DDR4 and DDR5 pair, an 8-channel workstation, a 12-channel server."""


def parse_ram_bandwidth(text: str) -> tuple[float, str]:
    """`ddr5-6000x2` -> (96.0, 'DDR5-6000 x 2 channels, theoretical peak'); `80` -> (80.0, 'given')."""
    m = _DDR.match(text)
    if m:
        mt_s, channels = int(m.group(1)), int(m.group(2))
        if not 800 <= mt_s <= 20000 or not 1 <= channels <= 24:
            raise AdvisorError(f"RAM {text.strip()!r}: {mt_s} MT/s x {channels} channels is out of range")
        kind = text.strip().split("-")[0].upper()
        return channels * CHANNEL_BYTES * mt_s / 1000, f"{kind}-{mt_s} x {channels} channels, theoretical peak"
    try:
        gb_s = float(text)
    except ValueError:
        raise AdvisorError(f"RAM bandwidth {text.strip()!r} is neither GB/s nor like ddr5-6000x2") from None
    if not 0.1 <= gb_s <= 100000:
        raise AdvisorError(f"RAM bandwidth {text.strip()!r} GB/s is out of range")
    return gb_s, "given"


def edit_rig(rig: Rig, *, pcie: str = "", p2p: bool | None = None, ram_gib: str = "", ram_bandwidth: str = "",
             nodes: int = 1, network: str = "") -> Rig:
    """`rig` with what the dialog set; '' / None / 1 node keep the rig's own."""
    gpus = list(rig.gpus)
    changes: dict = {}
    if pcie.strip():
        if rig.unified or not gpus:
            raise AdvisorError("PCIe does not apply to this rig", "a unified-memory machine or a CPU-only rig has no GPU link")
        gen, lanes = parse_pcie(pcie)
        gpus = [dataclasses.replace(g, pcie_gen=gen, pcie_lanes=lanes) for g in gpus]
    if ram_gib.strip():
        if rig.unified:
            raise AdvisorError("RAM is the unified memory on this machine", "pick the machine with the memory size instead")
        changes["ram_bytes"] = parse_ram(ram_gib.strip())
    if ram_bandwidth.strip():
        if rig.unified:
            raise AdvisorError("RAM bandwidth is the unified memory's on this machine")
        changes["ram_bandwidth_gb_s"], changes["ram_bandwidth_basis"] = parse_ram_bandwidth(ram_bandwidth)
    if p2p is not None and len(gpus) > 1:
        changes["p2p"] = p2p
    if nodes > 1:
        if len(gpus) < nodes:
            raise AdvisorError(f"{nodes} machines need at least {nodes} GPUs", "add GPUs or use fewer machines")
        gpus = [dataclasses.replace(g, node=i * nodes // len(gpus)) for i, g in enumerate(gpus)]
        node_of = {g.index: g.node for g in gpus}
        changes["nvlink_pairs"] = tuple((a, b) for a, b in rig.nvlink_pairs if node_of[a] == node_of[b])
        changes["network"] = network or "10gbe"
        changes["topology"] = None  # nvidia-smi's words were for one machine
    return dataclasses.replace(rig, gpus=tuple(gpus), **changes)
