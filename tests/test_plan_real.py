"""Issue 17, item 4: buying advice that could be bought: baseboards, platforms, MoE builds, budgets, owners."""

from __future__ import annotations

import json

import pytest

from advisor.engine.options import Options
from advisor.engine.plan import make_plan, platform_for


def _plan(catalog, model, **kw):
    opts = Options(quant=kw.pop("quant", None), ctx=kw.pop("ctx", None))
    return make_plan(catalog, catalog.models[model], opts, **kw)


@pytest.mark.parametrize("model,kw", [("llama-3.1-405b", {}), ("deepseek-r1", {"min_tps": 10}),
                                      ("llama-3.1-70b", {"min_tps": 40}), ("qwen3-235b-a22b", {"min_tps": 20})])
def test_no_plan_breaks_a_platform_or_a_baseboard(catalog, model, kw):
    p = _plan(catalog, model, top=50, used=True, **kw)
    assert p.options
    rules = catalog.rules.plan
    for o in p.options:
        specs = [(n, catalog.gpus[g]) for n, g in o.gpus]
        total = sum(n for n, _ in specs)
        if any(s.sold_in for _, s in specs):
            assert len(specs) == 1 and total in specs[0][1].sold_in and total in (4, 8), o.gpus
        elif not specs[0][1].unified_memory:
            plat = platform_for(specs, rules.platform)
            assert plat is not None and total <= plat.max_gpus, o.gpus
            power = sum(n * s.power_w for n, s in specs) + float(plat.base_w)
            assert power <= float(plat.psu_w) * float(plat.load_fraction), o.gpus


def test_sxm_parts_only_on_their_baseboards(catalog):
    p = _plan(catalog, "llama-3.1-405b", top=200, used=True, prices={"a100-sxm4-80gb": 6500})
    counts = {sum(n for n, _ in o.gpus) for o in p.options if catalog.gpus[o.gpus[0][1]].sold_in}
    assert counts and counts <= {4, 8}


def test_deepseek_r1_at_10_tps_has_a_mac_or_an_epyc_build_in_the_first_three(catalog, run_cli):
    p = _plan(catalog, "deepseek-r1", min_tps=10)
    first3 = p.options[:3]
    assert any(o.host_build or catalog.gpus[o.gpus[0][1]].unified_memory for o in first3)
    host = next(o for o in p.options if o.host_build)
    assert host.price_usd >= float(catalog.rules.plan.moe_host.usd) and not host.fits
    r = run_cli("plan", "deepseek-r1", "--min-tps", "10", "--json")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and any(o["host_build"] for o in d["options"][:3])
    assert all(o["price_basis"] for o in d["options"])


def test_budget_names_the_cheapest_above_it(catalog, run_cli):
    p = _plan(catalog, "deepseek-r1", min_tps=10, budget=3000)
    assert p.over_budget and len(p.options) == 1 and p.options[0].price_usd > 3000
    cheapest = _plan(catalog, "deepseek-r1", min_tps=10).options[0]
    assert p.options[0].price_usd == cheapest.price_usd
    r = run_cli("plan", "llama-3.1-70b", "--budget", "15000", "--min-tps", "10")
    assert r.returncode == 0 and "nothing" not in r.stdout.split("\n\n")[1]
    within = _plan(catalog, "llama-3.1-70b", min_tps=10, budget=15000)
    assert not within.over_budget and all(o.price_usd <= 15000 for o in within.options)


def test_nvlink_bridge_only_where_sold_at_a_dated_price(catalog):
    rules = catalog.rules.plan
    assert rules.nvlink_bridge_sold_for and "202" in rules.nvlink_bridge_basis
    p = _plan(catalog, "llama-3.1-70b", quant="Q4_K_M", min_tps=5, top=500, used=True)
    for o in p.options:
        if o.nvlink:
            assert all(g in rules.nvlink_bridge_sold_for for _, g in o.gpus)
            assert any("NVLink bridge" in b for b in o.price_basis)


def test_prices_carry_their_condition_and_date(catalog):
    p = _plan(catalog, "llama-3.1-8b", quant="Q4_K_M", min_tps=30, used=True, top=20)
    for o in p.options:
        for b in o.price_basis:
            assert any(w in b for w in ("msrp", "used", "new", "--price", "rules/plan.toml", "Tencent")), b
