"""The rig: each GPU with its memory, PCIe link and NVLink peers, and the host's RAM."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from advisor.engine.rig import Rig
from advisor.report.text import gib

SOURCES = {"flags": "from --gpu", "preset": "preset", "rig-file": "rig file", "nvml": "detected (NVML)",
           "nvidia-smi-xml": "nvidia-smi XML", "sysfs": "detected (sysfs)", "apple": "detected (Apple)",
           "cpu-only": "no GPU"}


def rig_title(rig: Rig) -> str:
    counts: dict[str, int] = {}
    for g in rig.gpus:
        counts[g.name or g.spec.name] = counts.get(g.name or g.spec.name, 0) + 1
    words = [f"{n}× {name}" if n > 1 else name for name, n in counts.items()] or ["CPU only"]
    if rig.nvlink:
        words.append("NVLink")
    return ", ".join(words)


class RigPanel(Static):
    """What the engine evaluates against; `r` changes it."""

    def show_detecting(self) -> None:
        self.border_title = "Rig"
        self.update(Text("Detecting GPUs…", "italic"))

    def show(self, rig: Rig) -> None:
        self.border_title = f"Rig: {rig_title(rig)} ({SOURCES.get(rig.source, rig.source)})"
        table = Table.grid(padding=(0, 2))
        for _ in range(5):
            table.add_column(no_wrap=True)
        for g in rig.gpus:
            peers = [f"gpu{b if a == g.index else a}" for a, b in rig.nvlink_pairs if g.index in (a, b)]
            link = f"PCIe {g.pcie_gen}.0 x{g.pcie_lanes}" if g.pcie_gen else (
                "unified memory" if g.spec.unified_memory else "PCIe ?")
            mem = gib(g.capacity_bytes) + (" free" if g.capacity_basis == "free" else "")
            table.add_row(Text(g.label, "bold"), g.name or g.spec.name, mem, link,
                          "NVLink → " + ", ".join(peers) if peers else Text("no NVLink", "dim"))
        cpu = f" · {rig.cpu}" if rig.cpu else ""
        table.add_row(Text("host", "bold"), f"RAM {gib(rig.ram_bytes)}", f"{rig.ram_bandwidth_gb_s:.0f} GB/s",
                      Text(cpu.strip(" ·"), "dim"), "")
        self.update(table)
