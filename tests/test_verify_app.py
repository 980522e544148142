"""The terminal app's answer carries this rig's calibration too, as `advisor check` does (a Pilot test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.cli import main
from advisor.probe.flags import rig_from_flags
from advisor.tui.app import AdvisorApp, MainScreen
from tui_support import NO_GPU, run

DATA = Path(__file__).parent / "data" / "verify"


@run
async def test_app_answer_is_calibrated(catalog, capsys):
    assert main(["verify", "qwen2.5-7b", "--import", str(DATA / "llama_bench_rtx4080.json"), "--json"]) == 0
    capsys.readouterr()
    app = AdvisorApp(catalog, model="qwen2.5-7b", rig=rig_from_flags(catalog, ["rtx-4080"]), probe=lambda: NO_GPU)
    async with app.run_test() as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.set_control("quant", "Q4_K_M")
        await pilot.pause()
        cal = getattr(screen.report.speed, "calibration", None)
        assert cal is not None and cal.factor.device == "rtx-4080"
        assert screen.report.speed.decode_tokens_per_s == pytest.approx(118.9, abs=0.11)
