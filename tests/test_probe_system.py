"""Host facts, AMD sysfs and Apple sysctl readers against fake trees and fake command output; detect()."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from advisor.probe import detect
from advisor.probe.system import apple_gpu, cpu_name, ram_bytes, read_amd_gpus, read_system, smbios_bandwidth

try:
    from tests.fakes.fake_nvml import scenario
except ImportError:
    from fakes.fake_nvml import scenario

GIB = 1024**3


def write(root: Path, rel: str, content: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


# -- RAM and CPU ----------------------------------------------------------------------------------


def test_ram_and_cpu_from_proc(tmp_path):
    write(tmp_path, "proc/meminfo", "MemTotal:       65805520 kB\nMemFree:        1000 kB\n")
    write(tmp_path, "proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen 9 5950X 16-Core Processor\n")
    info = read_system(tmp_path)
    assert info.ram_bytes == 65805520 * 1024
    assert info.cpu == "AMD Ryzen 9 5950X 16-Core Processor"
    assert (info.ram_bandwidth_gb_s, info.ram_bandwidth_basis) == (None, "unknown")
    assert info.apple is None


def test_arm_cpuinfo_without_model_name(tmp_path):
    write(tmp_path, "proc/cpuinfo", "processor\t: 0\nBogoMIPS\t: 108.00\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4\n")
    assert cpu_name(tmp_path) == "BCM2835"


def test_nothing_readable_is_none(tmp_path):
    assert ram_bytes(tmp_path) is None and cpu_name(tmp_path) is None
    info = read_system(tmp_path / "absent")
    assert info.ram_bytes is None and info.cpu is None


def test_live_machine_ram_via_psutil():
    assert (ram_bytes(Path("/")) or 0) > 0


# -- SMBIOS type 17 --------------------------------------------------------------------------------


def dimm(device: str, bank: str, mt_s: int, size_mb: int = 16384, width: int = 64) -> bytes:
    """A SMBIOS 3.3 type-17 structure as /sys/firmware/dmi/entries/17-N/raw holds it."""
    raw = bytearray(0x5C)
    raw[0], raw[1] = 17, 0x5C
    struct.pack_into("<HHH", raw, 0x08, width + 8 if width else 0, width, size_mb)
    raw[0x10], raw[0x11] = 1, 2
    struct.pack_into("<H", raw, 0x15, mt_s)
    struct.pack_into("<H", raw, 0x20, mt_s)
    return bytes(raw) + device.encode() + b"\0" + bank.encode() + b"\0\0"


def test_smbios_two_channels(tmp_path):
    write(tmp_path, "sys/firmware/dmi/entries/17-0/raw", dimm("DIMM 0", "P0 CHANNEL A", 3200))
    write(tmp_path, "sys/firmware/dmi/entries/17-1/raw", dimm("DIMM 0", "P0 CHANNEL B", 3200))
    write(tmp_path, "sys/firmware/dmi/entries/17-2/raw", dimm("DIMM 1", "P0 CHANNEL B", 0, size_mb=0))  # empty slot
    gb_s, basis = smbios_bandwidth(tmp_path)
    assert gb_s == 51.2
    assert "2 memory channel" in basis and "3200" in basis


def test_smbios_two_dimms_per_channel_count_once(tmp_path):
    for n, label in enumerate(["DIMM_A1", "DIMM_A2", "DIMM_B1", "DIMM_B2"]):
        write(tmp_path, f"sys/firmware/dmi/entries/17-{n}/raw", dimm(label, f"BANK {n}", 3600))
    assert smbios_bandwidth(tmp_path)[0] == 57.6


def test_smbios_soldered_lpddr(tmp_path):
    """Eight 32-bit LPDDR5X-8000 packages without channel labels: a 256-bit bus, 256 GB/s."""
    for n in range(8):
        write(tmp_path, f"sys/firmware/dmi/entries/17-{n}/raw", dimm(f"Controller{n}", "", 8000, width=32))
    assert smbios_bandwidth(tmp_path)[0] == 256.0


def test_smbios_absent_is_unknown(tmp_path):
    assert smbios_bandwidth(tmp_path) == (None, "unknown")


# -- AMD sysfs ------------------------------------------------------------------------------------

PCI_IDS = """# pci.ids excerpt
1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]
\t\t1002 0e3b  Radeon RX 7900 GRE
\t74a1  Aqua Vanjaram [Instinct MI300X]
1003  ULSI Systems
\t0201  US201
"""


def amd_card(root: Path, card: str, device: str, vram: int | None, used: int, slot: str, product: str | None = None):
    base = f"sys/class/drm/{card}/device"
    write(root, f"{base}/vendor", "0x1002\n")
    write(root, f"{base}/device", f"0x{device}\n")
    write(root, f"{base}/uevent", f"DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME={slot}\n")
    if vram is not None:
        write(root, f"{base}/mem_info_vram_total", f"{vram}\n")
    write(root, f"{base}/mem_info_vram_used", f"{used}\n")
    write(root, f"{base}/max_link_speed", "16.0 GT/s PCIe\n")
    write(root, f"{base}/max_link_width", "16\n")
    write(root, f"{base}/current_link_speed", "16.0 GT/s PCIe\n")
    write(root, f"{base}/current_link_width", "16\n")
    if product:
        write(root, f"{base}/product_name", product + "\n")


def test_amd_gpus_from_sysfs(tmp_path):
    write(tmp_path, "usr/share/hwdata/pci.ids", PCI_IDS)
    amd_card(tmp_path, "card1", "744c", 24 * GIB, 1 * GIB, "0000:03:00.0")
    amd_card(tmp_path, "card10", "74a1", 192 * GIB, 0, "0000:0c:00.0", product="AMD Instinct MI300X")
    write(tmp_path, "sys/class/drm/card0/device/vendor", "0x8086\n")  # an Intel iGPU: not ours
    write(tmp_path, "sys/class/drm/card1-DP-1/status", "connected\n")  # a connector, not a card
    gpus, warnings = read_amd_gpus(tmp_path)
    assert [g.name for g in gpus] == ["AMD Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M", "AMD Instinct MI300X"]
    first = gpus[0]
    assert first.vram_bytes == 24 * GIB and first.vram_free_bytes == 23 * GIB
    assert first.pci_bus_id == "0000:03:00.0" and first.index == 0 and gpus[1].index == 1
    assert (first.pcie.gen_card_max, first.pcie.width_card_max, first.pcie.gen_current, first.pcie.width_current) == (4, 16, 4, 16)
    assert first.pcie.gen_max is None  # the slot's limit is not known from the card's own sysfs entry
    assert warnings == ()


def test_amd_without_vram_file_or_pci_ids(tmp_path):
    amd_card(tmp_path, "card0", "1234", None, 0, "0000:05:00.0")
    (g,), warnings = read_amd_gpus(tmp_path)
    assert g.name == "AMD GPU" and g.vram_bytes is None and g.vram_free_bytes is None
    assert "VRAM" in warnings[0]


def test_no_drm_at_all(tmp_path):
    assert read_amd_gpus(tmp_path) == ((), ())


# -- Apple silicon --------------------------------------------------------------------------------


def fake_sysctl(values: dict[str, str]):
    calls = []

    def run(cmd):
        calls.append(cmd)
        assert cmd[:2] == ["sysctl", "-n"]
        return values.get(cmd[2])  # None: the key does not exist (sysctl failed)

    run.calls = calls
    return run


@pytest.mark.parametrize(("chip", "ncpu", "memsize", "gb_s"), [
    ("Apple M2 Ultra", 24, 192 * GIB, 800.0),
    ("Apple M3 Max", 16, 128 * GIB, 400.0),
    ("Apple M3 Max", 14, 36 * GIB, 300.0),
    ("Apple M4 Max", 14, 36 * GIB, 410.0),
    ("Apple M1", 8, 8 * GIB, 68.25),
    ("Apple M9 Hyper", 8, 8 * GIB, None),
])
def test_apple_system(chip, ncpu, memsize, gb_s):
    run = fake_sysctl({"hw.memsize": f"{memsize}\n", "machdep.cpu.brand_string": chip + "\n", "hw.ncpu": str(ncpu),
                       "iogpu.wired_limit_mb": "0\n"})
    info = read_system(platform="darwin", run=run)
    assert info.ram_bytes == memsize and info.cpu == chip
    assert info.ram_bandwidth_gb_s == gb_s
    assert (info.ram_bandwidth_basis == "unknown") == (gb_s is None)
    share = 0.75 if memsize > 36 * GIB else 2 / 3
    assert info.apple["gpu_working_set_bytes"] == int(memsize * share)
    assert info.apple["wired_limit_mb"] is None  # 0 means "the default"
    gpu = apple_gpu(info)
    assert gpu.unified_memory and gpu.name == chip and gpu.vram_bytes == info.apple["gpu_working_set_bytes"]


def test_apple_wired_limit_raised_by_the_user():
    run = fake_sysctl({"hw.memsize": str(128 * GIB), "machdep.cpu.brand_string": "Apple M4 Max", "hw.ncpu": "16",
                       "iogpu.wired_limit_mb": "120000"})
    info = read_system(platform="darwin", run=run)
    assert info.apple["wired_limit_mb"] == 120000
    assert info.apple["gpu_working_set_bytes"] == 120000 * 1024**2
    assert info.apple["gpu_working_set_basis"] == "iogpu.wired_limit_mb"


def test_apple_old_macos_key_and_failing_sysctl():
    run = fake_sysctl({"hw.memsize": str(16 * GIB), "machdep.cpu.brand_string": "Apple M1 Pro",
                       "debug.iogpu.wired_limit": "12000"})
    info = read_system(platform="darwin", run=run)
    assert info.apple["wired_limit_mb"] == 12000
    nothing = read_system(platform="darwin", run=lambda cmd: None)
    assert nothing.ram_bytes is None and nothing.cpu is None and apple_gpu(nothing) is None


# -- detect() --------------------------------------------------------------------------------------


def host(root: Path) -> None:
    write(root, "proc/meminfo", "MemTotal:       131072000 kB\n")
    write(root, "proc/cpuinfo", "model name\t: AMD EPYC 7443P 24-Core Processor\n")


def test_detect_nvml_first(tmp_path):
    host(tmp_path)
    amd_card(tmp_path, "card0", "744c", 24 * GIB, 0, "0000:03:00.0")
    d = detect(nvml_module=scenario("rtx3090_nvlink_pair"), sysfs_root=tmp_path, platform="linux")
    assert d.source == "nvml" and len(d.gpus) == 2
    assert d.system.ram_bytes == 131072000 * 1024 and d.system.cpu.startswith("AMD EPYC")
    assert json.loads(json.dumps(d.to_json()))["system"]["cpu"] == d.system.cpu


def test_detect_falls_back_to_amd(tmp_path):
    host(tmp_path)
    amd_card(tmp_path, "card0", "744c", 24 * GIB, 0, "0000:03:00.0")
    d = detect(nvml_module=scenario("no_library"), sysfs_root=tmp_path, platform="linux")
    assert d.source == "sysfs" and d.gpus[0].vram_bytes == 24 * GIB
    assert not any("NVIDIA" in w for w in d.warnings)  # not noise on an AMD box


def test_detect_apple():
    run = fake_sysctl({"hw.memsize": str(64 * GIB), "machdep.cpu.brand_string": "Apple M1 Max", "hw.ncpu": "10"})
    d = detect(nvml_module=scenario("no_library"), platform="darwin", run=run)
    assert d.source == "apple"
    assert d.gpus[0].unified_memory and d.system.ram_bandwidth_gb_s == 400.0
    assert d.to_json()["system"]["apple"]["chip"] == "Apple M1 Max"


@pytest.mark.parametrize("name", ["no_library", "driver_not_loaded", "zero_gpus"])
def test_detect_without_gpus_never_raises(tmp_path, name):
    d = detect(nvml_module=scenario(name), sysfs_root=tmp_path / "nothing", platform="linux")
    assert d.gpus == () and d.source in {"none", "nvml"} and d.warnings
    assert d.system.ram_bytes is None


def test_detect_on_this_machine_never_raises():
    d = detect()
    json.dumps(d.to_json())
    assert d.source in {"nvml", "none", "sysfs", "apple"}


# -- SMBIOS from the whole table (/sys/firmware/dmi/tables/DMI) and from dmidecode text --------------


def test_smbios_whole_table_blob(tmp_path):
    """The raw table as /sys/firmware/dmi/tables/DMI holds it: other structures, then eight DDR5-4800
    DIMMs on channels A-H, an empty slot, and the type-127 end marker (SMBIOS 3.x DSP0134 7.46)."""
    other = bytes([1, 4, 0, 0]) + b"Vendor\0\0"  # a type-1 structure with one string
    dimms = b"".join(dimm("DIMM 0", f"P0 CHANNEL {c}", 4800) for c in "ABCDEFGH")
    empty = dimm("DIMM 1", "P0 CHANNEL A", 0, size_mb=0)
    end = bytes([127, 4, 0xFF, 0xFF]) + b"\0\0"
    write(tmp_path, "sys/firmware/dmi/tables/DMI", other + dimms + empty + end + dimm("X", "P0 CHANNEL Z", 9999))
    gb_s, basis = smbios_bandwidth(tmp_path)
    assert gb_s == 8 * 8 * 4.8 == 307.2
    assert "8 memory channel" in basis and "4800" in basis


def test_smbios_unreadable_says_so(tmp_path):
    (tmp_path / "sys/firmware/dmi/entries").mkdir(parents=True)
    gb_s, basis = smbios_bandwidth(tmp_path, run=lambda cmd: None)  # dmidecode: permission denied
    assert gb_s is None and "root" in basis and "--ram-bw" in basis


# Real `dmidecode -t 17` records, copied from public issue threads (leading spaces as posted):
# Threadripper TRX40, DDR4-3200 UDIMM: memtest86plus/memtest86plus#123
#   (https://github.com/memtest86plus/memtest86plus/issues/123)
TRX_DDR4 = """\
# dmidecode 3.4
Getting SMBIOS data from sysfs.
SMBIOS 2.8 present.

