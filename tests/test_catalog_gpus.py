"""The built-in GPU catalog (hardware_db/gpus-*.toml) and presets (hardware_db/presets.toml): schema,
contract ids, internal consistency, and agreement with the shared reference table
(../shared/data/gpu_specs.csv, skipped when that folder is absent)."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from advisor.catalog.types import GpuSpec, PresetRig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DB = ROOT / "hardware_db"
GPU_FILES = sorted(DB.glob("gpus-*.toml"))
PRESETS_TOML = DB / "presets.toml"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SPECS_CSV = SHARED / "data" / "gpu_specs.csv"

# docs/contract.md, section "Ids": the GPU ids the catalog must have.
CONTRACT_IDS = {
    # GeForce
    "rtx-3060-12gb", "rtx-3070", "rtx-3080-10gb", "rtx-3080-ti", "rtx-3090", "rtx-3090-ti",
    "rtx-4060-ti-16gb", "rtx-4070-ti", "rtx-4070-ti-super", "rtx-4080", "rtx-4090",
    "rtx-5060-ti-16gb", "rtx-5070-ti", "rtx-5080", "rtx-5090",
    # Workstation
    "rtx-a4000", "rtx-a5000", "rtx-a6000", "a40", "rtx-4000-ada", "rtx-5000-ada", "rtx-6000-ada",
    "rtx-pro-6000",
    # Data centre
    "tesla-p40", "v100-pcie-16gb", "v100-sxm2-32gb", "a100-pcie-40gb", "a100-pcie-80gb",
    "a100-sxm4-40gb", "a100-sxm4-80gb", "h100-pcie", "h100-sxm", "h100-nvl", "h200-sxm", "b200",
    "l4", "l40s", "t4",
    # AMD and Intel
    "rx-7900-xtx", "radeon-pro-w7900", "mi300x", "arc-a770-16gb",
    # Unified memory
    "m1-8gb", "m1-max-64gb", "m2-ultra-192gb", "m3-max-64gb", "m3-max-128gb", "m4-max-128gb",
    "m3-ultra-512gb", "dgx-spark", "ryzen-ai-max-395-128gb",
}

VENDORS = {"nvidia", "amd", "intel", "apple"}
CATEGORIES = {"consumer", "workstation", "datacenter", "unified"}
ARCHES = {
    "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "rdna3", "cdna3", "xe-hpg",
    "apple-m1", "apple-m2", "apple-m3", "apple-m4", "gb10", "strix-halo",
    "rdna4", "xe2", "gcn5", "cdna2", "apple-m5",
}
NVLINK_TOPOLOGIES = {"bridge", "switch", "mesh"}
PRICE_CONDITIONS = {"new", "used", "msrp"}
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
DATE_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-\d{2})?$")

# Rows of shared/data/gpu_specs.csv (column `name`) and the catalog ids each describes. The CSV keeps
# one row per chip for Apple/V100 with the other capacities in `vram_options_gb`; VRAM is checked
# against the row's capacity or one of its listed options.
CSV_TO_IDS = {
    "GeForce RTX 3060 12GB": ["rtx-3060-12gb"],
    "GeForce RTX 3070": ["rtx-3070"],
    "GeForce RTX 3080 10GB": ["rtx-3080-10gb"],
    "GeForce RTX 3090": ["rtx-3090"],
    "GeForce RTX 3090 Ti": ["rtx-3090-ti"],
    "GeForce RTX 4060 Ti 16GB": ["rtx-4060-ti-16gb"],
    "GeForce RTX 4070 Ti Super": ["rtx-4070-ti-super"],
    "GeForce RTX 4080": ["rtx-4080"],
    "GeForce RTX 4090": ["rtx-4090"],
    "GeForce RTX 5060 Ti 16GB": ["rtx-5060-ti-16gb"],
    "GeForce RTX 5070 Ti": ["rtx-5070-ti"],
    "GeForce RTX 5080": ["rtx-5080"],
    "GeForce RTX 5090": ["rtx-5090"],
    "RTX A4000": ["rtx-a4000"],
    "RTX A5000": ["rtx-a5000"],
    "RTX A6000": ["rtx-a6000"],
    "RTX 6000 Ada Generation": ["rtx-6000-ada"],
    "RTX PRO 6000 Blackwell Workstation Edition": ["rtx-pro-6000"],
    "Tesla P40": ["tesla-p40"],
    "Tesla V100 SXM2 16/32GB": ["v100-sxm2-16gb", "v100-sxm2-32gb"],
    "Tesla V100 PCIe 16/32GB": ["v100-pcie-16gb", "v100-pcie-32gb"],
    "A100 PCIe 40GB": ["a100-pcie-40gb"],
    "A100 PCIe 80GB": ["a100-pcie-80gb"],
    "A100 SXM4 40GB": ["a100-sxm4-40gb"],
    "A100 SXM4 80GB": ["a100-sxm4-80gb"],
    "H100 PCIe": ["h100-pcie"],
    "H100 SXM5": ["h100-sxm"],
    "H100 NVL": ["h100-nvl"],
    "H200 SXM": ["h200-sxm"],
    "B200 (HGX)": ["b200"],
    "L40S": ["l40s"],
    "L4": ["l4"],
    "T4": ["t4"],
    "Radeon RX 7900 XTX": ["rx-7900-xtx"],
    "Radeon PRO W7900": ["radeon-pro-w7900"],
    "Instinct MI300X": ["mi300x"],
    "Arc A770 16GB": ["arc-a770-16gb"],
    "Apple M1 Max": ["m1-max-32gb", "m1-max-64gb"],
    "Apple M1 Ultra": ["m1-ultra-128gb"],
    "Apple M2 Max": ["m2-max-96gb"],
    "Apple M2 Ultra": ["m2-ultra-192gb"],
    "Apple M3 Max": ["m3-max-128gb"],
    "Apple M3 Ultra": ["m3-ultra-512gb"],
    "Apple M4 Max": ["m4-max-128gb"],
    "NVIDIA DGX Spark (GB10)": ["dgx-spark"],
    "AMD Ryzen AI Max+ 395 (Strix Halo)": ["ryzen-ai-max-395-128gb"],
}
# Catalog ids whose chip has a CSV row but whose memory size is not among that row's capacities: only
# the bandwidth is compared (the 40-core M3 Max sold with 64 GB has the 128 GB part's 400 GB/s).
CSV_BANDWIDTH_ONLY = {"Apple M3 Max": ["m3-max-64gb"]}
TOLERANCE = 0.02


def _load(path: Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _entries() -> list[tuple[str, dict]]:
    out = []
    for path in GPU_FILES:
        for entry in _load(path).get("gpu", []):
            out.append((path.name, entry))
    return out


ENTRIES = _entries()
BY_ID = {entry["id"]: entry for _, entry in ENTRIES}
ADAPTER = TypeAdapter(GpuSpec)


def _ids(entries):
    return [f"{fname}:{entry.get('id', '?')}" for fname, entry in entries]


# -- files and schema ------------------------------------------------------------------------------


def test_gpu_files_exist_and_hold_only_gpu_tables():
    names = {p.name for p in GPU_FILES}
    assert {"gpus-nvidia.toml", "gpus-other.toml"} <= names
    for path in GPU_FILES:
        assert set(_load(path)) == {"gpu"}, f"{path.name}: only [[gpu]] tables belong here"


@pytest.mark.parametrize(("fname", "entry"), ENTRIES, ids=_ids(ENTRIES))
def test_entry_validates_against_gpuspec(fname, entry):
    spec = ADAPTER.validate_python(entry)  # the dataclass config forbids unknown keys
    assert isinstance(spec, GpuSpec)
    assert spec.vram_bytes > 0


def test_unknown_keys_are_rejected():
    entry = dict(BY_ID["rtx-3090"], tflops=1.0)
    with pytest.raises(Exception):
        ADAPTER.validate_python(entry)


def test_ids_unique_and_lower_case_hyphenated():
    ids = [entry["id"] for _, entry in ENTRIES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    bad = [i for i in ids if not ID_RE.match(i)]
    assert not bad, bad


def test_every_contract_gpu_id_is_present():
    missing = CONTRACT_IDS - set(BY_ID)
    assert not missing, sorted(missing)


def test_aliases_unique_case_insensitive_and_never_another_id():
    seen: dict[str, str] = {ident.lower(): ident for ident in BY_ID}
    clashes = []
    for ident, entry in BY_ID.items():
        for alias in entry.get("aliases", []):
            key = alias.strip().lower()
            assert key, f"{ident}: empty alias"
            owner = seen.get(key)
            if owner is not None and owner != ident:
                clashes.append((alias, owner, ident))
            seen[key] = ident
    assert not clashes, clashes


# -- field sanity ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fname", "entry"), ENTRIES, ids=_ids(ENTRIES))
def test_enumerated_fields_and_sources(fname, entry):
    assert entry["vendor"] in VENDORS
    assert entry["category"] in CATEGORIES
    assert entry["arch"] in ARCHES
    assert entry["sources"], "every entry cites its sources"
    assert all(isinstance(s, str) and s.strip() for s in entry["sources"])
    assert entry.get("fp16_tflops_basis", "").strip(), "every fp16_tflops says how it was derived"
    for key in ("vram_gib", "memory_bandwidth_gb_s", "fp16_tflops", "power_w"):
        assert entry[key] > 0, key
    if fname == "gpus-nvidia.toml":
        assert entry["vendor"] == "nvidia" and entry["category"] != "unified"
    else:
        assert entry["vendor"] != "nvidia" or entry["category"] == "unified"


@pytest.mark.parametrize(("fname", "entry"), ENTRIES, ids=_ids(ENTRIES))
def test_unified_memory_entries_are_socs(fname, entry):
    unified = entry.get("unified_memory", False)
    assert unified == (entry["category"] == "unified")
    if unified:
        assert "pcie_gen" not in entry and "pcie_lanes" not in entry
        assert "nvlink" not in entry
    if entry["vendor"] == "apple":
        assert unified and entry["arch"].startswith("apple-")
        size = int(entry["vram_gib"])
        assert entry["id"].endswith(f"-{size}gb"), "Apple ids name the memory size"


@pytest.mark.parametrize(("fname", "entry"), ENTRIES, ids=_ids(ENTRIES))
def test_pcie_and_nvlink_are_plausible(fname, entry):
    if "pcie_gen" in entry:
        assert entry["pcie_gen"] in (3, 4, 5, 6)
        assert entry["pcie_lanes"] in (4, 8, 16)
    nvlink = entry.get("nvlink")
    if nvlink is not None:
        assert entry["vendor"] == "nvidia"
        assert 1 <= nvlink["generation"] <= 5
        assert nvlink["topology"] in NVLINK_TOPOLOGIES
        assert nvlink["max_gpus"] >= 2 and nvlink["gb_s"] > 0
        if nvlink["topology"] == "bridge":
            assert nvlink["max_gpus"] == 2
    if entry["arch"] in ("ada",) or (entry["arch"] == "blackwell" and entry["category"] != "datacenter"):
        assert nvlink is None, "Ada and Blackwell client/workstation parts have no NVLink"
    if entry["category"] == "consumer" and entry["vendor"] == "nvidia":
        assert entry.get("pcie_p2p") is False, "GeForce: no PCIe P2P on the stock driver"


@pytest.mark.parametrize(("fname", "entry"), ENTRIES, ids=_ids(ENTRIES))
def test_price_is_dated_and_sourced(fname, entry):
    price = entry.get("price")
    if price is None:
        assert "price" in entry.get("notes", "").lower(), "say in notes why there is no price"
        return
    assert price["usd"] > 0
    assert DATE_RE.match(price["date"]), price["date"]
    assert price["source"].strip()
    assert price.get("condition", "new") in PRICE_CONDITIONS


def test_known_facts_spot_checks():
    # A few values with a primary source quoted in the entry; guards against slips when editing.
    assert BY_ID["rtx-3090"]["nvlink"] == {"generation": 3, "gb_s": 112.5, "max_gpus": 2, "topology": "bridge"}
    assert BY_ID["h100-sxm"]["nvlink"]["gb_s"] == 900 and BY_ID["h100-sxm"]["nvlink"]["topology"] == "switch"
    assert BY_ID["a100-sxm4-80gb"]["nvlink"]["gb_s"] == 600
    assert BY_ID["b200"]["nvlink"]["gb_s"] == 1800
    assert BY_ID["v100-sxm2-32gb"]["nvlink"] == {"generation": 2, "gb_s": 300, "max_gpus": 8, "topology": "mesh"}
    assert "nvlink" not in BY_ID["rtx-4090"] and "nvlink" not in BY_ID["rtx-5090"]
    assert BY_ID["m1-8gb"]["memory_bandwidth_gb_s"] == pytest.approx(68.25)
    assert BY_ID["rtx-4060-ti-16gb"]["pcie_lanes"] == 8 and BY_ID["rtx-5060-ti-16gb"]["pcie_lanes"] == 8
    # P40: the FP32 rate stands in for FP16 (1:64 FP16, no tensor cores).
    assert BY_ID["tesla-p40"]["fp16_tflops"] == pytest.approx(11.76)


def test_detection_names_from_real_nvidia_smi_captures_resolve():
    # Exact product names seen in shared/data/nvidia_smi captures; each must be an alias of one entry.
    names = {
        "NVIDIA GeForce RTX 3090": "rtx-3090",
        "NVIDIA GeForce RTX 4090": "rtx-4090",
        "NVIDIA GeForce RTX 3060": "rtx-3060-12gb",
        "NVIDIA GeForce RTX 2070": "rtx-2070",
        "NVIDIA GeForce RTX 2080": "rtx-2080",
        "NVIDIA RTX A5000": "rtx-a5000",
        "NVIDIA RTX A6000": "rtx-a6000",
        "NVIDIA A40": "a40",
        "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada",
        "NVIDIA RTX 4000 SFF Ada Generation": "rtx-4000-sff-ada",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "rtx-pro-6000-maxq",
        "NVIDIA L4": "l4",
        "NVIDIA A10G": "a10g",
        "NVIDIA A100-SXM4-40GB": "a100-sxm4-40gb",
        "NVIDIA A100-SXM4-80GB": "a100-sxm4-80gb",
        "NVIDIA H100 80GB HBM3": "h100-sxm",
        "NVIDIA H100 NVL": "h100-nvl",
        "NVIDIA H800": "h800",
        "NVIDIA TITAN V": "titan-v",
        "Tesla T4": "t4",
        "Tesla V100-PCIE-32GB": "v100-pcie-32gb",
        "Tesla V100S-PCIE-32GB": "v100s-pcie-32gb",
    }
    owner = {alias.lower(): ident for ident, e in BY_ID.items() for alias in e.get("aliases", [])}
    wrong = {n: owner.get(n.lower()) for n, want in names.items() if owner.get(n.lower()) != want}
    assert not wrong, wrong


# -- agreement with the shared reference table ----------------------------------------------------


def _csv_rows() -> dict[str, dict]:
    if not SPECS_CSV.is_file():
        pytest.skip(f"{SPECS_CSV} not found (the shared reference folder is absent)")
    with SPECS_CSV.open(newline="", encoding="utf-8") as fh:
        return {row["name"]: row for row in csv.DictReader(fh)}


def _options(row: dict) -> list[float]:
    sizes = [float(row["vram_gb"])]
    for part in re.split(r"[;,]", row.get("vram_options_gb") or ""):
        m = re.match(r"\s*(\d+(?:\.\d+)?)", part)
        if m:
            sizes.append(float(m.group(1)))
    return sizes


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))


def test_csv_mapping_names_existing_rows_and_ids():
    rows = _csv_rows()
    for name, ids in {**CSV_TO_IDS, **CSV_BANDWIDTH_ONLY}.items():
        assert name in rows, f"gpu_specs.csv has no row {name!r}"
        for ident in ids:
            assert ident in BY_ID, f"catalog has no id {ident!r} (mapped from {name!r})"


# Cards whose memory is recorded as the driver reports it (ECC on, or HBM the driver keeps back): the
# capture (shared/data/nvidia_smi) each comes from, and its total in MiB. The CSV's nominal GB is not
# compared for these; the captures are, when present.
DRIVER_REPORTED_MIB = {
    "t4": ("telegraf_tesla_t4_drv515.xml", 15360), "l4": ("q_l4_drv550_thamada.txt", 23034),
    "a10g": ("telegraf_a10g_drv515.xml", 23028),
    "a40": ("q_10x_a40_drv550_thamada.txt", 46068), "l40s": (None, 46068),
    "h100-sxm": ("q_8x_h100_sxm_hbm3_drv565_thamada.txt", 81559), "h800": ("q_h800_i0_of_8_llmaction.txt", 81559),
    "h100-nvl": ("q_2x_h100_nvl_drv550_thamada.txt", 95830),
    "v100-pcie-32gb": ("datakit_v100_pcie_32gb_drv460.xml", 32510),
    "v100s-pcie-32gb": ("datakit_8x_v100s_pcie_passthrough.xml", 32510),
    "rtx-pro-6000-maxq": ("telegraf_rtx_pro6000_blackwell_maxq_v13.xml", 97887),
}


@pytest.mark.parametrize("ident", sorted(DRIVER_REPORTED_MIB))
def test_driver_reported_capacities_match_the_captures(ident):
    capture, mib = DRIVER_REPORTED_MIB[ident]
    assert BY_ID[ident]["vram_gib"] * 1024 == mib
    if capture is None:
        return
    path = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nvidia_smi" / capture
    if not path.is_file():
        pytest.skip(f"shared capture not present ({path})")
    text = path.read_text(errors="replace")
    assert f"<total>{mib} MiB</total>" in text or re.search(rf"Total\s+:\s+{mib} MiB", text), capture


@pytest.mark.parametrize(("name", "ident"), [(n, i) for n, ids in CSV_TO_IDS.items() for i in ids])
def test_vram_and_bandwidth_agree_with_shared_csv(name, ident):
    row = _csv_rows()[name]
    entry = BY_ID[ident]
    if ident in DRIVER_REPORTED_MIB:  # checked against its capture above; the CSV keeps the nominal size
        assert entry["vram_gib"] < max(_options(row))
        assert _close(entry["memory_bandwidth_gb_s"], float(row["memory_bandwidth_gb_s"]))
        return
    assert any(_close(entry["vram_gib"], size) for size in _options(row)), (
        f"{ident}: vram {entry['vram_gib']} vs CSV {_options(row)}")
    assert _close(entry["memory_bandwidth_gb_s"], float(row["memory_bandwidth_gb_s"])), (
        f"{ident}: bandwidth {entry['memory_bandwidth_gb_s']} vs CSV {row['memory_bandwidth_gb_s']}")


@pytest.mark.parametrize(("name", "ident"), [(n, i) for n, ids in CSV_BANDWIDTH_ONLY.items() for i in ids])
def test_bandwidth_agrees_with_shared_csv(name, ident):
    row = _csv_rows()[name]
    assert _close(BY_ID[ident]["memory_bandwidth_gb_s"], float(row["memory_bandwidth_gb_s"]))


@pytest.mark.parametrize(("name", "ident"), [(n, i) for n, ids in CSV_TO_IDS.items() for i in ids])
def test_dense_fp16_agrees_with_shared_csv_where_filled(name, ident):
    row = _csv_rows()[name]
    value = row["fp16_bf16_tensor_tflops_dense"].strip()
    if not value:
        pytest.skip(f"{name}: CSV leaves dense FP16 empty")
    assert _close(BY_ID[ident]["fp16_tflops"], float(value)), (
        f"{ident}: fp16 {BY_ID[ident]['fp16_tflops']} vs CSV {value}")


# -- presets ---------------------------------------------------------------------------------------

PRESETS = _load(PRESETS_TOML).get("preset", []) if PRESETS_TOML.is_file() else []
SPEC_RE = re.compile(r"^(?:(\d+)x)?([a-z0-9][a-z0-9.-]*)$")


def test_presets_file_holds_only_presets():
    assert PRESETS_TOML.is_file()
    assert set(_load(PRESETS_TOML)) == {"preset"}
    ids = [p["id"] for p in PRESETS]
    assert len(ids) == len(set(ids))
    assert all(ID_RE.match(i) for i in ids), ids


@pytest.mark.parametrize("preset", PRESETS, ids=[p.get("id", "?") for p in PRESETS])
def test_preset_validates_and_names_known_gpus(preset):
    rig = TypeAdapter(PresetRig).validate_python(preset)
    assert rig.gpus
    for spec in rig.gpus:
        m = SPEC_RE.match(spec)
        assert m, spec
        count, gid = int(m.group(1) or 1), m.group(2)
        assert count >= 1
        assert gid in BY_ID, f"{preset['id']}: unknown GPU {gid!r}"
        if rig.nvlink:
            nvlink = BY_ID[gid].get("nvlink")
            assert nvlink is not None, f"{preset['id']}: {gid} has no NVLink"
            assert count <= nvlink["max_gpus"], f"{preset['id']}: {count} GPUs exceed the NVLink domain"


def test_presets_cover_the_rigs_people_ask_about():
    specs = {tuple(p["gpus"]) + (p.get("nvlink", False),) for p in PRESETS}
    for want in [("rtx-4090", False), ("2xrtx-3090", False), ("2xrtx-3090", True), ("2xrtx-4090", False),
                 ("4xrtx-3090", False), ("rtx-3060-12gb", False), ("m2-ultra-192gb", False),
                 ("m4-max-128gb", False), ("dgx-spark", False), ("8xh100-sxm", True), ("2xrtx-5090", False),
                 ("rtx-pro-6000", False)]:
        assert want in specs, want
