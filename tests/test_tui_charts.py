"""The app's Choices table at 80 columns, and its charts: speed against context (the engine asked again at
each context, advisor/report/curves.py) and the quality/speed trade-off of the choices; snapshots at 80x24.
"""

from __future__ import annotations

import dataclasses

import pytest

from advisor.catalog.load import load_catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.probe.build import build_rig
from advisor.report.curves import CurvePoint, contexts, curve_markdown, speed_curve
from advisor.report.text import choices_section
from advisor.tui.widgets.charts import SpeedCurve, TradeOff
from advisor.tui.widgets.choices import fitted
from test_tui import PRESETS, make_app, settle
from tui_support import run, screen_text


@pytest.fixture(scope="module")
def catalog():
    return dataclasses.replace(load_catalog(user=False), presets=dict(PRESETS))


@pytest.fixture(scope="module")
def report_70b(catalog):
    rig = build_rig(catalog, gpus=["2xrtx-3090"], ram="64")
    return evaluate(catalog, rig, catalog.models["llama-3.1-70b"], Options())


# -- the Choices table ---------------------------------------------------------------------------------


def test_choices_columns_drop_whole_never_cut(report_70b):
    sec = choices_section(report_70b)
    assert fitted(sec, 200)[0] == sec.header and fitted(sec, 200)[2] == []
    header, rows, left = fitted(sec, 46)  # the answer column of an 80-column terminal
    assert left == ["prefill", "where"] and "max ctx" in header and "KLD" in header
    assert all(len(r) == len(header) for r in rows)
    assert any(r[header.index("max ctx")] == "13,056" for r in rows)  # whole numbers, not `13,0…`
    header, rows, _ = fitted(sec, 30)
    assert "quant KV" in header and any(r[1] == "Q4_K_M f16" for r in rows)


async def scrolled_to(pilot, selector: str) -> None:
    """The answer scrolled so `selector` is at its top, once the charts' worker has drawn and the layout
    has taken them in (a chart that appears moves everything under it)."""
    await settle(pilot)
    await pilot.pause()
    screen = pilot.app.screen
    screen.query_one("#answer").scroll_to_widget(screen.query_one(selector), animate=False, top=True)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@run
async def test_choices_read_whole_at_80x24(catalog):
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        await scrolled_to(pilot, "#sec-choices")
        text = screen_text(app)
        view = app.screen.query_one("#sec-choices")
        left = fitted(view.section, view.content_size.width)[2]
    assert "quant" in text and "max ctx" in text and "13,056" in text and "24,832" in text
    assert "…" not in text[text.index("Choices"):]  # no cell cut to a stub
    assert left == ["prefill", "where"]  # and the note under the table says so


# -- speed against context -----------------------------------------------------------------------------


def test_speed_curve_is_the_engine_at_each_context(catalog, report_70b):
    model = catalog.models["llama-3.1-70b"]
    ns = contexts(report_70b)
    assert ns == sorted(ns) and ns[0] == 1024 and ns[-1] == model.max_context
    assert report_70b.context_tokens in ns and report_70b.max_context_tokens in ns
    points = speed_curve(catalog, model, report_70b)
    assert [p.context_tokens for p in points] == ns
    by = {p.context_tokens: p for p in points}
    assert by[report_70b.max_context_tokens].fits and not by[ns[-1]].fits  # the model leaves the GPUs
    at = by[report_70b.context_tokens]  # the answer's own context: the same numbers as the answer's
    again = evaluate(catalog, report_70b.rig, model, dataclasses.replace(
        report_70b.options, prompt_tokens=report_70b.context_tokens))
    assert at.decode_tokens_per_s == report_70b.speed.decode_at_ctx_tokens_per_s
    assert at.ttft_s == round(report_70b.context_tokens / again.speed.prefill_tokens_per_s, 2)
    decode = [p.decode_tokens_per_s for p in points]
    ttft = [p.ttft_s for p in points]
    assert decode == sorted(decode, reverse=True) and ttft == sorted(ttft)  # longer is never faster


def test_no_curve_for_training(catalog):
    rig = build_rig(catalog, gpus=["2xrtx-3090"], ram="64")
    model = catalog.models["llama-3.1-8b"]
    r = evaluate(catalog, rig, model, Options(workload="full-finetune"))
    assert speed_curve(catalog, model, r) == ()


def test_curve_markdown_charts_only_contexts_that_run():
    md = curve_markdown((CurvePoint(1024, True, 40.0, 0.2), CurvePoint(2048, False, None, None)))
    assert md.count("```mermaid") == 2 and 'x-axis ["1k"]' in md and "line [40]" in md
    assert "| 2,048 | no | — | — |" in md
    assert curve_markdown(()) == ""


@run
async def test_the_app_draws_the_curve_and_exports_it(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(catalog)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        curve = app.screen.query_one(SpeedCurve)
        assert curve.display and curve.report is app.screen.report and len(curve.points) >= 8
        trade = app.screen.query_one(TradeOff)
        assert trade.display and list(trade.marks) == ["Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_M", "IQ3_M"]
        await pilot.press("e")
        await pilot.pause()
    md = (tmp_path / "advisor-llama-3.1-70b.md").read_text()
    assert "### Speed against context" in md and md.count("```mermaid") == 2 and "| 13,056 | yes |" in md


# -- snapshots at 80x24 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["sec-choices", "chart-tradeoff", "chart-speed"])
def test_snapshot_80x24(catalog, snap_compare, where):
    async def before(pilot):
        await scrolled_to(pilot, f"#{where}")

    assert snap_compare(make_app(catalog), terminal_size=(80, 24), run_before=before)
