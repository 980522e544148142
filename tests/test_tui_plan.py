"""The app's Plan tab ("what to buy"): Pilot tests and a snapshot.

Like tests/test_tui.py: no NVML (a fake probe or a preset rig), the built-in catalog without user
files, presets fixed here. The view's table must list what `advisor.engine.plan.make_plan` returns
for the same inputs, cheapest first.
"""

from __future__ import annotations

import dataclasses

import pytest

from advisor.catalog.load import load_catalog
from advisor.catalog.types import GIB, PresetRig
from advisor.engine.options import Options
from advisor.engine.plan import make_plan
from advisor.tui.app import AdvisorApp, MainScreen
from advisor.tui.screens.pickers import preset_rig
from advisor.tui.widgets.plan import PlanView, owned_gpus, parse_amount

PRESETS = {
    "2x-rtx-3090": PresetRig(id="2x-rtx-3090", name="2x RTX 3090 (PCIe only)", gpus=("2xrtx-3090",), ram_gib=64),
    "1x-rtx-3090": PresetRig(id="1x-rtx-3090", name="1x RTX 3090", gpus=("rtx-3090",), ram_gib=64),
}
from tui_support import NO_GPU, run  # noqa: E402


@pytest.fixture(scope="module")
def catalog():
    return dataclasses.replace(load_catalog(user=False), presets=dict(PRESETS))


def make_app(catalog, model="llama-3.1-70b", preset: str | None = "1x-rtx-3090") -> AdvisorApp:
    rig = preset_rig(catalog, preset) if preset else None
    return AdvisorApp(catalog, model=model, rig=rig, probe=lambda: NO_GPU)


async def settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def open_plan(pilot) -> PlanView:
    await settle(pilot)
    await pilot.press("p")
    await settle(pilot)
    return pilot.app.get_default_screen().query_one(PlanView)


def main(app: AdvisorApp) -> MainScreen:
    screen = app.get_default_screen()
    assert isinstance(screen, MainScreen)
    return screen


def prices(view: PlanView) -> list[float]:
    return [o.price_usd for o in view.plan.options]


def cell(view: PlanView, row: int, col: int) -> str:
    return str(view.query_one("#plan-table").get_row_at(row)[col])


async def type_into(pilot, selector: str, text: str) -> None:
    """Replace an Input's text with keys, as a user would."""
    inp = pilot.app.get_default_screen().query_one(selector)
    inp.focus()
    await pilot.press("end", *["backspace"] * len(inp.value), *text)
    await settle(pilot)


# -- the view ------------------------------------------------------------------------------------


