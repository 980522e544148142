"""VRAM the desktop holds, stated in a rig file (`used_gib` per [[gpu]]): the GPU is planned with the rest,
the same free memory the NVML probe reads on a live machine (total - driver reserve - used), and MEM002
says where the figure came from (issue 26)."""

from __future__ import annotations

import json

import pytest

from advisor.catalog.types import GIB
from advisor.engine.placement import usable_capacity
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags
from advisor.probe.rigfile import rig_from_data


def _rig(catalog, **gpu):
    return rig_from_data(catalog, {"rig": {"ram_gib": 32}, "gpu": [{"id": "rtx-3090", **gpu}]}, "test")


def test_used_vram_comes_off_what_the_runtime_may_use(catalog):
    rt = catalog.runtimes["llama.cpp"]
    idle = usable_capacity(rig_from_flags(catalog, ["rtx-3090"], ram=32), rt, catalog.rules)
    busy = usable_capacity(_rig(catalog, used_gib=1.5), rt, catalog.rules)
    assert idle[0] - busy[0] == int(1.5 * GIB)
    assert _rig(catalog, used_gib=1.5).gpus[0].capacity_basis == "free"


def test_used_vram_turns_a_fit_into_an_offload(run_cli, tmp_path):
    """Qwen3 32B Q4_K_M at 8k needs ~20.8 GiB on a 3090 (23.6 GiB usable idle); a desktop holding 3 GiB leaves
    20.6 GiB, so the answer must no longer be a full fit, and MEM002 names the rig file."""
    rig = tmp_path / "r.toml"
    rig.write_text('[rig]\nram_gib = 32\n[[gpu]]\nid = "rtx-3090"\nused_gib = 3\n')
    d = json.loads(run_cli("check", "qwen3-32b", "--quant", "Q4_K_M", "--rig", str(rig), "--format", "json").stdout)
    assert d["fits"] is False
    said = [f for f in d["findings"] if f.get("code") == "MEM002"]
    assert said and "rig file" in json.dumps(said)
    rig.write_text('[rig]\nram_gib = 32\n[[gpu]]\nid = "rtx-3090"\n')
    d = json.loads(run_cli("check", "qwen3-32b", "--quant", "Q4_K_M", "--rig", str(rig), "--format", "json").stdout)
    assert d["fits"] is True


@pytest.mark.parametrize("gpu", [{"used_gib": 24}, {"used_gib": 1, "memory_gib": 20}, {"used_gib": -1}])
def test_bad_used_vram_is_one_clear_error(catalog, gpu):
    with pytest.raises(AdvisorError):
        _rig(catalog, **gpu)
