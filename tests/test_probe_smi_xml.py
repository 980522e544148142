"""`nvidia-smi -q -x` dumps and `nvidia-smi topo -m` text, read from the real captures in
../shared/data/nvidia_smi (INDEX.md says where each came from); hostile and broken XML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.errors import AdvisorError
from advisor.probe import smi_xml
from advisor.probe.common import bus_key, text, to_bytes, to_int, to_watts, topology_cell
from advisor.probe.smi_xml import read_smi_xml, read_topo_matrix

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nvidia_smi"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} not present")
MIB = 1024**2

# file: (GPUs, product name of GPU 0, fb total MiB, PCIe (max gen, card max gen, current gen, max width,
#        current width), MIG, driver). From INDEX.md and the files; gen/width None where the dump says N/A.
XML_EXPECTED = {
    "datakit_8x_v100s_pcie_passthrough.xml": (8, "Tesla V100S-PCIE-32GB", 32510, (3, None, 3, 16, 16), False, "460.73.01"),
    "datakit_v100_pcie_32gb_drv460.xml": (1, "Tesla V100-PCIE-32GB", 32510, (3, None, 3, 16, 16), False, "460.39"),
    "netdata_a100_sxm4_40gb_mig.xml": (1, "NVIDIA A100-SXM4-40GB", 40960, (4, None, 4, 16, 16), True, "510.47.03"),
    "netdata_rtx2080_windows_drv516.xml": (1, "NVIDIA GeForce RTX 2080", 8192, (3, None, 3, 16, 8), False, "516.59"),
    "netdata_rtx3060_laptop_drv515.xml": (1, "NVIDIA GeForce RTX 3060 Laptop GPU", 6144, (4, None, 1, 16, 8), False, "515.65.01"),
    "netdata_rtx4090_drv535.xml": (1, "NVIDIA GeForce RTX 4090", 24564, (3, 4, 1, 16, 16), False, "535.86.05"),
    "netdata_tesla_p100_pcie_drv510.xml": (1, "Tesla P100-PCIE-16GB", 16384, (3, None, 3, 16, 16), False, "510.47.03"),
    "telegraf_2x_rtx2070_v13.xml": (2, "NVIDIA GeForce RTX 2070", 8192, (3, 3, 1, 16, 8), False, "590.44.01"),
    "telegraf_2x_rtx2080_v13.xml": (2, "NVIDIA GeForce RTX 2080", 8192, (3, 3, 1, 16, 8), False, "590.44.01"),
    "telegraf_2x_rtxa5000_v13.xml": (2, "NVIDIA RTX A5000", 24564, (4, 4, 1, 16, 16), False, "590.44.01"),
    "telegraf_a100_sxm4_80gb_mig_v12_1of4gpus.xml": (1, "NVIDIA A100-SXM4-80GB", 81920, (4, 4, 4, 16, 16), True, "535.54.03"),
    "telegraf_a10g_drv515.xml": (1, "NVIDIA A10G", 23028, (4, None, 1, 16, 8), False, "515.105.01"),
    "telegraf_grid_p4_1q_vgpu_win.xml": (1, "GRID P4-1Q", 1024, None, False, "513.46"),
    "telegraf_gt1030_drv470.xml": (1, "NVIDIA GeForce GT 1030", 1998, (3, None, 3, 4, 4), False, "470.74"),
    "telegraf_gtx1660ti_graphics_device_drv418.xml": (1, "Graphics Device", 5912, (3, None, 1, 16, 16), None, "418.43"),
    "telegraf_quadro_p2000_v12.xml": (1, "Quadro P2000", 5120, (3, 3, 1, 16, 8), False, "525.125.06"),
    "telegraf_quadro_p400_drv418_nodoctype.xml": (1, "Quadro P400", 1998, (3, None, 1, 16, 16), None, "418.43"),
    "telegraf_rtx3060_v12_drv570.xml": (1, "NVIDIA GeForce RTX 3060", 12288, (4, 4, 1, 16, 16), False, "570.124.04"),
    "telegraf_rtx3090_v12_drv525.xml": (1, "NVIDIA GeForce RTX 3090", 24576, (4, 4, 1, 16, 16), False, "525.147.05"),
    "telegraf_rtx3090_v13_drv590.xml": (1, "NVIDIA GeForce RTX 3090", 24576, (4, 4, 1, 16, 16), False, "590.44.01"),
    "telegraf_rtx4000_sff_ada_v13.xml": (1, "NVIDIA RTX 4000 SFF Ada Generation", 20475, (4, 4, 1, 16, 16), False, "595.84"),
    "telegraf_rtx_pro6000_blackwell_maxq_v13.xml": (
        1, "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 97887, (4, 5, 1, 16, 16), False, "590.44.01"),
    "telegraf_tesla_t4_drv515.xml": (1, "Tesla T4", 15360, (3, None, 3, 16, 8), False, "515.105.01"),
}


@needs_data
def test_the_table_covers_every_capture():
    assert sorted(p.name for p in DATA.glob("*.xml")) == sorted(XML_EXPECTED)


@needs_data
@pytest.mark.parametrize("name", sorted(XML_EXPECTED))
def test_real_capture(name):
    count, product, total_mib, pcie, mig, driver = XML_EXPECTED[name]
    d = read_smi_xml(DATA / name)
    assert d.source == "nvidia-smi-xml"
    assert d.driver_version == driver and d.cuda_version
    assert len(d.gpus) == count
    assert [g.index for g in d.gpus] == list(range(count))
    for g in d.gpus:
        assert g.name == product
        assert g.vram_bytes == total_mib * MIB
        assert g.vram_free_bytes is not None and 0 <= g.vram_free_bytes <= g.vram_bytes
        assert g.mig is mig
        assert bus_key(g.pci_bus_id) is not None and g.uuid.startswith("GPU-")
        assert not g.lost and not g.unified_memory and g.nvlink_peers == ()
        got = g.pcie and (g.pcie.gen_max, g.pcie.gen_card_max, g.pcie.gen_current, g.pcie.width_max, g.pcie.width_current)
        assert got == pcie
        assert g.power_limit_w is None or g.power_limit_w > 0
    assert d.topology is None and d.p2p is None
    j = json.loads(json.dumps(d.to_json()))
    assert j["system"]["ram_bytes"] is None  # a dump says nothing about the host


@needs_data
def test_partial_dump_says_so():
    d = read_smi_xml(DATA / "telegraf_a100_sxm4_80gb_mig_v12_1of4gpus.xml")
    assert any("4 GPUs" in w and "describes 1" in w for w in d.warnings)


@needs_data
def test_reserved_memory_and_power_variants():
    v13 = read_smi_xml(DATA / "telegraf_rtx3090_v13_drv590.xml").gpus[0]
    assert v13.vram_reserved_bytes == 450 * MIB and v13.power_limit_w == 350.0  # gpu_power_readings
    old = read_smi_xml(DATA / "datakit_v100_pcie_32gb_drv460.xml").gpus[0]
    assert old.vram_reserved_bytes is None and old.power_limit_w == 250.0  # power_readings, no reserved
    laptop = read_smi_xml(DATA / "netdata_rtx3060_laptop_drv515.xml").gpus[0]
    assert laptop.power_limit_w is None  # N/A


@needs_data
def test_bytes_input_and_multi_gpu_bus_ids():
    d = read_smi_xml((DATA / "telegraf_2x_rtxa5000_v13.xml").read_bytes())
    assert [g.pci_bus_id for g in d.gpus] == ["00000000:81:00.0", "00000000:C1:00.0"]


# -- hostile and broken input ----------------------------------------------------------------------

GOOD = b"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><driver_version>550.54.15</driver_version><attached_gpus>1</attached_gpus>
<gpu id="00000000:01:00.0"><product_name>NVIDIA GB10</product_name>
<fb_memory_usage><total>[N/A]</total><reserved>[N/A]</reserved><used>[N/A]</used><free>[N/A]</free></fb_memory_usage>
<pci><pci_bus_id>0000000F:01:00.0</pci_bus_id></pci></gpu></nvidia_smi_log>"""

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<nvidia_smi_log><driver_version>&lol3;</driver_version></nvidia_smi_log>"""

XXE = b"""<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<nvidia_smi_log><driver_version>&xxe;</driver_version></nvidia_smi_log>"""


def test_minimal_dump_with_unreadable_memory_is_unified_and_null():
    d = read_smi_xml(GOOD)
    (g,) = d.gpus
    assert g.vram_bytes is None and g.vram_free_bytes is None and g.unified_memory is True
    assert g.mig is None and g.pcie is None and g.power_limit_w is None
    assert any("unified memory" in w for w in d.warnings)


@pytest.mark.parametrize(("data", "words"), [
    (BOMB, "entity"),
    (XXE, "entity"),
    (b"<nvidia_smi_log><gpu></nvidia_smi_log>", "not valid XML"),
    (b"", "not valid XML"),
    (b"this is not xml at all", "not valid XML"),
    (b"<html><body>nvidia</body></html>", "root element <html>"),
    ("<nvidia_smi_log>\x00</nvidia_smi_log>".encode("utf-16"), "UTF-8"),
])
def test_bad_xml_raises_advisor_error(data, words):
    with pytest.raises(AdvisorError) as err:
        read_smi_xml(data)
    assert words in err.value.message
    assert "nvidia-smi -q -x" in err.value.hint


@needs_data
def test_truncated_real_capture_raises_advisor_error(tmp_path):
    raw = (DATA / "telegraf_rtx3090_v13_drv590.xml").read_bytes()
    cut = tmp_path / "cut.xml"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(AdvisorError, match="not valid XML"):
        read_smi_xml(cut)


def test_oversized_and_missing_files(tmp_path, monkeypatch):
    big = tmp_path / "big.xml"
    big.write_bytes(b"<nvidia_smi_log>" + b" " * 100 + b"</nvidia_smi_log>")
    monkeypatch.setattr(smi_xml, "MAX_BYTES", 50)
    with pytest.raises(AdvisorError, match="larger than"):
        read_smi_xml(big)
    with pytest.raises(AdvisorError, match="larger than"):
        read_smi_xml(big.read_bytes())
    with pytest.raises(AdvisorError, match="cannot read"):
        read_smi_xml(tmp_path / "absent.xml")


def test_empty_dump_is_a_warning_not_an_error():
    d = read_smi_xml(b"<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>")
    assert d.gpus == () and d.source == "nvidia-smi-xml" and d.warnings


# -- shared value parsing --------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["N/A", "[N/A]", "Not Supported", "[Not Supported]", "", "  ", None, "Unknown Error",
                                 "Requested functionality has been deprecated", b"N/A"])
def test_unavailable_values_are_none(raw):
    assert text(raw) is None
    assert to_int(raw) is None and to_bytes(raw) is None and to_watts(raw) is None


def test_units():
    assert to_bytes("24576 MiB") == 24576 * MIB and to_bytes("0 MiB") == 0 and to_bytes("12") is None
    assert to_int("16x") == 16 and to_int("4") == 4 and to_int("x16") is None
    assert to_watts("450.00 W") == 450.0
    assert bus_key("00000000:0A:00.0") == bus_key("0000:0a:00.0") == (0, 10, 0, 0)
    assert bus_key("0000000F:01:00.0") == (15, 1, 0, 0) and bus_key("garbage") is None


# -- nvidia-smi topo -m -----------------------------------------------------------------------------

# file: (GPUs, {(row, col): word} spot checks, the set of words between GPUs)
TOPO_EXPECTED = {
    "topo_2x_a100_della_sys_jdh4.txt": (2, {(0, 1): "SYS"}, {"SYS"}),
    "topo_2x_gtx1080ti_phb_xuesong.txt": (2, {(1, 0): "PHB"}, {"PHB"}),
    "topo_2x_nv2_snippet_mlengineering.txt": (2, {(0, 1): "NV2"}, {"NV2"}),
    "topo_2x_rtx3090_nv4_5900x_idx2434274566.txt": (2, {(0, 1): "NV4"}, {"NV4"}),
    "topo_2x_rtx5090_phb_club3090_issue1229.txt": (2, {(0, 1): "PHB"}, {"PHB"}),
    "topo_3x_rtxa6000_nv4pair_siboehm.txt": (3, {(0, 1): "NV4", (0, 2): "NODE", (2, 1): "NODE"}, {"NV4", "NODE"}),
    "topo_4x_a100_80gb_pcie_nv12_pairs_4numa_idx31603206646.txt": (4, {(0, 1): "NV12", (2, 3): "NV12", (1, 2): "SYS"},
                                                                  {"NV12", "SYS"}),
    "topo_4x_a10_sys_xuesong.txt": (4, {(3, 0): "SYS"}, {"SYS"}),
    "topo_4x_h100_nv6_4nic_matrix_only_nccl_issue1617.txt": (4, {(0, 3): "NV6"}, {"NV6"}),
    "topo_4x_v100_aws_p3_8xlarge_nv1nv2_huvm.txt": (4, {(0, 1): "NV1", (0, 3): "NV2", (1, 2): "NV2", (1, 3): "NV1"},
                                                    {"NV1", "NV2"}),
    "topo_4x_v100_traverse_power9_nv3_jdh4.txt": (4, {(0, 1): "NV3", (2, 3): "NV3", (0, 2): "SYS"}, {"NV3", "SYS"}),
    "topo_8x_a100_nv12_17nic_xuesong.txt": (8, {(0, 7): "NV12"}, {"NV12"}),
    "topo_8x_a800_nv8_4nic_llmaction.txt": (8, {(7, 6): "NV8"}, {"NV8"}),
    "topo_8x_h800_nv8_truncated_paste_llmaction.txt": (8, {(7, 0): "NV8"}, {"NV8"}),
    "topo_8x_nv18_2numa_mlengineering.txt": (8, {(0, 4): "NV18"}, {"NV18"}),
    "topo_8x_p40_pix_pxb_soc_legacy_idx9921688337.txt": (8, {(0, 3): "PIX", (0, 4): "PXB", (5, 7): "PIX"},
                                                         {"PIX", "PXB"}),
    "topo_8x_rtx4090_all_sys_2nic_gpuallocator_issue17.txt": (8, {(6, 7): "SYS"}, {"SYS"}),
    "topo_rtx3090_plus_2x_v100_sxm2_nv6_ansi_minjaechandesu.txt": (3, {(1, 2): "NV6", (0, 1): "NODE"}, {"NV6", "NODE"}),
}


@needs_data
def test_topo_table_covers_every_capture():
    assert sorted(p.name for p in DATA.glob("topo_*.txt")) == sorted(TOPO_EXPECTED)


@needs_data
@pytest.mark.parametrize("name", sorted(TOPO_EXPECTED))
def test_topo_matrix(name):
    count, cells, words = TOPO_EXPECTED[name]
    m = read_topo_matrix((DATA / name).read_bytes().decode("utf-8"))
    assert len(m) == count and all(len(row) == count for row in m)
    assert all(m[i][i] == "X" for i in range(count))
    assert all(m[i][j] == m[j][i] for i in range(count) for j in range(count))
    assert {m[i][j] for i in range(count) for j in range(count) if i != j} == words
    for (i, j), word in cells.items():
        assert m[i][j] == word


def test_topo_rejects_text_without_a_matrix():
    with pytest.raises(AdvisorError):
        read_topo_matrix("Legend:\n  X = Self\n")
    with pytest.raises(AdvisorError):
        read_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n")
    assert topology_cell("SOC") == "SYS" and topology_cell("nv4") == "NV4" and topology_cell("0-31") is None


def test_utf16_and_bom_dumps_read_like_utf8():
    """PowerShell's `nvidia-smi -q -x > rig.xml` writes UTF-16 with a BOM; Notepad adds a UTF-8 BOM."""
    text = GOOD.decode("utf-8")
    want = read_smi_xml(GOOD)
    assert read_smi_xml(text.encode("utf-16")) == want
    assert read_smi_xml(b"\xef\xbb\xbf" + GOOD) == want
