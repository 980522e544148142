"""Rigs described on the command line (`--gpu 2xrtx-3090 --nvlink --pcie 4x8 --ram 64`)."""

from __future__ import annotations

import re

from advisor.catalog.resolve import parse_gpu_spec
from advisor.catalog.types import GIB, Catalog, GpuSpec
from advisor.engine.rig import MAX_RIG_GPUS, Rig, check_nvlink_capable, rig_of
from advisor.errors import AdvisorError

# Generations the rulebook has a lane rate for; the link widths the PCIe specification defines.
_PCIE = re.compile(r"^\s*(?:gen)?([1-6])\s*[x×]\s*(1|2|4|8|12|16|32)\s*$", re.IGNORECASE)
MAX_RAM_GB = 64 * 1024


def parse_pcie(text: str) -> tuple[int, int]:
    """`4x16` -> (4, 16): PCIe generation and lanes."""
    m = _PCIE.match(text) if isinstance(text, str) else None
    if not m:
        raise AdvisorError(f"--pcie {text!r} is not GENxWIDTH", "e.g. 4x16, 4x8, 3x4, 3x1 (riser); generations 1 to 6")
    return int(m.group(1)), int(m.group(2))


def parse_ram(text: str | float) -> int:
    """`64` (GB of RAM, as the sticker says: GiB in practice) -> bytes."""
    from advisor.numbers import check_number, parse_float

    gb = check_number(text, "--ram", 0, MAX_RAM_GB, lo_open=True) if isinstance(text, (int, float)) \
        else parse_float(text, "--ram", 0, MAX_RAM_GB, lo_open=True)
    return int(gb * GIB)


RAM_PRESET = r"^(lp)?ddr([45])x?-(\d{3,5})x(\d{1,2})$"
"""`ddr4-3200x2`, `ddr5-6000x2`, `ddr5-4800x8`, `ddr5-6400x12`, `lpddr5x-8533x8`: generation, MT/s, channels."""


def parse_ram_bw(text: str) -> tuple[float, str]:
    """`--ram-bw`: GB/s, or a preset `ddr5-6000x2` (type-speed x channels) -> (peak GB/s, basis). A DDR
    channel is 64 bits (8 bytes) wide, DDR5's two 32-bit subchannels together, LPDDR's counted as 64-bit
    channels too: peak = channels x 8 bytes x MT/s (JEDEC JESD79-4/JESD79-5)."""
    import re

    from advisor.numbers import parse_float

    m = re.match(RAM_PRESET, text.strip().lower())
    if m:
        mts, ch = int(m.group(3)), int(m.group(4))
        if not (800 <= mts <= 20000 and 1 <= ch <= 24):
            raise AdvisorError(f"--ram-bw {text}: {mts} MT/s x {ch} channels is not a memory system",
                               "e.g. ddr4-3200x2, ddr5-6000x2, ddr5-4800x8, ddr5-6400x12")
        gb_s = ch * 8 * mts / 1000
        return gb_s, f"{text.strip().lower()}: {ch} channels x 8 bytes x {mts} MT/s = {gb_s:g} GB/s peak"
    try:
        return parse_float(text, "--ram-bw", 0, 1e5, lo_open=True), "given with --ram-bw"
    except AdvisorError:
        raise AdvisorError(f"--ram-bw {text!r} is neither GB/s nor a preset",
                           "e.g. --ram-bw 90 or ddr4-3200x2, ddr5-6000x2, ddr5-4800x8, ddr5-6400x12") from None


def rig_from_flags(catalog: Catalog, gpus: list[str], nvlink: bool = False, pcie: str | None = None,
                   ram: str | float | None = None, default_ram_bytes: int | None = None,
                   ram_bandwidth_gb_s: float | None = None) -> Rig:
    specs: list[GpuSpec] = []
    for spec in gpus:
        count, gid = parse_gpu_spec(catalog.gpus, spec)
        specs += [catalog.gpus[gid]] * count
    if len(specs) > MAX_RIG_GPUS:
        raise AdvisorError(f"{len(specs)} GPUs is more than one rig holds", f"use at most {MAX_RIG_GPUS}")
    if nvlink:
        check_nvlink_capable(specs)
    gen, lanes = parse_pcie(pcie) if pcie else (None, None)
    if pcie and any(s.unified_memory for s in specs):
        raise AdvisorError("--pcie does not apply to unified-memory machines")
    if len({s.unified_memory for s in specs}) > 1 or (specs and specs[0].unified_memory and len(specs) > 1):
        raise AdvisorError("a unified-memory machine cannot share a rig with other GPUs",
                           "describe one machine per rig (several Macs: use a rig file with nodes)")
    host = catalog.rules.memory.host
    if ram is not None:
        ram_bytes = parse_ram(ram)
    else:
        ram_bytes = default_ram_bytes or int(host.default_ram_gib * GIB)
    return rig_of(specs, host, (ram_bytes, ram_bandwidth_gb_s), nvlink=nvlink, pcie=(gen, lanes))