Handle 0x0019, DMI type 17, 40 bytes
Memory Device
        Array Handle: 0x0011
        Error Information Handle: 0x0018
        Total Width: Unknown
        Data Width: Unknown
        Size: No Module Installed
        Form Factor: Unknown
        Set: None
        Locator: DIMM 0
        Bank Locator: P0 CHANNEL A
        Type: Unknown
        Type Detail: Unknown

Handle 0x001B, DMI type 17, 40 bytes
Memory Device
        Array Handle: 0x0011
        Error Information Handle: 0x001A
        Total Width: 64 bits
        Data Width: 64 bits
        Size: 16 GB
        Form Factor: DIMM
        Set: None
        Locator: DIMM 1
        Bank Locator: P0 CHANNEL A
        Type: DDR4
        Type Detail: Synchronous Unbuffered (Unregistered)
        Speed: 3200 MT/s
        Manufacturer: Unknown
        Serial Number: E1B84019
        Asset Tag: Not Specified
        Part Number: BLS16G4D32AESC.M16FE
        Rank: 2
        Configured Memory Speed: 3200 MT/s
        Minimum Voltage: 1.2 V
        Maximum Voltage: 1.2 V
        Configured Voltage: 1.2 V
"""
# EPYC 7xx2 (ROME), DDR4-3200 RDIMM, 72-bit bus with ECC, 64 data bits: mchehab/rasdaemon#64
#   (https://github.com/mchehab/rasdaemon/issues/64); the record as posted, tab-indented.
EPYC_DDR4 = """\
Handle 0x0035, DMI type 17, 84 bytes
Memory Device
\tArray Handle: 0x0023
\tError Information Handle: 0x0034
\tTotal Width: Unknown
\tData Width: Unknown
\tSize: No Module Installed
\tForm Factor: Unknown
\tSet: None
\tLocator: DIMMC1
\tBank Locator: P0_Node0_Channel2_Dimm0
\tType: Unknown
\tType Detail: Unknown

