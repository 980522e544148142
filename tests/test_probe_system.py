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
