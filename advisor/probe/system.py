"""The host: RAM, CPU, a RAM bandwidth estimate; AMD GPUs from sysfs; Apple silicon from sysctl.

Every reader takes the filesystem root (`root`) or a command runner (`run`) so tests can hand it
a fake tree or fake output. Nothing here raises for a machine it cannot read: unknown is None.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any, Callable

from advisor.probe.common import text
from advisor.probe.types import DetectedGpu, PcieLink, SystemInfo

Runner = Callable[[list[str]], "str | None"]

_GT_S_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_AMD_VENDOR = "0x1002"

# Apple's published unified-memory bandwidth, GB/s; a (cores -> GB/s) dict where the CPU core count
# tells the variants apart (M3 Max 14-core CPU: 300, 16-core: 400; M4 Max 14-core: 410, 16-core: 546).
_APPLE_GB_S: dict[str, Any] = {
    "M1": 68.25, "M1 Pro": 200, "M1 Max": 400, "M1 Ultra": 800,
    "M2": 100, "M2 Pro": 200, "M2 Max": 400, "M2 Ultra": 800,
    "M3": 100, "M3 Pro": 150, "M3 Max": {14: 300, 16: 400}, "M3 Ultra": 819,
    "M4": 120, "M4 Pro": 273, "M4 Max": {14: 410, 16: 546},
    "M5": 153,
}


def read_system(root: str | os.PathLike[str] = "/", *, platform: str = "linux", run: Runner | None = None) -> SystemInfo:
    """RAM, CPU and a bandwidth estimate; on macOS (`platform="darwin"`) through sysctl."""
    if platform == "darwin":
        return _read_apple_system(run or run_command)
    root = Path(root)
    bandwidth, basis = smbios_bandwidth(root)
    return SystemInfo(ram_bytes=ram_bytes(root), cpu=cpu_name(root), ram_bandwidth_gb_s=bandwidth,
                      ram_bandwidth_basis=basis)


def run_command(cmd: list[str]) -> str | None:
    """stdout of a short command, or None when it fails."""
    import subprocess

    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)  # noqa: S603
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


# -- Linux: RAM and CPU ---------------------------------------------------------------------------


def ram_bytes(root: Path) -> int | None:
    """Total RAM: /proc/meminfo under `root` (fast, no import), else psutil on the live machine."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", _read(root / "proc/meminfo") or "", re.M)
    if m:
        return int(m.group(1)) * 1024
    if str(root) == os.sep:
        try:
            import psutil

            return int(psutil.virtual_memory().total)
        except Exception:  # noqa: BLE001 - unknown
            return None
    return None


