"""The app's Fit tab as a table people work in, help and focus, per-tab export: Pilot tests and snapshots.

Like tests/test_tui.py: no NVML (preset rigs), the built-in catalog without user files, presets
fixed here. Rows must be what `advisor.engine.rank.rank_models` returns for the same rig and options.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from advisor.catalog.load import load_catalog
from advisor.catalog.types import PresetRig
from advisor.engine.rank import rank_models
from advisor.tui.app import AdvisorApp, MainScreen
from advisor.tui.export import ConfirmOverwrite
from advisor.tui.screens.help import HelpScreen
from advisor.tui.screens.pickers import preset_rig
from advisor.tui.widgets.fit import FitView

PRESETS = {
    "1x-rtx-4090": PresetRig(id="1x-rtx-4090", name="1x RTX 4090", gpus=("rtx-4090",), ram_gib=64),
    "2x-rtx-3090": PresetRig(id="2x-rtx-3090", name="2x RTX 3090 (PCIe only)", gpus=("2xrtx-3090",), ram_gib=64),
}
from tui_support import NO_GPU, run, screen_text  # noqa: E402


@pytest.fixture(scope="module")
def catalog():
    return dataclasses.replace(load_catalog(user=False), presets=dict(PRESETS))


def make_app(catalog, model="llama-3.1-8b", preset="1x-rtx-4090") -> AdvisorApp:
    return AdvisorApp(catalog, model=model, rig=preset_rig(catalog, preset), probe=lambda: NO_GPU)


async def settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def main(app: AdvisorApp) -> MainScreen:
    screen = app.get_default_screen()
    assert isinstance(screen, MainScreen)
    return screen


async def open_fit(pilot) -> FitView:
    await settle(pilot)
    await pilot.press("f")
    await settle(pilot)
    return main(pilot.app).query_one(FitView)


def ids(view: FitView) -> list[str]:
    return [str(k.value) for k in view.query_one("#fit-table").rows]


def row(view: FitView, model_id: str) -> list[str]:
    table = view.query_one("#fit-table")
    return [str(c) for c in table.get_row(model_id)]


# -- the table -------------------------------------------------------------------------------------


@run
async def test_gpt_oss_120b_runs_on_a_4090_with_experts_in_ram(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_fit(pilot)
        assert "gpt-oss-120b" in ids(view)
        x = next(x for x in view.ranked if x.model.id == "gpt-oss-120b")
        assert x.report.placement.strategy == "moe_offload" and not x.report.fits and x.report.runs
        cells = row(view, "gpt-oss-120b")
        assert cells[-1] == "experts in RAM"
        assert cells[4] == f"{x.report.speed.decode_tokens_per_s:,.1f}"  # the engine's speed, as Check shows it
        assert cells[6] == "—"  # no all-on-GPU context; the line under the table says what that means
        view.query_one("#fit-table").move_cursor(row=ids(view).index("gpt-oss-120b"))
        await pilot.pause()
        detail = str(view.query_one("#fit-detail").render())
        assert f"runs MoE experts offloaded to system RAM at {x.report.speed.decode_tokens_per_s:,.1f} tok/s" in detail and "Max context is for all-on-GPU runs" in detail
        # every model that runs, in `advisor fit --all` order, no more
        want = [r.model.id for r in rank_models(catalog, main(app).rig, main(app).options()) if r.report.runs]
        assert ids(view) == want


@run
async def test_slash_search_narrows_the_list_live_and_enter_opens_check(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_fit(pilot)
        everything = ids(view)
        await pilot.press("slash")
        assert app.focused is view.query_one("#fit-search")
        await pilot.press(*"qwen3")
        await pilot.pause()
        narrowed = ids(view)
        assert 0 < len(narrowed) < len(everything)
        assert all("qwen3" in i for i in narrowed)
        await pilot.press(*"-32")  # "qwen3 32" also finds qwen3-vl-32b
        await pilot.pause()
        assert ids(view) == ["qwen3-32b"]
        await pilot.press("enter")  # back to the table, the filter stays
        assert app.focused is view.query_one("#fit-table")
        await pilot.press("enter")  # opens the row in Check
        await pilot.pause()
        assert main(app).model_id == "qwen3-32b"
        assert main(app).query_one("TabbedContent").active == "check"


@run
async def test_sort_key_and_header_click_reorder(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(160, 50)) as pilot:
        view = await open_fit(pilot)
        ranked = list(view.shown)
        await pilot.press("s")  # the next sort: decode speed, fastest first
        await pilot.pause()
        speeds = [x.report.speed.decode_tokens_per_s or 0 for x in view.shown]
        assert speeds == sorted(speeds, reverse=True) and view.shown != ranked
        await pilot.press("S")
        await pilot.pause()
        assert [x.report.speed.decode_tokens_per_s or 0 for x in view.shown] == sorted(speeds)
        await pilot.click("#fit-table", offset=(3, 0))  # the "model" header
        await pilot.pause()
        assert view.sort_key == "model"
        names = [x.model.name.lower() for x in view.shown]
        assert names == sorted(names)
        await pilot.click("#fit-table", offset=(3, 0))  # again: reversed
        await pilot.pause()
        assert [x.model.name.lower() for x in view.shown] == sorted(names, reverse=True)


@run
async def test_filters_fit_level_kind_speed_and_context(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(160, 50)) as pilot:
        view = await open_fit(pilot)
        view.query_one("#fit-level").value = "offload"
        await pilot.pause()
        assert view.shown and all(x.report.runs and not x.report.fits for x in view.shown)
        assert "gpt-oss-120b" in ids(view)
        view.query_one("#fit-level").value = "fits"
        view.query_one("#fit-kind").value = "moe"
        await pilot.pause()
        assert view.shown and all(x.report.fits and x.model.is_moe for x in view.shown)
        view.query_one("#fit-kind").value = "dense"
        view.query_one("#fit-min-ctx").value = 32768
        await pilot.pause()
        assert view.shown and all(not x.model.is_moe and x.report.max_context_tokens >= 32768 for x in view.shown)
        view.query_one("#fit-min-tps").focus()
        await pilot.press(*"100")
        await pilot.pause()
        assert view.shown and all(x.report.speed.decode_tokens_per_s >= 100 for x in view.shown)
        await pilot.press("x")  # a typo is a line in the status, not a crash or an empty table
        await pilot.pause()
        assert "not a number" in str(view.query_one("#fit-status").render())
        view.query_one("#fit-level").value = "all"
        await pilot.pause()
        assert len(view.shown) == sum(not x.model.is_moe and x.report.max_context_tokens >= 32768 for x in view.ranked)


@run
async def test_every_fit_column_is_readable_at_80_columns(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_fit(pilot)
        table = view.query_one("#fit-table")
        used = sum(c.get_render_width(table) for c in table.columns.values())
        assert used <= table.scrollable_content_region.width  # no column cut off at the right
        for col in table.columns.values():
            cells = [str(table.get_cell(k, col.key)) for k in table.rows]
            assert max(map(len, [str(col.label), *cells])) <= col.get_render_width(table) - 2 * table.cell_padding \
                or col.key.value == "model"  # only long model names are cut, never numbers or units


# -- help and focus --------------------------------------------------------------------------------------


@run
async def test_question_mark_and_f1_open_the_apps_help_and_escape_closes_it(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            assert isinstance(app.screen, HelpScreen)
            await pilot.pause()
            text = screen_text(app)
            assert "Everywhere" in text and "leave a text field, close a dialog" in text
            await pilot.press("escape")
            assert app.screen is main(app)


@run
async def test_a_shortcut_letter_in_a_focused_field_is_typed_and_escape_leaves(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_fit(pilot)
        await pilot.press("slash", *"cfpqm?e")
        await pilot.pause()
        assert view.query_one("#fit-search").value == "cfpqm?e"
        assert app.is_running and main(app).query_one("TabbedContent").active == "fit"
        assert isinstance(app.screen, MainScreen)
        assert "esc Leave field" in screen_text(app).splitlines()[-1]  # the footer says how to leave
        await pilot.press("escape")
        assert app.focused is view.query_one("#fit-table")
        await pilot.press("c")  # keys are the app's again
        assert main(app).query_one("TabbedContent").active == "check"


# -- export per tab ----------------------------------------------------------------------------------------


@run
async def test_e_on_fit_writes_fits_table_and_never_overwrites_unasked(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "advisor-fit.md").write_text("mine\n")
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_fit(pilot)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmOverwrite)
        await pilot.press("n")  # a new name
        await pilot.pause()
        await pilot.press("E")
        await pilot.pause()
        shown = [x.model.id for x in view.shown]
    assert (tmp_path / "advisor-fit.md").read_text() == "mine\n"
    md = (tmp_path / "advisor-fit-2.md").read_text()
    assert md.startswith("What runs on GeForce RTX 4090")
    assert "| gpt-oss-120b |" in md and "runs MoE experts offloaded to system RAM" in md
    assert md.count("\n| ") == len(shown) + 1  # the header and every row shown, as `advisor fit` writes them
    data = json.loads((tmp_path / "advisor-fit.json").read_text())
    assert [r["model"] for r in data] == shown
    oss = next(r for r in data if r["model"] == "gpt-oss-120b")
    assert oss["fits"] is False and oss["runs"] is True


@run
async def test_export_overwrite_only_when_confirmed(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "advisor-llama-3.1-8b.md"
    target.write_text("mine\n")
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("e", "escape")  # cancel: nothing written
        await pilot.pause()
        assert target.read_text() == "mine\n" and not (tmp_path / "advisor-llama-3.1-8b-2.md").exists()
        await pilot.press("e", "o")
        await pilot.pause()
    assert target.read_text().startswith("## Llama 3.1 8B")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["advisor-llama-3.1-8b.md"]  # no temporary file left


@run
async def test_e_on_plan_writes_plans_list(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(catalog, model="llama-3.1-70b", preset="2x-rtx-3090")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        plan = main(app).query_one("PlanView").plan
        await pilot.press("e", "E")
        await pilot.pause()
    data = json.loads((tmp_path / "advisor-plan-llama-3.1-70b.json").read_text())
    assert [o["price_usd"] for o in data["options"]] == [o.price_usd for o in plan.options]
    assert (tmp_path / "advisor-plan-llama-3.1-70b.md").read_text().startswith("## advisor plan llama-3.1-70b")


# -- snapshots ---------------------------------------------------------------------------------------------


def test_snapshot_fit_4090_80x24(catalog, snap_compare):
    assert snap_compare(make_app(catalog), terminal_size=(80, 24), run_before=open_fit)


def test_snapshot_fit_4090_160x50(catalog, snap_compare):
    assert snap_compare(make_app(catalog), terminal_size=(160, 50), run_before=open_fit)


def test_snapshot_help_80x24(catalog, snap_compare):
    async def help_open(pilot):
        await settle(pilot)
        await pilot.press("question_mark")

    assert snap_compare(make_app(catalog), terminal_size=(80, 24), run_before=help_open)


# -- check ------------------------------------------------------------------------------------------------


@run
async def test_check_says_what_context_an_offloaded_run_uses_and_scrolls_to_a_new_verdict(catalog):
    app = make_app(catalog, model="gpt-oss-120b")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = main(app)
        assert not screen.report.fits and screen.report.runs
        text = screen_text(app)
        assert "context 8,192 offloaded (none fits all on GPU)" in text and "max context none" not in text
        answer = screen.query_one("#answer")
        answer.scroll_end(animate=False)
        await pilot.pause()
        assert answer.scroll_y > 0
        screen.set_model("llama-3.1-8b")
        await pilot.pause()
        assert answer.scroll_y == 0 and "Llama 3.1 8B" in screen_text(app)
