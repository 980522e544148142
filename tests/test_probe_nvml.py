"""The NVML probe against a hand-written fake pynvml (tests/fakes), plus `gpu` tests on real hardware."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys

import pytest

from advisor.probe import nvml as nvml_probe
from advisor.probe.nvml import read_nvml

try:
    from tests.fakes.fake_nvml import FUNCTION_NOT_FOUND, FakeGpu, FakeNvml, SCENARIOS, scenario
except ImportError:  # tests/ itself on sys.path (plain `pytest` without a tests package)
    from fakes.fake_nvml import FUNCTION_NOT_FOUND, FakeGpu, FakeNvml, SCENARIOS, scenario

MIB = 1024**2
CONTRACT_GPU_KEYS = {"index", "name", "catalog_id", "uuid", "pci_bus_id", "vram_bytes", "vram_free_bytes", "pcie",
                     "nvlink_peers", "mig"}
CONTRACT_KEYS = {"source", "driver_version", "gpus", "topology", "system", "warnings"}


def run(name: str):
    fake = scenario(name)
    return read_nvml(nvml_module=fake), fake


# -- no NVIDIA GPU readable ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "reason"), [
    ("no_library", "library"),
    ("driver_not_loaded", "driver is not loaded"),
    ("no_permission", "permission"),
])
def test_unreadable_machine_is_source_none_with_reason_and_hint(name, reason):
    d, fake = run(name)
    assert d.source == "none"
    assert d.gpus == ()
    assert d.topology is None and d.p2p is None
    (warning,) = d.warnings
    assert reason in warning
    assert "advisor detect --from" in warning and "--gpu" in warning and "driver" in warning
    assert fake.shutdown_calls == 0  # init failed: nothing to shut down


def test_missing_binding_is_source_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    d = read_nvml()
    assert d.source == "none" and d.gpus == ()
    assert "nvidia-ml-py" in d.warnings[0]


def test_zero_gpus_is_a_result_not_an_error():
    d, fake = run("zero_gpus")
    assert d.source == "nvml"
    assert d.gpus == ()
    assert d.driver_version == "550.54.15"
    assert any("no NVIDIA GPU" in w for w in d.warnings)
    assert fake.shutdown_calls == 1


# -- scenarios -------------------------------------------------------------------------------------


def test_rtx3090_nvlink_pair():
    d, fake = run("rtx3090_nvlink_pair")
    assert d.source == "nvml"
    assert (d.driver_version, d.cuda_version) == ("560.35.03", "12.6")
    assert [g.name for g in d.gpus] == ["NVIDIA GeForce RTX 3090"] * 2
    a, b = d.gpus
    assert a.vram_bytes == 24576 * MIB and a.vram_reserved_bytes == 422 * MIB and a.vram_free_bytes == 24152 * MIB
    assert a.compute_capability == "8.6" and a.power_limit_w == 350.0 and a.mig is False
    assert a.nvlink_peers == (1,) and b.nvlink_peers == (0,)
    assert d.topology == (("X", "NV4"), ("NV4", "X"))
    assert d.p2p == (("X", "OK"), ("OK", "X"))
    assert d.warnings == ()  # idle Gen1 and the walk past the last link are not problems
    assert fake.shutdown_calls == 1 and fake.initialized == 0


def test_mixed_4090_3090_one_slot_capped_at_gen4_x4():
    d, _ = run("mixed_4090_3090_chipset")
    g4090, g3090 = d.gpus
    assert g4090.name == "NVIDIA GeForce RTX 4090" and g4090.compute_capability == "8.9"
    assert (g4090.pcie.gen_max, g4090.pcie.width_max) == (4, 16)
    assert (g3090.pcie.gen_max, g3090.pcie.width_max, g3090.pcie.gen_card_max) == (4, 4, 4)
    assert g4090.nvlink_peers == () and g3090.nvlink_peers == ()
    assert d.topology == (("X", "PHB"), ("PHB", "X"))
    assert d.p2p == (("X", "NS"), ("NS", "X"))
    assert d.warnings == ()  # no NVLink on a 4090 is an answer, not a failure


def test_h100_sxm_nvswitch_all_pairs_nv18():
    d, _ = run("h100_sxm_nvswitch_8x")
    assert len(d.gpus) == 8
    for i, row in enumerate(d.topology):
        assert row[i] == "X"
        assert all(word == "NV18" for j, word in enumerate(row) if j != i)
    for g in d.gpus:
        assert g.nvlink_peers == tuple(j for j in range(8) if j != g.index)
        assert g.pcie.gen_max == 5 and g.mig is False
    assert all(cell in ("X", "OK") for row in d.p2p for cell in row)
    assert d.warnings == ()


def test_mig_a100():
    d, _ = run("mig_a100")
    (g,) = d.gpus
    assert g.mig is True
    assert g.vram_bytes == 81920 * MIB
    assert d.topology == (("X",),)


def test_dgx_spark_unified_memory_is_null_not_zero():
    d, _ = run("dgx_spark")
    (g,) = d.gpus
    assert g.unified_memory is True
    assert g.vram_bytes is None and g.vram_free_bytes is None and g.vram_reserved_bytes is None
    assert g.pcie is None  # meaningless on a SoC
    assert g.power_limit_w is None
    assert g.compute_capability == "12.1"
    assert g.mig is False  # NotSupported means "no MIG here"
    assert any("unified memory" in w and "GB10" in w for w in d.warnings)
    assert any("power limit" in w and "GPU 0" in w for w in d.warnings)
    gj = d.to_json()["gpus"][0]
    assert gj["vram_bytes"] is None and gj["pcie"] is None and gj["unified_memory"] is True


def test_gpu_lost_mid_read_marks_it_and_reports_the_others():
    d, fake = run("gpu_lost")
    ok, lost = d.gpus
    assert not ok.lost and ok.vram_bytes == 24576 * MIB and ok.pcie is not None
    assert lost.lost is True and lost.index == 1
    assert lost.name == "NVIDIA GeForce RTX 3090"  # read before it fell off
    assert lost.vram_bytes is None
    assert any(w.startswith("GPU 1") and "lost" in w for w in d.warnings)
    assert fake.shutdown_calls == 1


def test_idle_link_at_gen1_is_recorded_not_flagged():
    d, _ = run("idle_gen1")
    (g,) = d.gpus
    assert (g.pcie.gen_current, g.pcie.gen_max, g.pcie.gen_card_max) == (1, 4, 4)
    assert (g.pcie.width_current, g.pcie.width_max) == (16, 16)
    assert d.warnings == ()
    assert "degrad" not in json.dumps(d.to_json()).lower()


def test_old_driver_falls_back_to_memory_v1_and_names_the_missing_query():
    d, _ = run("old_driver")
    (g,) = d.gpus
    assert g.vram_bytes == 24576 * MIB and g.vram_reserved_bytes is None
    assert g.pcie.gen_card_max is None and g.pcie.gen_max == 4
    (w,) = d.warnings
    assert "GPU 0 (NVIDIA GeForce RTX 3090)" in w and "PCIe card max generation" in w and "driver" in w


# -- robustness ------------------------------------------------------------------------------------


def test_binding_bug_ctypes_error_becomes_a_warning(monkeypatch):
    fake = scenario("idle_gen1")

    def broken(handle):
        raise ctypes.ArgumentError("argument 2: TypeError: wrong type")

    monkeypatch.setattr(fake, "nvmlDeviceGetCudaComputeCapability", broken)
    d = read_nvml(fake)
    assert d.gpus[0].compute_capability is None
    assert any("compute capability" in w for w in d.warnings)


def test_old_binding_returning_bytes():
    class BytesNvml(FakeNvml):
        def nvmlDeviceGetName(self, h):
            return super().nvmlDeviceGetName(h).encode()

        def nvmlSystemGetDriverVersion(self):
            return b"470.74"

    fake = BytesNvml([FakeGpu(name="Tesla T4", bus_id="00000000:00:1E.0", total_mib=15360)])
    d = read_nvml(fake)
    assert d.gpus[0].name == "Tesla T4" and d.driver_version == "470.74"


def test_binding_without_v2_memory_constant():
    fake = scenario("idle_gen1")
    fake.nvmlMemory_v2 = None
    d = read_nvml(fake)
    assert d.gpus[0].vram_bytes == 24564 * MIB and d.gpus[0].vram_reserved_bytes is None


def test_missing_function_in_binding_is_a_warning():
    fake = scenario("idle_gen1")
    fake.gpus[0].errors["nvmlDeviceGetEnforcedPowerLimit"] = FUNCTION_NOT_FOUND
    d = read_nvml(fake)
    assert d.gpus[0].power_limit_w is None
    assert any("power limit" in w and "not available with this driver" in w for w in d.warnings)


def test_shutdown_runs_even_when_reading_fails(monkeypatch):
    fake = scenario("idle_gen1")

    def boom(self):
        raise RuntimeError("bug")

    monkeypatch.setattr(nvml_probe._Reader, "read", boom)
    with pytest.raises(RuntimeError):
        read_nvml(fake)
    assert fake.shutdown_calls == 1


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_gives_contract_json(name):
    d, _ = run(name)
    j = json.loads(json.dumps(d.to_json(catalog_id=lambda n: "rtx-3090" if "3090" in n else None)))
    assert CONTRACT_KEYS <= set(j)
    assert j["source"] in {"nvml", "none"}
    for g in j["gpus"]:
        assert CONTRACT_GPU_KEYS <= set(g)
        assert g["catalog_id"] == ("rtx-3090" if "3090" in g["name"] else None)
        for key in ("vram_bytes", "vram_free_bytes", "power_limit_w"):
            assert g[key] != 0  # unknown is null, never 0
    if j["topology"] is not None:
        assert len(j["topology"]) == len(j["gpus"])


# -- real hardware ---------------------------------------------------------------------------------


def _real_nvml_or_skip():
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no readable NVIDIA GPU here ({e})")


@pytest.mark.gpu
def test_real_nvml_reads_gpus():
    _real_nvml_or_skip()
    d = read_nvml()
    assert d.source == "nvml"
    assert len(d.gpus) > 0
    assert d.driver_version
    for g in d.gpus:
        assert g.name
        assert g.unified_memory or (g.vram_bytes or 0) > 0
        assert not g.lost
    assert d.topology is None or len(d.topology) == len(d.gpus)
    json.dumps(d.to_json())


@pytest.mark.gpu
def test_real_nvml_agrees_with_nvidia_smi_xml():
    _real_nvml_or_skip()
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi not installed")
    from advisor.probe.smi_xml import read_smi_xml

    xml = subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, check=True, timeout=60).stdout
    smi, nv = read_smi_xml(xml), read_nvml()
    assert [g.name for g in smi.gpus] == [g.name for g in nv.gpus]
    assert [g.pci_bus_id for g in smi.gpus] == [g.pci_bus_id for g in nv.gpus]
    for a, b in zip(smi.gpus, nv.gpus):
        if b.vram_bytes is not None:
            assert a.vram_bytes is not None and abs(a.vram_bytes - b.vram_bytes) < 1 * MIB  # XML rounds to MiB
        assert a.mig == b.mig
        assert (a.pcie and a.pcie.gen_max) == (b.pcie and b.pcie.gen_max)
    assert smi.driver_version == nv.driver_version


def test_gpu_lost_while_its_nvlinks_are_read():
    fake = scenario("rtx3090_nvlink_pair")
    fake.gpus[1].lost_at = "nvmlDeviceGetFieldValues"
    d = read_nvml(fake)
    assert [g.lost for g in d.gpus] == [False, True]
    assert d.gpus[1].vram_bytes == 24576 * MIB  # read before it fell off
    assert any(w.startswith("GPU 1") and "lost" in w for w in d.warnings)


def test_gpu_without_a_handle_is_skipped_with_a_warning():
    fake = scenario("mixed_4090_3090_chipset")
    fake.gpus[0].errors["nvmlDeviceGetHandleByIndex"] = 4  # NO_PERMISSION (a container without that device)
    d = read_nvml(fake)
    assert [g.index for g in d.gpus] == [1]
    assert d.topology == (("X",),)
    assert any(w.startswith("GPU 0: skipped") for w in d.warnings)


def test_gpu_lost_while_counting(monkeypatch):
    fake = scenario("idle_gen1")
    monkeypatch.setattr(fake, "nvmlDeviceGetCount", lambda: fake._raise(15))
    d = read_nvml(fake)
    assert d.source == "none" and "stopped answering" in d.warnings[0]
    assert fake.shutdown_calls == 1


# -- issue 30: a binding that answers the wrong types, absurd counts or NaN ----------------------------------

def _binding(name: str):
    """One of bench/hostile.py's broken `pynvml` modules, loaded as a module object."""
    import types
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import hostile

    module = types.ModuleType("pynvml")
    exec(getattr(hostile, name), module.__dict__)  # noqa: S102 - our own test fixture's source
    return module