def cpu_name(root: Path) -> str | None:
    """`model name` from /proc/cpuinfo (x86), else the `Hardware`/`Model` line (ARM boards)."""
    info = _read(root / "proc/cpuinfo") or ""
    for key in ("model name", "Hardware", "cpu model", "Model"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", info, re.M)
        if m and text(m.group(1)):
            return re.sub(r"\s+", " ", m.group(1)).strip()
    return None


# -- Linux: RAM bandwidth from the SMBIOS memory-device tables (type 17) ----------------------------


def smbios_bandwidth(root: Path) -> tuple[float | None, str]:
    """Peak RAM bandwidth from SMBIOS type-17 entries in sysfs (readable by root only, no dmidecode):
    sum over channels of data width x configured MT/s. DIMMs sharing a channel (found from their
    locator labels) count once."""
    entries = sorted((root / "sys/firmware/dmi/entries").glob("17-*/raw"))
    channels: dict[str, tuple[int, int]] = {}
    for raw_path in entries:
        try:
            dimm = _parse_type17(raw_path.read_bytes())
        except OSError:
            return None, "unknown"  # the tables are readable by root only
        if dimm is None:
            continue
        width_bits, mt_s, label = dimm
        key = _channel_key(label) or f"#{len(channels)}"
        channels[key] = max(channels.get(key, (0, 0)), (width_bits, mt_s))
    if not channels:
        return None, "unknown"
    gb_s = sum(w / 8 * mt for w, mt in channels.values()) / 1000
    speeds = sorted({mt for _, mt in channels.values()})
    return round(gb_s, 1), (
        f"SMBIOS: {len(channels)} memory channel(s) x {'/'.join(map(str, speeds))} MT/s, theoretical peak"
    )


def _parse_type17(raw: bytes) -> tuple[int, int, str] | None:
    """(data width bits, MT/s, locator labels) of an installed memory device, else None."""
    if len(raw) < 0x17 or raw[0] != 17:
        return None
    length = raw[1]
    size, width = struct.unpack_from("<H", raw, 0x0C)[0], struct.unpack_from("<H", raw, 0x0A)[0]
    if size == 0 or width in (0, 0xFFFF):
        return None  # empty slot or unknown width
    speed = struct.unpack_from("<H", raw, 0x15)[0]
    if speed == 0xFFFF and length >= 0x58:
        speed = struct.unpack_from("<I", raw, 0x54)[0]  # extended speed (SMBIOS 3.3+)
    if length >= 0x22:  # the configured speed (2.7+) is what the memory actually runs at
        configured = struct.unpack_from("<H", raw, 0x20)[0]
        if configured == 0xFFFF and length >= 0x5C:
            configured = struct.unpack_from("<I", raw, 0x58)[0]
        speed = configured or speed
    if not speed or speed == 0xFFFF:
        return None
    strings = raw[length:].split(b"\x00")
    labels = [strings[i - 1].decode("ascii", "replace") for i in (raw[0x10], raw[0x11]) if 0 < i <= len(strings)]
    return width, speed, " ".join(labels)


def _channel_key(label: str) -> str | None:
    """`P0 CHANNEL A DIMM 1` / `ChannelA-DIMM1` -> `P0 A`; `CPU1_DIMM_B2` -> `CPU1 B`; else None."""
    socket = re.search(r"\b(P\d|CPU\d|NODE\s?\d)", label, re.I)
    m = re.search(r"CHANNEL\s*([A-Z])", label, re.I) or re.search(r"DIMM[_ -]?([A-Z])\d", label, re.I)
    return f"{socket.group(1) if socket else ''} {m.group(1).upper()}".strip() if m else None


# -- Linux: AMD GPUs from sysfs --------------------------------------------------------------------


def read_amd_gpus(root: str | os.PathLike[str] = "/") -> tuple[tuple[DetectedGpu, ...], tuple[str, ...]]:
    """AMD GPUs the amdgpu driver exposes under /sys/class/drm/card*/device."""
    root = Path(root)
    gpus: list[DetectedGpu] = []
    warnings: list[str] = []
    cards = sorted((root / "sys/class/drm").glob("card[0-9]*"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0))
    for card in cards:
        dev = card / "device"
        if not re.fullmatch(r"card\d+", card.name) or (text(_read(dev / "vendor")) or "").lower() != _AMD_VENDOR:
            continue
        total = _int_file(dev / "mem_info_vram_total")
        used = _int_file(dev / "mem_info_vram_used")
        name = text(_read(dev / "product_name")) or _pci_ids_name(root, dev) or "AMD GPU"
        if total is None:
            warnings.append(f"GPU {len(gpus)} ({name}): VRAM size not in sysfs; left unknown")
        gpus.append(DetectedGpu(
            index=len(gpus), name=name, pci_bus_id=_bus_id(dev), vram_bytes=total,
            vram_free_bytes=total - used if total is not None and used is not None else None,
            pcie=_sysfs_pcie(dev),
        ))
    return tuple(gpus), tuple(warnings)


def _int_file(path: Path) -> int | None:
    value = text(_read(path))
    return int(value) if value and value.isdigit() and int(value) > 0 else None


def _bus_id(dev: Path) -> str | None:
    m = re.search(r"^PCI_SLOT_NAME=(\S+)", _read(dev / "uevent") or "", re.M)
    if m:
        return m.group(1)
    name = Path(os.path.realpath(dev)).name
    return name if re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", name, re.I) else None


def _sysfs_pcie(dev: Path) -> PcieLink | None:
    def gen(name: str) -> int | None:
        m = re.match(r"([\d.]+)\s*GT/s", text(_read(dev / name)) or "")
        return _GT_S_TO_GEN.get(float(m.group(1))) if m else None

    link = PcieLink(gen_card_max=gen("max_link_speed"), width_card_max=_int_file(dev / "max_link_width"),
                    gen_current=gen("current_link_speed"), width_current=_int_file(dev / "current_link_width"))
    return link if any(v is not None for v in (link.gen_card_max, link.gen_current)) else None


def _pci_ids_name(root: Path, dev: Path) -> str | None:
    """The device's name from the system's pci.ids (e.g. `AMD Radeon RX 7900 XT/7900 XTX/...`)."""
    device = (text(_read(dev / "device")) or "").lower().removeprefix("0x")
    if not device:
        return None
    for rel in ("usr/share/hwdata/pci.ids", "usr/share/misc/pci.ids", "usr/share/pci.ids"):
        ids = _read(root / rel)
        if not ids:
            continue
        vendor = re.search(r"^1002\s.*$((?:\n(?:\t.*|#.*|))*)", ids, re.M)
        m = vendor and re.search(rf"^\t{device}\s+(.+)$", vendor.group(1), re.M)
        if m:
            bracket = re.search(r"\[(.+)\]", m.group(1))
            return f"AMD {bracket.group(1) if bracket else m.group(1).strip()}"
    return None


# -- macOS: Apple silicon ---------------------------------------------------------------------------


def _read_apple_system(run: Runner) -> SystemInfo:
    def sysctl(key: str) -> str | None:
        return text(run(["sysctl", "-n", key]))

    memsize = int(sysctl("hw.memsize") or 0) or None
    chip = sysctl("machdep.cpu.brand_string")
    ncpu = int(sysctl("hw.ncpu") or 0) or None
    wired = sysctl("iogpu.wired_limit_mb") or sysctl("debug.iogpu.wired_limit")
    wired_mb = int(wired) if wired and wired.isdigit() and int(wired) > 0 else None  # 0: the macOS default
    working_set, ws_basis = None, "unknown"
    if wired_mb:
        working_set, ws_basis = wired_mb * 1024**2, "iogpu.wired_limit_mb"
    elif memsize:
        share = 0.75 if memsize > 36 * 1024**3 else 2 / 3
        working_set, ws_basis = int(memsize * share), f"macOS default, about {share:.0%} of RAM (estimate)"
    bandwidth = _apple_bandwidth(chip, ncpu)
    return SystemInfo(
        ram_bytes=memsize,
        cpu=chip,
        ram_bandwidth_gb_s=bandwidth,
        ram_bandwidth_basis=f"Apple's published figure for the {chip}" if bandwidth else "unknown",
        apple={"chip": chip, "memsize_bytes": memsize, "cpu_cores": ncpu, "wired_limit_mb": wired_mb,
               "gpu_working_set_bytes": working_set, "gpu_working_set_basis": ws_basis},
    )


def _apple_bandwidth(chip: str | None, ncpu: int | None) -> float | None:
    m = re.fullmatch(r"Apple (M\d+(?: Pro| Max| Ultra)?)", chip or "")
    value = _APPLE_GB_S.get(m.group(1)) if m else None
    if isinstance(value, dict):
        value = value.get(ncpu) if ncpu else None
    return float(value) if value else None


def apple_gpu(system: SystemInfo) -> DetectedGpu | None:
    """The Apple silicon GPU: its memory is what Metal lets it wire (`gpu_working_set_bytes`)."""
    apple = system.apple or {}
    if not (apple.get("chip") or "").startswith("Apple"):
        return None
    return DetectedGpu(index=0, name=apple["chip"], vram_bytes=apple.get("gpu_working_set_bytes"),
                       unified_memory=True)
