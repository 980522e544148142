"""Helpers shared by the probes: "not available" values, units, PCI bus ids, topology words."""

from __future__ import annotations

import re

from advisor.errors import one_line

MIB = 1024**2

_UNAVAILABLE = {
    "",
    "n/a",
    "na",
    "none",
    "not supported",
    "not available",
    "unknown",
    "unknown error",
    "insufficient permissions",
    "requested functionality has been deprecated",
}

# nvmlGpuTopologyLevel_t -> `nvidia-smi topo -m` word (nvml-facts.md section 6).
_TOPOLOGY_WORDS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t -> `nvidia-smi topo -p2p` word.
_P2P_WORDS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "NS", 5: "NS", 6: "U"}
# Older drivers print SOC for what newer ones call SYS.
_LEGACY_WORDS = {"SOC": "SYS"}
_WORD = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS)$")
_UNITS = {"B": 1, "KIB": 1024, "MIB": MIB, "GIB": 1024**3, "KB": 1000, "MB": 1000**2, "GB": 1000**3}


def text(value: object) -> str | None:
    """The value stripped, or None for the ways drivers say "not available" (`N/A`, `[N/A]`, ...)
    and for anything that is not text (a binding that answers a number where a name belongs)."""
    if not isinstance(value, (str, bytes)):
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    value = one_line(value.strip(), 500)  # a driver string is one line of printable text
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1].strip()
    return None if value.lower() in _UNAVAILABLE else value


def to_int(value: str | None) -> int | None:
    """`4` -> 4, `16x` -> 16; None when not a number (or more digits than any reading has)."""
    m = re.fullmatch(r"(\d{1,9})\s*x?", text(value) or "", re.IGNORECASE)
    return int(m.group(1)) if m else None


def whole(value: object, lo: int, hi: int) -> int | None:
    """`value` when it is an int (not a bool) from `lo` to `hi`, else None: a driver reading of the
    wrong type (a string, a float, NaN, an object) or out of range is unknown, never used."""
    return value if type(value) is int and lo <= value <= hi else None


MAX_GPU_BYTES = 16 * 1024**4
"""No GPU or machine has 16 TiB of memory: a larger reading is corrupt and treated as unreadable."""


def to_bytes(value: str | None) -> int | None:
    """`24576 MiB` -> bytes; None when not a size, or not a plausible one."""
    m = re.fullmatch(r"(\d{1,15}(?:\.\d{1,9})?)\s*([KMG]i?B|B)", text(value) or "", re.IGNORECASE)
    if not m:
        return None
    size = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    return size if size <= MAX_GPU_BYTES else None


MAX_WATTS = 100_000.0
"""No GPU draws 100 kW: a larger reading is corrupt and treated as unreadable."""


def to_watts(value: str | None) -> float | None:
    """`250.00 W` -> 250.0; None when not a power, or not a plausible one."""
    m = re.fullmatch(r"(\d{1,9}(?:\.\d{1,9})?)\s*W?", text(value) or "", re.IGNORECASE)
    return float(m.group(1)) if m and float(m.group(1)) <= MAX_WATTS else None


def bus_key(bus_id: str | bytes | None) -> tuple[int, int, int, int] | None:
    """A PCI bus id as (domain, bus, device, function), so `00000000:01:00.0` == `0000:01:00.0`."""
    m = re.fullmatch(r"(?:([0-9a-f]+):)?([0-9a-f]+):([0-9a-f]+)\.([0-7])", text(bus_id) or "", re.I)
    if not m:
        return None
    return (int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4)))


def topology_word(level: int) -> str | None:
    """An NVML topology level as the word `nvidia-smi topo -m` prints; None for an unknown level."""
    return _TOPOLOGY_WORDS.get(int(level))


def p2p_word(status: int) -> str:
    """An NVML P2P status as the word `nvidia-smi topo -p2p` prints (`U` when unknown)."""
    return _P2P_WORDS.get(int(status), "U")


def nvlink_word(links: int) -> str:
    """`NV4` for four bonded NVLinks."""
    return f"NV{links}"


def topology_cell(word: str) -> str | None:
    """A `topo -m` cell normalised (`SOC` -> `SYS`), or None when it is not a GPU-to-GPU word."""
    word = _LEGACY_WORDS.get(word.strip().upper(), word.strip().upper())
    return word if _WORD.match(word) else None