def test_wrong_types_are_unknown_with_a_warning():
    d = read_nvml(nvml_module=_binding("NVML_WRONG_TYPES"), timeout_s=5)
    (gpu,) = d.gpus
    assert d.source == "nvml" and d.driver_version is None
    assert gpu.name == "" and gpu.vram_bytes is None and gpu.compute_capability is None
    assert gpu.power_limit_w is None and gpu.mig is None and gpu.pcie is None
    assert any("not plausible" in w for w in d.warnings)
    json.dumps(d.to_json(), allow_nan=False)


@pytest.mark.parametrize("name", ["NVML_COUNT_MAX", "NVML_COUNT_TEXT"])
def test_a_count_that_is_not_a_count_is_refused_before_any_gpu_is_asked(name):
    import time

    start = time.monotonic()
    d = read_nvml(nvml_module=_binding(name), timeout_s=5)
    assert time.monotonic() - start < 1
    assert d.source == "none" and d.gpus == () and "not a count of up to 64" in d.warnings[0]


def test_nan_readings_never_reach_the_json():
    d = read_nvml(nvml_module=_binding("NVML_NAN"), timeout_s=5)
    (gpu,) = d.gpus
    assert gpu.name == "NVIDIA GeForce RTX 3090" and gpu.vram_bytes is None and gpu.power_limit_w is None
    json.dumps(d.to_json(), allow_nan=False)  # raises on NaN or inf


def test_mig_card_without_an_instance_reads_as_mig():
    d = read_nvml(nvml_module=_binding("NVML_MIG_EMPTY"), timeout_s=5)
    (gpu,) = d.gpus
    assert gpu.mig is True and gpu.mig_memory_bytes == ()
