"""The terminal app: Pilot tests that drive keys and check the answer changes, and SVG snapshots.

The app never touches NVML here: it gets a fake probe (a callable returning a `Detection`) or a
rig built from a preset. The catalog is the built-in one without user files, with the presets
fixed in this file so the snapshots do not move when `hardware_db/presets.toml` grows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading

import pytest

from advisor.catalog.load import load_catalog
from advisor.catalog.types import PresetRig
from advisor.engine.rank import rank_models
from advisor.probe.types import Detection, DetectedGpu, PcieLink
from advisor.tui.app import AdvisorApp, MainScreen
from advisor.tui.screens.pickers import RigScreen, preset_rig

PRESETS = {
    "2x-rtx-3090": PresetRig(id="2x-rtx-3090", name="2x RTX 3090 (PCIe only)", gpus=("2xrtx-3090",), ram_gib=64),
    "2x-rtx-3090-nvlink": PresetRig(id="2x-rtx-3090-nvlink", name="2x RTX 3090 with NVLink bridge",
                                    gpus=("2xrtx-3090",), nvlink=True, ram_gib=64),
    "1x-rtx-4090": PresetRig(id="1x-rtx-4090", name="1x RTX 4090", gpus=("rtx-4090",), ram_gib=64),
}
from tui_support import NO_GPU, run  # noqa: E402


@pytest.fixture(scope="module")
def catalog():
    return dataclasses.replace(load_catalog(user=False), presets=dict(PRESETS))


def make_app(catalog, model="llama-3.1-70b", preset: str | None = "2x-rtx-3090", probe=None) -> AdvisorApp:
    rig = preset_rig(catalog, preset) if preset else None
    return AdvisorApp(catalog, model=model, rig=rig, probe=probe or (lambda: NO_GPU))


async def settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def main(app: AdvisorApp) -> MainScreen:
    screen = app.get_default_screen()
    assert isinstance(screen, MainScreen)
    return screen


# -- detection -------------------------------------------------------------------------------------


@run
async def test_no_gpu_opens_on_cpu_only_rig_with_banner(catalog):
    app = make_app(catalog, preset=None)
    async with app.run_test() as pilot:
        await settle(pilot)
        screen = main(app)
        assert screen.rig is not None and screen.rig.is_cpu_only
        banner = screen.query_one("#banner")
        assert banner.has_class("-show")
        text = str(banner.render())
        assert "no NVIDIA driver" in text and "press r" in text
        assert screen.report is not None and screen.report.placement.strategy == "cpu_only"


@run
async def test_detection_runs_in_a_worker_and_never_blocks_first_paint(catalog):
    release = threading.Event()

    def slow_probe() -> Detection:
        release.wait(10)
        gpu = DetectedGpu(index=0, name="NVIDIA GeForce RTX 4090", vram_bytes=24 * 1024**3,
                          pcie=PcieLink(gen_max=4, width_max=16))
        return Detection(source="nvml", gpus=(gpu,))

    app = make_app(catalog, preset=None, probe=slow_probe)
    async with app.run_test() as pilot:
        await pilot.pause()
        screen = main(app)
        assert screen.rig is None  # painted and interactive while the probe still runs
        assert "Detecting" in str(screen.query_one("#verdict").render())
        release.set()
        await settle(pilot)
        assert [g.spec.id for g in screen.rig.gpus] == ["rtx-4090"]
        assert not screen.query_one("#banner").has_class("-show")
        # the answer is computed for the detected card: 70B on one 4090 runs with offload (nothing above the
        # quality floor fits in 24 GB; issue 17)
        assert screen.report.rig.gpus[0].spec.id == "rtx-4090" and screen.report.runs


@run
async def test_a_probe_that_raises_is_a_banner_not_a_crash(catalog):
    def broken() -> Detection:
        raise RuntimeError("NVML exploded")

    app = make_app(catalog, preset=None, probe=broken)
    async with app.run_test() as pilot:
        await settle(pilot)
        screen = main(app)
        assert screen.rig.is_cpu_only
        assert "NVML exploded" in str(screen.query_one("#banner").render())


# -- inputs change the answer ----------------------------------------------------------------------


@run
async def test_changing_quant_with_keys_changes_memory(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        before = screen.report
        assert before.quant.id == "Q4_K_M" and before.quant_chosen
        screen.query_one("#quant").focus()
        await pilot.press("enter")  # open the list; it starts on "auto"
        await pilot.press(*["down"] * 5, "enter")  # auto, F32, F16, BF16, Q8_0, Q6_K
        await pilot.pause()
        after = screen.report
        assert after.quant.id == "Q6_K" and not after.quant_chosen
        weights = lambda r: sum(d.weights_bytes for d in (*r.placement.devices, r.placement.host))  # noqa: E731
        assert weights(after) > weights(before)
        assert "Q6_K" in str(screen.query_one("#verdict").render())


@run
async def test_longer_context_needs_more_kv_cache(catalog):
    app = make_app(catalog, model="llama-3.1-8b")
    async with app.run_test() as pilot:
        screen = main(app)
        before = screen.report.kv_cache_bytes
        screen.query_one("#ctx").focus()
        await pilot.press("enter", "down", "enter")  # 8k -> 16k
        await pilot.pause()
        assert screen.report.context_tokens == 16384
        assert screen.report.kv_cache_bytes > before


@run
async def test_runtime_change_offers_only_its_quants(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        screen.set_control("quant", "Q4_K_M")
        await pilot.pause()
        screen.set_control("runtime", "vllm")
        await pilot.pause()
        assert screen.query_one("#quant").value == "auto"  # a GGUF quant does not apply to vLLM
        assert screen.report.runtime.id == "vllm"


@run
async def test_bad_combination_is_shown_not_raised(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        screen.set_control("runtime", "vllm")
        screen.set_control("kv", "q4_0")
        await pilot.pause()
        verdict = screen.query_one("#verdict")
        assert verdict.has_class("-error") and "q4_0" in str(verdict.render())
        assert screen.report is None
        screen.set_control("kv", "f16")
        await pilot.pause()
        assert screen.report is not None and not verdict.has_class("-error")


@run
async def test_pick_a_preset_rig_with_keys(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        assert not screen.rig.nvlink
        await pilot.press("r")
        assert isinstance(app.screen, RigScreen)
        await pilot.press(*"nvlink bridge", "enter")
        await pilot.pause()
        assert app.screen is screen
        assert screen.rig.nvlink and screen.rig.source == "preset"
        assert screen.report.rig.nvlink
        assert "NVLink" in str(screen.query_one("#rig").border_title)


@run
async def test_describe_a_rig_gpu_and_count(catalog):
    app = make_app(catalog, preset=None)
    async with app.run_test() as pilot:
        await settle(pilot)
        screen = main(app)
        await pilot.press("r")
        app.screen.query_one("#count").value = 2
        await pilot.press(*"GeForce RTX 4090", "enter")
        await pilot.pause()
        assert [g.spec.id for g in screen.rig.gpus] == ["rtx-4090", "rtx-4090"]
        assert not screen.query_one("#banner").has_class("-show")
        assert len(screen.report.placement.devices) == 2


@run
async def test_escape_closes_the_rig_picker_unchanged(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        rig = screen.rig
        await pilot.press("r", "escape")
        assert app.screen is screen and screen.rig is rig


@run
async def test_pick_a_model_with_fuzzy_search(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        await pilot.press("m", *"qwen3-32b", "enter")
        await pilot.pause()
        assert screen.model_id == "qwen3-32b"
        assert screen.report.model.id == "qwen3-32b"
        assert "Qwen3 32B" in str(screen.query_one("#model").label)


@run
async def test_command_palette_has_the_apps_commands(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        screen = main(app)
        await pilot.press("ctrl+p")
        await pilot.press(*"Model: Gemma 3 27B")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert screen.model_id == "gemma-3-27b"


# -- views, export, quit ---------------------------------------------------------------------------


@run
async def test_fit_view_lists_models_that_fit_best_first(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main(app)
        await pilot.press("f")
        await settle(pilot)
        table = screen.query_one("#fit-table")
        assert table.row_count > 5
        ids = [str(k.value) for k in table.rows]
        assert "llama-3.1-405b" not in ids  # does not run on 2x 24 GB with 64 GB of RAM
        assert "llama-3.1-8b" in ids and "llama-3.1-70b" in ids
        ranked = rank_models(catalog, screen.rig, screen.options())
        assert ids == [x.model.id for x in ranked if x.report.runs]  # the order `advisor fit --all` prints
        table.move_cursor(row=ids.index("llama-3.1-8b"))
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert screen.model_id == "llama-3.1-8b"
        assert screen.query_one("TabbedContent").active == "check"


@run
async def test_export_markdown_and_json(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(catalog)
    async with app.run_test() as pilot:
        await pilot.press("e", "E")
        await pilot.pause()
    md = (tmp_path / "advisor-llama-3.1-70b.md").read_text()
    assert md.startswith("## Llama 3.1 70B") and "### Interconnect" in md
    data = json.loads((tmp_path / "advisor-llama-3.1-70b.json").read_text())
    assert data["model"]["id"] == "llama-3.1-70b" and data["fits"] is True


@run
async def test_q_quits(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


# -- the launcher ------------------------------------------------------------------------------------


def _args(**kw) -> argparse.Namespace:
    base = dict(model=None, gpu=[], nvlink=False, pcie=None, ram=None, rig=None, empty=False)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("kw, words", [
    ({"model": "no-such-model"}, "unknown model"),
    ({"gpu": ["no-such-gpu"]}, "unknown gpu"),
    ({"nvlink": True}, "--gpu"),
    ({"ram": "lots"}, "--ram"),
], ids=["model", "gpu", "nvlink-without-gpu", "ram"])
def test_bad_input_is_exit_2_before_the_ui(kw, words, capsys):
    from advisor.app_entry import run_app

    from advisor.cli import main as cli_main

    assert run_app(_args(**kw), headless=cli_main) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_launcher_resolves_names_and_builds_the_rig():
    from advisor.app_entry import make_app as launcher

    app = launcher(_args(model="Llama 3.1 70B", gpu=["2xrtx-3090"], ram="64"))
    screen = main(app)
    assert screen.model_id == "llama-3.1-70b"
    assert [g.spec.id for g in screen.rig.gpus] == ["rtx-3090", "rtx-3090"]


RECORDED = "nvidia/Qwen3.6-35B-A3B-NVFP4"


@run
async def test_naming_a_recorded_checkpoint_opens_the_app_on_its_format_and_a_runtime_that_loads_it():
    """`advisor nvidia/Qwen3.6-35B-A3B-NVFP4` opened Qwen3.6 35B-A3B on llama.cpp's GGUF ladder, not the checkpoint
    it names: the app opens on the format rules/checkpoints.toml records and the first of its runtimes, as its
    controls show, and its line names the repo. A model named by its catalog id opens as before."""
    import shlex

    from advisor.app_entry import make_app as launcher
    from advisor.tui.widgets.controls import Controls

    app = launcher(_args(model=RECORDED, gpu=["rtx-5090"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = main(app)
        opened = screen.query_one(Controls).options()
        assert (screen.model_id, opened.runtime, opened.quant) == ("qwen3.6-35b-a3b", "vllm", "nvfp4-mlp-fp8")
        assert screen.report.quant.id == "nvfp4-mlp-fp8" and screen.report.fits
        assert shlex.split(screen.report.launch.command)[2] == RECORDED
    plain = launcher(_args(model="qwen3.6-35b-a3b", gpu=["rtx-5090"]))
    async with plain.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        opened = main(plain).query_one(Controls).options()
        assert (opened.runtime, opened.quant) == ("llama.cpp", None)


def test_naming_a_recorded_checkpoint_outside_a_terminal_is_checked_on_that_runtime(capsys):
    """Piped, `advisor REPO` answers `advisor check REPO --runtime vllm`, the app's question, and says so (without the
    runtime, check stops: llama.cpp does not load the recorded format)."""
    from advisor.app_entry import run_app
    from advisor.cli import main as cli_main

    assert run_app(_args(model=RECORDED, gpu=["rtx-5090"]), headless=cli_main) == 0
    out, err = capsys.readouterr()
    assert "nvfp4-mlp-fp8" in out and f"advisor check {RECORDED} --runtime vllm --gpu=rtx-5090" in err


# -- snapshots ---------------------------------------------------------------------------------------


def test_snapshot_2x3090_80x24(catalog, snap_compare):
    assert snap_compare(make_app(catalog), terminal_size=(80, 24))


def test_snapshot_2x3090_160x50(catalog, snap_compare):
    assert snap_compare(make_app(catalog), terminal_size=(160, 50))


def test_snapshot_nvlink_pair_160x50(catalog, snap_compare):
    assert snap_compare(make_app(catalog, preset="2x-rtx-3090-nvlink"), terminal_size=(160, 50))


def test_snapshot_no_gpu_banner_80x24(catalog, snap_compare):
    assert snap_compare(make_app(catalog, preset=None), terminal_size=(80, 24), run_before=settle)


def test_the_app_never_imports_nvml():
    import subprocess
    import sys

    code = ("import sys, advisor.tui.app, advisor.app_entry\n"
            "print('pynvml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@run
async def test_export_on_fit_and_plan_tabs_writes_what_the_cli_prints(catalog, tmp_path, monkeypatch, capsys):
    """One document per answer: the app's export of Fit and Plan is `advisor fit|plan`'s own output for the
    rows the tab shows (Fit's filter at "all models"; Plan without the rig counted as owned, its 30 options)."""
    from advisor.cli import main as cli_main
    from advisor.tui.widgets.plan import TOP

    monkeypatch.chdir(tmp_path)
    app = make_app(catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f")
        await settle(pilot)
        main(app).query_one("#fit-level").value = "all"
        await pilot.pause()
        await pilot.press("e", "E")
        await pilot.press("p")
        await settle(pilot)
        await pilot.click("#plan-have")
        await settle(pilot)
        await pilot.press("e", "E")
        await pilot.pause()
    capsys.readouterr()
    for name, argv in (("advisor-fit", ["fit", "--all", "--gpu", "2xrtx-3090", "--ram", "64"]),
                       ("advisor-plan-llama-3.1-70b", ["plan", "llama-3.1-70b", "--min-tps", "10", "--ram", "64",
                                                       "--top", str(TOP)])):
        for fmt, ext in (("markdown", "md"), ("json", "json")):
            cli_main([*argv, "--format", fmt])
            assert (tmp_path / f"{name}.{ext}").read_text(encoding="utf-8") == capsys.readouterr().out, (name, fmt)
