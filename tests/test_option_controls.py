"""The app's controls are the option table's (advisor/engine/optiontable.py CONTROLS) and give the engine the same
Options as the command line given the same values: one mapping, no copy between the CLI and the app (issue 25)."""

from __future__ import annotations

import sys
from pathlib import Path

from advisor.catalog.load import load_catalog
from advisor.cli import build_parser
from advisor.commands.args import options_from
from advisor.engine.optiontable import CONTROLS
from advisor.tui.app import AdvisorApp, MainScreen
from advisor.tui.widgets.controls import Controls

sys.path.insert(0, str(Path(__file__).parent))
from tui_support import NO_GPU, run  # noqa: E402


def _cli(*argv: str):
    return options_from(build_parser().parse_args(["check", "llama-3.1-8b", *argv]))


@run
async def test_the_apps_controls_give_the_options_the_command_line_gives():
    catalog = load_catalog(user=False)
    app = AdvisorApp(catalog, model="llama-3.1-8b", rig=None, probe=lambda: NO_GPU)
    async with app.run_test() as pilot:
        screen = app.get_default_screen()
        assert isinstance(screen, MainScreen)
        await pilot.pause()
        controls = screen.query_one(Controls)
        assert [w.id for w in controls.query("Select")] == [d.widget.id for d in CONTROLS]
        assert controls.options() == _cli("--ctx", "8192")  # every `auto` is the option not given
        for sel, value in (("quant", "Q4_K_M"), ("ctx", 32768), ("kv", "q8_0"), ("split", "tensor"),
                           ("streams", 4), ("workload", "lora")):
            screen.set_control(sel, value)
        await pilot.pause()
        assert controls.options() == _cli("--quant", "Q4_K_M", "--ctx", "32k", "--kv-cache", "q8_0", "--split",
                                          "tensor", "--concurrency", "4", "--workload", "lora")