Handle 0x0037, DMI type 17, 84 bytes
Memory Device
\tArray Handle: 0x0023
\tError Information Handle: 0x0036
\tTotal Width: 72 bits
\tData Width: 64 bits
\tSize: 32 GB
\tForm Factor: DIMM
\tSet: None
\tLocator: DIMMC2
\tBank Locator: P0_Node0_Channel2_Dimm1
\tType: DDR4
\tType Detail: Synchronous Registered (Buffered)
\tSpeed: 3200 MT/s
\tManufacturer: Samsung
\tSerial Number: T0FN00014948EFE495
\tAsset Tag: DIMMC2_AssetTag (date:21/49)
\tPart Number: M393A4K40EB3-CWE    
\tRank: 2
\tConfigured Memory Speed: 3200 MT/s
"""
# AM5 desktop, DDR5-5600 kit running at 4200 MT/s (four DIMMs): noonghunna/club-3090#1130
#   (https://github.com/noonghunna/club-3090/issues/1130), the first record as posted.
AM5_DDR5 = """\
# dmidecode 3.7
Getting SMBIOS data from sysfs.
SMBIOS 3.6.0 present.

Handle 0x000E, DMI type 16, 23 bytes
Physical Memory Array
        Location: System Board Or Motherboard
        Use: System Memory
        Error Correction Type: None
        Maximum Capacity: 256 GiB
        Error Information Handle: 0x000D
        Number Of Devices: 4

