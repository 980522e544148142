"""The host: RAM, CPU, a RAM bandwidth estimate; AMD GPUs from sysfs; Apple silicon from sysctl.

Every reader takes the filesystem root (`root`) or a command runner (`run`) so tests can hand it
a fake tree or fake output. Nothing here raises for a machine it cannot read: unknown is None.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any, Callable, NamedTuple

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
    bandwidth, basis = smbios_bandwidth(root, run or (run_command if str(root) == os.sep else None))
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
# Three places hold them: /sys/firmware/dmi/entries/17-*/raw (one structure each), the whole table in
# /sys/firmware/dmi/tables/DMI (both readable by root only on most distributions), and `dmidecode -t 17`
# (which reads the same tables, so it too needs root unless the files are readable). Fields: SMBIOS
# 3.x (DSP0134) type 17 Memory Device: 0x0A data width, 0x0C size, 0x10 locator, 0x11 bank locator,
# 0x12 memory type, 0x15 speed, 0x20 configured speed, 0x54/0x58 extended speeds.

_MEMORY_TYPES = {0x12: "DDR", 0x13: "DDR2", 0x18: "DDR3", 0x1A: "DDR4", 0x1B: "LPDDR", 0x1C: "LPDDR2",
                 0x1D: "LPDDR3", 0x1E: "LPDDR4", 0x20: "HBM", 0x21: "HBM2", 0x22: "DDR5", 0x23: "LPDDR5",
                 0x24: "HBM3"}
"""SMBIOS 3.x type 17 offset 0x12 (DSP0134 7.18.2 Memory Device - Type)."""

UNREADABLE = ("SMBIOS memory tables not readable here (root only: /sys/firmware/dmi, dmidecode); "
              "give --ram-bw, e.g. ddr5-6000x2")


class MemoryDevice(NamedTuple):
    width_bits: int
    mt_s: int
    label: str
    kind: str = ""


def smbios_bandwidth(root: Path, run: Runner | None = None) -> tuple[float | None, str]:
    """Peak RAM bandwidth from the SMBIOS type-17 entries: sum over channels of data width x configured
    MT/s. DIMMs sharing a channel (found from their locator labels) count once. Reads sysfs's entries,
    else its whole table, else `dmidecode -t 17` through `run`; (None, why) when none is readable."""
    devices, readable = _sysfs_entries(root)
    if not devices:
        blob = _read_bytes(root / "sys/firmware/dmi/tables/DMI")
        readable = readable or blob is not None
        devices = parse_smbios_table(blob) if blob else []
    if not devices and run is not None:
        out = run(["dmidecode", "-t", "17"])
        readable = readable or bool(out)
        devices = parse_dmidecode(out) if out else []
    if not devices:
        if readable or not _dmi_present(root):
            return None, "unknown"
        edac = edac_channels(root)
        if edac:
            n, kind = edac
            gen = (re.search(r"DDR\d", kind) or re.search(r"\w+$", kind))
            hint = f"{gen.group(0).lower()}-MTSx{n}" if gen else f"ddr5-6000x{n}"
            return None, (f"SMBIOS memory tables not readable here (root only); EDAC shows {n} memory channel(s) "
                          f"of {kind} but not their speed: give --ram-bw {hint} with your MT/s")
        return None, UNREADABLE
    return bandwidth_of(devices)


def edac_channels(root: Path) -> tuple[int, str] | None:
    """(channels, memory type) of the populated DIMMs the EDAC driver lists (world-readable, unlike
    SMBIOS; no speed): /sys/devices/system/edac/mc/mc*/dimm*/ with `size` (MB), `dimm_location`
    ("csrow 0 channel 1", "channel 0 slot 0") and `dimm_mem_type` ("Registered-DDR4"), per the kernel's
    Documentation/ABI/testing/sysfs-devices-edac."""
    channels: set[tuple[str, str]] = set()
    kinds: set[str] = set()
    for dimm in sorted((root / "sys/devices/system/edac/mc").glob("mc*/dimm*")):
        size = (_read(dimm / "size") or "").strip()
        loc = re.search(r"channel\s*(\d+)", _read(dimm / "dimm_location") or "")
        if not size.isdigit() or int(size) == 0 or not loc:
            continue
        channels.add((dimm.parent.name, loc.group(1)))
        kind = (_read(dimm / "dimm_mem_type") or "").strip()
        if kind and kind.lower() != "unknown":
            kinds.add(kind)
    if not channels:
        return None
    return len(channels), "/".join(sorted(kinds)) or "unknown type"


def bandwidth_of(devices: list[MemoryDevice]) -> tuple[float | None, str]:
    """(GB/s, basis) of installed memory devices: one per channel, summed."""
    channels: dict[str, MemoryDevice] = {}
    for d in devices:
        key = _channel_key(d.label) or f"#{len(channels)}"
        if key not in channels or (d.width_bits, d.mt_s) > (channels[key].width_bits, channels[key].mt_s):
            channels[key] = d
    if not channels:
        return None, "unknown"
    gb_s = sum(d.width_bits / 8 * d.mt_s for d in channels.values()) / 1000
    speeds = sorted({d.mt_s for d in channels.values()})
    kinds = sorted({d.kind for d in channels.values() if d.kind})
    return round(gb_s, 1), (
        f"SMBIOS: {len(channels)} memory channel(s) x {'/'.join(map(str, speeds))} MT/s"
        f"{' ' + '/'.join(kinds) if kinds else ''}, theoretical peak"
    )


def _dmi_present(root: Path) -> bool:
    return (root / "sys/firmware/dmi").exists()


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _sysfs_entries(root: Path) -> tuple[list[MemoryDevice], bool]:
    devices: list[MemoryDevice] = []
    paths = sorted((root / "sys/firmware/dmi/entries").glob("17-*/raw"))
    for raw_path in paths:
        raw = _read_bytes(raw_path)
        if raw is None:
            return [], False  # the tables are readable by root only
        dimm = _parse_type17(raw)
        if dimm is not None:
            devices.append(dimm)
    return devices, bool(paths)


def parse_smbios_table(blob: bytes) -> list[MemoryDevice]:
    """The type-17 devices of a raw SMBIOS structure table (/sys/firmware/dmi/tables/DMI): each structure
    is a formatted area of `length` bytes, then its strings, ended by two NUL bytes; type 127 ends it."""
    devices: list[MemoryDevice] = []
    pos = 0
    while pos + 4 <= len(blob):
        kind, length = blob[pos], blob[pos + 1]
        if length < 4:
            break
        end = blob.find(b"\0\0", pos + length)
        if end < 0:
            break
        if kind == 17:
            dimm = _parse_type17(blob[pos:end + 2])
            if dimm is not None:
                devices.append(dimm)
        if kind == 127:
            break
        pos = end + 2
    return devices


def _parse_type17(raw: bytes) -> MemoryDevice | None:
    """An installed memory device (data width bits, MT/s, locator labels, type), else None."""
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
    return MemoryDevice(width, speed, " ".join(labels), _MEMORY_TYPES.get(raw[0x12], ""))


def parse_dmidecode(text: str) -> list[MemoryDevice]:
    """The installed devices of `dmidecode -t 17` (or `-t memory`) output. Older dmidecode prints
    `Configured Clock Speed: N MHz` where newer prints `Configured Memory Speed: N MT/s`; both are the
    transfer rate (dmidecode 3.2 renamed the unit, SMBIOS always stored MT/s)."""
    devices: list[MemoryDevice] = []
    for block in re.split(r"\n(?=Handle 0x)", text or ""):
        if not re.search(r"^Memory Device\s*$", block, re.M):
            continue
        fields = dict(re.findall(r"^\s+([A-Za-z][A-Za-z ]*?):[ \t]*(.*?)\s*$", block, re.M))
        if not re.match(r"\d", fields.get("Size", "")):
            continue  # "No Module Installed"
        width = re.match(r"(\d+) bits", fields.get("Data Width", ""))
        speed = None
        for key in ("Configured Memory Speed", "Configured Clock Speed", "Speed"):
            m = re.match(r"(\d+) (?:MT/s|MHz)", fields.get(key, ""))
            if m and int(m.group(1)):
                speed = int(m.group(1))
                break
        if not width or not speed:
            continue
        label = " ".join(fields.get(k, "") for k in ("Locator", "Bank Locator")).strip()
        kind = fields.get("Type", "")
        devices.append(MemoryDevice(int(width.group(1)), speed, label, kind if kind != "Unknown" else ""))
    return devices


def _channel_key(label: str) -> str | None:
    """`P0 CHANNEL A DIMM 1` / `ChannelA-DIMM1` -> `P0 A`; `CPU1_DIMM_B2` -> `CPU1 B`;
    `DIMMC2 P0_Node0_Channel2_Dimm1` -> `P0 2`; `Controller1-ChannelA-DIMM0` -> `Controller1 A`; else None."""
    socket = re.search(r"(?<![A-Z0-9])(P\d|CPU\d|NODE\s?\d|Controller\d)", label, re.I)
    m = (re.search(r"CHANNEL[\s_]*([A-Z]|\d+)(?![A-Z])", label, re.I)
         or re.search(r"DIMM[_ -]?([A-Z])\d", label, re.I))
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


# -- `advisor detect --measure`: RAM bandwidth measured here by a bounded copy test --------------------------

COPY_MIB = 256
"""Bytes each copy moves, MiB: past any CPU's last-level cache (AMD's 3D V-Cache parts have 96-128 MiB
of L3), so the copy streams from and to RAM."""
COPY_SECONDS = 1.0
"""Time the repetitions may take after the buffers are filled (the test's bound, besides COPY_MIB)."""
MAX_THREADS = 64


def measure_ram_bandwidth(mib: int = COPY_MIB, seconds: float = COPY_SECONDS,
                          threads: int | None = None) -> tuple[float, str]:
    """(GB/s, basis) of a STREAM-style copy here: every core copies its slice of a `mib` MiB buffer into
    another with memmove (ctypes releases the GIL, so the threads run together), repeated for up to `seconds`,
    the best pass counted as STREAM counts a copy, bytes read plus bytes written (McCalpin, STREAM "Copy").
    The buffers are at most an eighth of the RAM; the first pass only faults the pages in and is not timed."""
    import ctypes
    import threading
    import time

    total = ram_bytes(Path("/")) or 0
    size = min(mib * 2**20, total // 16 if total else mib * 2**20) // 4096 * 4096  # two buffers: RAM/8
    n = max(1, min(threads or os.cpu_count() or 1, MAX_THREADS))
    src, dst = bytearray(size), bytearray(size)
    src_addr = ctypes.addressof((ctypes.c_char * size).from_buffer(src))
    dst_addr = ctypes.addressof((ctypes.c_char * size).from_buffer(dst))
    chunk = size // n // 4096 * 4096

    def one_pass() -> float:
        def work(i: int) -> None:
            off = i * chunk
            ctypes.memmove(dst_addr + off, src_addr + off, chunk if i < n - 1 else size - off)
        pool = [threading.Thread(target=work, args=(i,)) for i in range(n)]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return time.perf_counter() - t0

    one_pass()  # faults the pages in
    best, passes, end = float("inf"), 0, time.perf_counter() + seconds
    while passes < 3 or (time.perf_counter() < end and passes < 20):
        best, passes = min(best, one_pass()), passes + 1
    gb_s = round(2 * size / best / 1e9, 1)
    return gb_s, (f"measured here by advisor detect --measure: {n} thread(s) copying {size // 2**20} MiB, best of "
                  f"{passes} passes, bytes read + written (STREAM copy); what the CPU reaches, below the DIMMs' "
                  f"peak that SMBIOS would give")
