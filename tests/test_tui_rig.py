"""The app's rig dialog for the whole machine: PCIe as installed, P2P, RAM size and bandwidth, machines
and network, saved as a rig file. Pilot tests drive the keys; the answer must change as the engine says."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.catalog.load import load_catalog
from advisor.catalog.types import GIB, PresetRig
from advisor.errors import AdvisorError
from advisor.probe.rigfile import load_rig
from advisor.tui.app import AdvisorApp, MainScreen
from advisor.tui.rigedit import edit_rig, parse_ram_bandwidth
from advisor.tui.screens.pickers import RigScreen, preset_rig

PRESETS = {
    "1x-rtx-4090": PresetRig(id="1x-rtx-4090", name="1x RTX 4090", gpus=("rtx-4090",), ram_gib=64),
    "2x-rtx-3090": PresetRig(id="2x-rtx-3090", name="2x RTX 3090 (PCIe only)", gpus=("2xrtx-3090",), ram_gib=64),
}
from tui_support import NO_GPU, run, screen_text  # noqa: E402


@pytest.fixture(scope="module")
def catalog():
    return dataclasses.replace(load_catalog(user=False), presets=dict(PRESETS))


def make_app(catalog, model="gpt-oss-120b", preset="1x-rtx-4090") -> AdvisorApp:
    return AdvisorApp(catalog, model=model, rig=preset_rig(catalog, preset), probe=lambda: NO_GPU)


def main(app: AdvisorApp) -> MainScreen:
    return app.get_default_screen()


async def in_dialog(pilot, field: str, text: str, key: str = "enter") -> None:
    """Open the rig dialog, type into one field, press `key`."""
    await pilot.press("r")
    assert isinstance(pilot.app.screen, RigScreen)
    pilot.app.screen.query_one(f"#{field}").focus()
    await pilot.press(*text, key)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@run
async def test_ram_size_and_bandwidth_change_the_answer(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main(app)
        before = screen.report
        assert before.placement.strategy == "moe_offload" and before.runs
        await in_dialog(pilot, "ram-bw", "ddr5-6000x2")  # enter applies from the field
        assert app.screen is screen
        assert screen.rig.ram_bandwidth_gb_s == 96.0  # 2 channels x 8 bytes x 6000 MT/s
        assert "DDR5-6000" in screen.rig.ram_bandwidth_basis
        faster = screen.report
        assert faster.speed.decode_tokens_per_s > before.speed.decode_tokens_per_s  # experts stream from RAM
        assert "96 GB/s" in screen_text(app)
        await in_dialog(pilot, "ram", "32")
        assert screen.rig.ram_bytes == 32 * GIB and screen.rig.ram_bandwidth_gb_s == 96.0  # the rest kept
        assert not screen.report.runs  # 41.5 GiB of experts no longer fit in 32 GiB of RAM


@run
async def test_pcie_width_and_p2p_change_the_interconnect(catalog):
    app = make_app(catalog, model="llama-3.1-70b", preset="2x-rtx-3090")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main(app)
        screen.set_control("split", "tensor")
        await pilot.pause()
        before = screen.report.interconnect
        await pilot.press("r")
        dialog = app.screen
        dialog.query_one("#pcie").value = "3x4"
        dialog.query_one("#p2p").value = "no"
        dialog.query_one("#ram").focus()
        await pilot.press("enter")
        await pilot.pause()
        assert {(g.pcie_gen, g.pcie_lanes) for g in screen.rig.gpus} == {(3, 4)} and screen.rig.p2p is False
        after = screen.report.interconnect
        assert after.link_time_share > before.link_time_share
        assert "PCIe 3.0 x4" in screen_text(app)


@run
async def test_save_as_a_rig_file_that_reads_back(catalog, tmp_path):
    app = make_app(catalog)
    path = tmp_path / "my-rig.toml"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        dialog = app.screen
        dialog.query_one("#ram").value = "128"
        dialog.query_one("#ram-bw").value = "ddr5-6400x2"
        dialog.query_one("#save-path").focus()
        await pilot.press(*str(path), "enter")
        await pilot.pause()
        assert app.screen is dialog  # saving does not apply or close
        rig = load_rig(catalog, path)
        assert rig.ram_bytes == 128 * GIB and rig.ram_bandwidth_gb_s == 102.4
        assert [g.spec.id for g in rig.gpus] == ["rtx-4090"]
        dialog.query_one("#ram").value = "256"
        await pilot.press("ctrl+s", "n")  # the file exists: a new name, never over it unasked
        await pilot.pause()
        assert load_rig(catalog, path).ram_bytes == 128 * GIB
        assert load_rig(catalog, tmp_path / "my-rig-2.toml").ram_bytes == 256 * GIB


@run
async def test_escape_leaves_a_field_then_closes_the_dialog_and_letters_are_typed(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main(app)
        rig = screen.rig
        await pilot.press("r")
        dialog = app.screen
        dialog.query_one("#save-path").focus()
        await pilot.press(*"qmrcfp")
        assert dialog.query_one("#save-path").value == "qmrcfp" and app.screen is dialog
        await pilot.press("escape")
        assert app.screen is dialog and app.focused is None
        await pilot.press("escape")
        assert app.screen is screen and screen.rig is rig


@run
async def test_a_bad_value_is_a_line_in_the_dialog(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        await in_dialog(pilot, "ram-bw", "fast")
        assert isinstance(app.screen, RigScreen)
        assert "ddr5-6000x2" in str(app.screen.query_one("#rig-error").render())


def test_ram_bandwidth_from_ddr_words():
    assert parse_ram_bandwidth("ddr4-3200x2")[0] == 51.2  # rules/memory.toml's own worked example
    assert parse_ram_bandwidth("DDR5-4800 x 8")[0] == 307.2
    assert parse_ram_bandwidth(" 80 ") == (80.0, "given")
    for bad in ("ddr5-6000x0", "ddr9-6000x2", "lots", "0", "-5"):
        with pytest.raises(AdvisorError):
            parse_ram_bandwidth(bad)


def test_nodes_split_the_gpus_and_drop_nvlink_across_machines(catalog):
    rig = preset_rig(catalog, "2x-rtx-3090")
    rig = dataclasses.replace(rig, nvlink_pairs=((0, 1),))
    two = edit_rig(rig, nodes=2, network="ib-ndr")
    assert [g.node for g in two.gpus] == [0, 1] and two.nvlink_pairs == () and two.network == "ib-ndr"
    with pytest.raises(AdvisorError):
        edit_rig(rig, nodes=4)
    assert edit_rig(rig) == rig  # blank fields keep the rig as it is
