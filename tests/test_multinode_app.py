"""The README's two-machine rig, end to end in the app (issue 28): read as a rig file, answered, and the launch
panel shows what to run on each machine in order."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from advisor.catalog.load import load_catalog
from advisor.probe.rigfile import load_rig
from advisor.tui.app import AdvisorApp
from tui_support import NO_GPU, run

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_rig(tmp_path: Path) -> Path:
    """The README's rig file that spans two machines (the first TOML block with a [[node]] table), as written."""
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    text = next(b for b in blocks if "[[node]]" in b)
    path = tmp_path / "two-machines.toml"
    path.write_text(text, encoding="utf-8")
    return path


def panel_text(app, widget_id: str) -> str:
    widget = app.get_default_screen().query_one(f"#{widget_id}")
    console = Console(width=400, record=True)
    console.print(widget.content)
    return console.export_text()


@run
async def test_the_readme_two_machine_rig_runs_in_the_app_with_a_launch_per_machine(tmp_path):
    catalog = load_catalog(user=False)
    rig = load_rig(catalog, readme_rig(tmp_path))
    assert rig.nodes == 2 and rig.node(1).host
    app = AdvisorApp(catalog, model="llama-3.1-70b", rig=rig, probe=lambda: NO_GPU)
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        report = app.get_default_screen().report
        assert report.runs and report.rig.nodes == 2 and report.placement.strategy == "layer_split"
        text = panel_text(app, "sec-launch")
        host = rig.node(1).host
        assert f"--rpc {host}:50052" in text
        assert f"machine 1 ({host}):\n       rpc-server -H 0.0.0.0 -p 50052 -c" in text  # the command under its machine
        assert text.index("rpc-server") < text.index("serves the model")  # the other machine starts first
        findings = panel_text(app, "sec-findings")
        assert "NET001" in findings and "NVL005" in findings