Handle 0x0011, DMI type 17, 92 bytes
Memory Device
        Array Handle: 0x000E
        Error Information Handle: 0x0010
        Total Width: 64 bits
        Data Width: 64 bits
        Size: 32 GiB
        Form Factor: DIMM
        Set: None
        Locator: DIMM 0
        Bank Locator: P0 CHANNEL A
        Type: DDR5
        Type Detail: Synchronous Unbuffered (Unregistered)
        Speed: 5600 MT/s
        Manufacturer: Crucial Technology
        Serial Number: E958EACA
        Asset Tag: Not Specified
        Part Number: CP32G56C46U5.M16D1            
        Rank: 2
        Configured Memory Speed: 4200 MT/s
        Minimum Voltage: 1.1 V
        Maximum Voltage: 1.1 V
        Configured Voltage: 1.1 V
        Memory Technology: DRAM
"""
# Older dmidecode printing the configured rate as "Configured Clock Speed: N MHz" below a higher rated
# "Speed": a DDR3-1600 RDIMM configured at 1067 (strizhechenko/netutils-linux#218,
# https://github.com/strizhechenko/netutils-linux/issues/218), tab-indented as posted.
OLD_FORMAT = """\
Handle 0x1101, DMI type 17, 34 bytes
Memory Device
\tArray Handle: 0x1000
\tError Information Handle: Not Provided
\tTotal Width: 72 bits
\tData Width: 64 bits
\tSize: 4096 MB
\tForm Factor: DIMM
\tSet: 1
\tLocator: DIMM_A2 
\tBank Locator: Not Specified
\tType: DDR3
\tType Detail: Synchronous Registered (Buffered)
\tSpeed: 1600 MHz
\tManufacturer: 00AD04B300AD
\tSerial Number: 4A87CE52
\tAsset Tag: 01121621
\tPart Number: HMT351R7CFR8C-PB  
\tRank: 2
\tConfigured Clock Speed: 1067 MHz
"""


def test_dmidecode_real_records():
    from advisor.probe.system import MemoryDevice, parse_dmidecode

    assert parse_dmidecode(TRX_DDR4) == [MemoryDevice(64, 3200, "DIMM 1 P0 CHANNEL A", "DDR4")]
    assert parse_dmidecode(EPYC_DDR4) == [MemoryDevice(64, 3200, "DIMMC2 P0_Node0_Channel2_Dimm1", "DDR4")]
    assert parse_dmidecode(AM5_DDR5) == [MemoryDevice(64, 4200, "DIMM 0 P0 CHANNEL A", "DDR5")]  # configured, not rated
    assert parse_dmidecode(OLD_FORMAT) == [MemoryDevice(64, 1067, "DIMM_A2 Not Specified", "DDR3")]
    assert parse_dmidecode("dmidecode: Permission denied\n") == []


def test_dmidecode_channels_from_real_labels():
    from advisor.probe.system import bandwidth_of, parse_dmidecode

    # the EPYC board's labels for channels A-H (P0_Node0_ChannelN_Dimm1) on the posted record
    epyc = "\n".join(EPYC_DDR4.replace("Channel2", f"Channel{n}").replace("0x0037", f"0x00{40 + n}")
                     for n in range(8))
    gb_s, basis = bandwidth_of(parse_dmidecode(epyc))
    assert gb_s == 8 * 8 * 3.2 == 204.8 and "8 memory channel" in basis and "DDR4" in basis
    # two DIMMs on one channel (A) count once; B makes it dual channel
    am5 = AM5_DDR5 + "\n" + AM5_DDR5.split("\n\n", 2)[2].replace("CHANNEL A", "CHANNEL B").replace("0x0011", "0x0012")
    am5 += "\n" + AM5_DDR5.split("\n\n", 2)[2].replace("DIMM 0", "DIMM 1").replace("0x0011", "0x0013")
    assert bandwidth_of(parse_dmidecode(am5))[0] == 2 * 8 * 4.2 == 67.2


def test_dmidecode_is_the_fallback_when_sysfs_is_root_only(tmp_path):
    (tmp_path / "sys/firmware/dmi/entries").mkdir(parents=True)
    calls = []

    def run(cmd):
        calls.append(cmd)
        return TRX_DDR4

    gb_s, basis = smbios_bandwidth(tmp_path, run=run)
    assert calls == [["dmidecode", "-t", "17"]] and gb_s == 25.6 and "3200 MT/s DDR4" in basis
    info = read_system(tmp_path, run=run)
    assert info.ram_bandwidth_gb_s == 25.6


def test_detect_text_states_the_assumed_default(run_cli, tmp_path):
    r = run_cli("detect")
    assert r.returncode == 0
    line = next(x for x in r.stdout.splitlines() if x.startswith("system:"))
    assert "RAM bandwidth" in line and ("assumed" in line or "SMBIOS" in line or "Apple" in line)


def test_edac_channels_when_smbios_is_root_only(tmp_path):
    """EDAC's sysfs (world-readable) gives channels and type but no speed: say so, with the preset to give."""
    (tmp_path / "sys/firmware/dmi/entries").mkdir(parents=True)
    for mc in range(2):  # two memory controllers (sockets or dies), four channels each
        for ch in range(4):
            d = f"sys/devices/system/edac/mc/mc{mc}/dimm{ch * 2}"
            write(tmp_path, f"{d}/size", "32768\n")
            write(tmp_path, f"{d}/dimm_location", f"csrow {ch} channel {ch} \n")
            write(tmp_path, f"{d}/dimm_mem_type", "Registered-DDR4\n")
            e = f"sys/devices/system/edac/mc/mc{mc}/dimm{ch * 2 + 1}"  # the empty second slot
            write(tmp_path, f"{e}/size", "0\n")
            write(tmp_path, f"{e}/dimm_location", f"csrow {ch} channel {ch} \n")
    gb_s, basis = smbios_bandwidth(tmp_path, run=lambda cmd: None)
    assert gb_s is None
    assert "8 memory channel(s) of Registered-DDR4" in basis and "--ram-bw ddr4-MTSx8" in basis
