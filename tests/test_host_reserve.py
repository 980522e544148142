"""The host OS reserve scales with the machine (rules/memory.toml [host]): an 8 GB single-board computer
runs headless and keeps ~1 GiB, a desktop-sized machine 4 GiB. Public runs: a Raspberry Pi 5 8GB ran
Llama 2 7B Q4_0 with llama.cpp (ggml-org/llama.cpp PR #6928, comment by b4rtaz, 2024-04-28) and
Mistral 7B Q2_K (EricLBuehler/mistral.rs#265), on Raspberry Pi OS Lite (mozilla-ai/llamafile#226)."""

from __future__ import annotations

import json

from advisor.catalog.types import GIB
from advisor.engine.placement import host_capacity
from advisor.probe.flags import rig_from_flags


def _cpu_rig(catalog, ram_gib):
    return rig_from_flags(catalog, [], ram=ram_gib)


def test_headless_board_keeps_the_headless_reserve(catalog):
    host = catalog.rules.memory.host
    assert host_capacity(_cpu_rig(catalog, 8), catalog.rules) == int((8 - host.headless_reserve_gib) * GIB)
    assert host_capacity(_cpu_rig(catalog, 64), catalog.rules) == int((64 - host.os_reserve_gib) * GIB)
    assert host.headless_reserve_gib < host.os_reserve_gib


def test_7b_q4_runs_on_an_8gb_pi5(run_cli, tmp_path):
    """llama.cpp PR #6928: Llama 2 7B Q4_0 ran on a Pi 5 8GB (prompt eval 8.10 tok/s over 109 tokens);
    the answer was "does not run" while half of the 8 GB was held back for a desktop."""
    rig = tmp_path / "pi5.toml"
    rig.write_text("[rig]\nram_gib = 8\n")
    out = run_cli("check", "llama-2-7b", "--quant", "Q4_0", "--ctx", "4096", "--rig", str(rig),
                  "--format", "json")
    d = json.loads(out.stdout)
    assert d["runs"] is True and d["fits"] is False
