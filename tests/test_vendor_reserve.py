"""What each vendor's driver keeps back from a discrete card before any process runs (rules/memory.toml
[discrete_gpu]): NVIDIA's 400 MiB, AMD's 16 MiB (an RX 7900 XTX's 24,576 MiB shows as 24,560 to ROCm:
hipMemGetInfo's total in ROCm/librocdxg#57, rocm-smi's 25,753,026,560 B), nothing for a vendor the rules do not
list or for unified memory."""

from __future__ import annotations

import json

MIB = 2**20


def _capacity_mib(run_cli, *args) -> float:
    d = json.loads(run_cli("check", "llama-3.1-8b", *args, "--json").stdout)
    return d["placement"]["devices"][0]["capacity_bytes"] / MIB


def test_each_vendor_keeps_its_own_reserve(catalog):
    gpu = catalog.rules.memory.discrete_gpu
    assert gpu.reserved_mib("rtx-5090", "nvidia") == gpu.nvidia_reserved_mib == 400
    assert gpu.reserved_mib("rx-7900-xtx", "amd") == 16 == 24576 - 25_753_026_560 // MIB
    assert gpu.reserved_mib("arc-a770", "intel") == 0


def test_an_amd_card_plans_with_what_rocm_reports(run_cli):
    assert _capacity_mib(run_cli, "--gpu", "rx-7900-xtx") == 24576 - 16


def test_a_rig_file_s_used_memory_comes_off_after_the_reserve(run_cli, tmp_path):
    rig = tmp_path / "amd.toml"
    rig.write_text('[rig]\nram_gib = 64\n[[gpu]]\nid = "rx-7900-xtx"\ncount = 1\nused_gib = 1.0\n')
    assert _capacity_mib(run_cli, "--rig", str(rig)) == 24576 - 1024 - 16