@run
async def test_plan_tab_lists_the_engines_options_cheapest_first(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await open_plan(pilot)
        screen = main(app)
        assert screen.query_one("TabbedContent").active == "plan"
        table = view.query_one("#plan-table")
        assert table.row_count == len(view.plan.options) > 1
        assert prices(view) == sorted(prices(view))
        # the same plan the headless `advisor plan --quant auto --ctx 8192 --min-tps 10 --have rtx-3090` makes
        want = make_plan(catalog, catalog.models["llama-3.1-70b"], Options(quant=None, ctx=8192), min_tps=10,
                         have=[(1, "rtx-3090")], ram_bytes=int(catalog.rules.plan.default_ram_gib * GIB))
        assert view.plan.options == want.options[:len(view.plan.options)]
        assert view.plan.quant.id == want.quant.id  # quant "auto": make_plan's own default
        for row, o in enumerate(view.plan.options):
            assert cell(view, row, 1) == f"${o.price_usd:,.0f}"
            assert cell(view, row, 7) == ("yes" if o.nvlink else "no")
        notes = str(view.query_one("#plan-notes").render())
        assert f"{want.evaluated} rigs evaluated" in notes and "/kWh" in notes and want.nvlink_note in notes
        assert "Left out for lack of a price" in notes
        assert "you have: 1× GeForce RTX 3090" in str(view.query_one("#plan-status").render())


@run
async def test_raising_min_tokens_per_s_changes_the_plan(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await open_plan(pilot)
        before = view.plan.options
        assert min(o.decode_tokens_per_s for o in before) < 30
        await type_into(pilot, "#plan-min-tps", "30")
        after = view.plan.options
        assert view.plan.min_tps == 30
        assert after and after != before
        assert all(o.decode_tokens_per_s >= 30 for o in after)
        assert prices(view) == sorted(prices(view))
        assert sum(prices(view)) > sum(o.price_usd for o in before)  # faster costs more


@run
async def test_bad_budget_is_an_inline_error_then_a_good_one_applies(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await open_plan(pilot)
        error = view.query_one("#plan-error")
        await type_into(pilot, "#plan-budget", "lots")
        assert app.is_running
        assert error.has_class("-show") and "budget" in str(error.render()) and "'lots'" in str(error.render())
        assert view.query_one("#plan-table").row_count == 0 and view.plan is None
        await type_into(pilot, "#plan-budget", "$1,000")
        assert not error.has_class("-show")
        assert view.plan.budget_usd == 1000
        assert view.plan.options and all(o.price_usd <= 1000 for o in view.plan.options)
        await pilot.press("escape")  # out of the text box: the app's keys work again
        assert app.focused is view.query_one("#plan-table")
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


@run
async def test_owned_and_used_checkboxes(catalog):
    app = make_app(catalog, preset="2x-rtx-3090")
    async with app.run_test(size=(120, 40)) as pilot:
        view = await open_plan(pilot)
        first = view.plan.options[0]  # 2x 3090 run a 70B at Q4 past 10 tok/s: nothing to buy
        assert first.gpus == ((2, "rtx-3090"),) and first.new_gpus == () and first.price_usd == 0
        assert cell(view, 0, 2) == "nothing (what you have)"
        await pilot.click("#plan-have")
        await settle(pilot)
        assert all(o.new_gpus == o.gpus for o in view.plan.options)  # everything is bought now
        assert "rtx-3090" in view.plan.unpriced  # the catalog prices a 3090 used only
        await pilot.click("#plan-used")
        await settle(pilot)
        assert view.plan.used and "rtx-3090" not in view.plan.unpriced


@run
async def test_model_and_quant_changes_recompute_the_open_plan(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await open_plan(pilot)
        screen = main(app)
        screen.set_control("quant", "Q8_0")
        await settle(pilot)
        assert view.plan.quant.id == "Q8_0"
        screen.set_model("llama-3.1-8b")
        await settle(pilot)
        assert view.plan.model.id == "llama-3.1-8b" and view.plan.quant.id == "Q8_0"
        assert view.plan.options[0].price_usd == 0  # an 8B at Q8 runs on the 3090 already


@run
async def test_cpu_only_rig_plans_with_nothing_owned(catalog):
    app = make_app(catalog, preset=None)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await open_plan(pilot)
        assert main(app).rig.is_cpu_only
        assert view.plan.options and all(o.new_gpus == o.gpus for o in view.plan.options)
        assert "you have" not in str(view.query_one("#plan-status").render())


@run
async def test_palette_opens_the_plan_view(catalog):
    app = make_app(catalog)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"Show plan view")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot)
        assert main(app).query_one("TabbedContent").active == "plan"
        assert main(app).query_one(PlanView).plan is not None


def test_parse_amount_and_owned_gpus(catalog):
    assert parse_amount("", "budget") is None and parse_amount(" $1,500 ", "budget") == 1500
    for bad in ("abc", "-5", "0", "nan", "inf"):
        with pytest.raises(ValueError):
            parse_amount(bad, "budget")
    assert owned_gpus(preset_rig(catalog, "2x-rtx-3090"), catalog) == ([(2, "rtx-3090")], [])
    assert owned_gpus(None, catalog) == ([], [])


# -- snapshot ------------------------------------------------------------------------------------------


def test_snapshot_plan_120x40(catalog, snap_compare):
    assert snap_compare(make_app(catalog), terminal_size=(120, 40), run_before=open_plan)
