"""Issue 26 (choosing): every platform priced or marked owned, prices a buyer can pay today with their date,
and the cooling and power of passive data-centre cards stated."""

from __future__ import annotations

from advisor.engine.options import Options
from advisor.engine.plan import make_plan


def _plan(catalog, model, **kw):
    opts = Options(quant=kw.pop("quant", None), ctx=kw.pop("ctx", None))
    return make_plan(catalog, catalog.models[model], opts, **kw)


def _passive(catalog, option):
    cats = catalog.rules.plan.cooling.passive_categories
    return any(catalog.gpus[g].category in cats for _, g in option.gpus)


def test_passive_v100s_do_not_rank_first_on_a_free_server(catalog):
    # before: 2x P40 $520 and 3x V100 PCIe 16GB $936 ranked first, "on a GPU server" that cost nothing
    p = _plan(catalog, "llama-3.1-70b", quant="Q4_K_M", used=True, top=500)
    first = p.options[0]
    assert not first.unpriced_parts and not _passive(catalog, first)
    server = [o for o in p.options if o.unpriced_parts]
    assert server and all(o.unpriced_parts for o in p.options[p.options.index(server[0]):])  # after every priced one
    v100 = next(o for o in server if o.new_gpus == ((3, "v100-pcie-16gb"),))
    assert v100.price_usd == 3 * 312 and "GPU server" in v100.unpriced_parts[0]
    assert "passive" in v100.cooling and "250 W each" in v100.cooling
    assert any("price is not known" in n for n in p.notes)


def test_an_owned_server_is_priced_at_nothing(catalog):
    p = _plan(catalog, "llama-3.1-70b", quant="Q4_K_M", used=True, platforms=("server",))
    first = p.options[0]
    assert _passive(catalog, first) and not first.unpriced_parts and first.price_usd == 2 * 260
    assert any("yours (--have)" in b for b in first.price_basis)
    assert "airflow" in first.cooling


def test_no_old_list_price_in_late_2026(catalog):
    # before: an RTX 4090 at its 2022-10 list price, $1,599
    rules = catalog.rules.plan
    p = _plan(catalog, "qwen3-32b", quant="Q4_K_M", min_tps=25, top=500)
    assert "rtx-4090" in p.stale_list_prices and "rtx-4090" in p.unpriced
    assert all("rtx-4090" not in dict((g, n) for n, g in o.gpus) for o in p.options)
    assert any("launch list price" in n and rules.prices_as_of in n for n in p.notes)
    for o in p.options:
        for b in o.price_basis:
            if "msrp" in b:
                month = b.split("as of ")[1][:7]
                y, m = map(int, month.split("-"))
                ny, nm = map(int, rules.prices_as_of.split("-"))
                assert (ny * 12 + nm) - (y * 12 + m) <= rules.list_price_months, b


def test_used_market_prices_only_with_used_and_dated(catalog):
    new = _plan(catalog, "qwen3-32b", quant="Q4_K_M", min_tps=25, top=500)
    used = _plan(catalog, "qwen3-32b", quant="Q4_K_M", min_tps=25, top=500, used=True)
    one_5090 = lambda p: next(o for o in p.options if o.new_gpus == ((1, "rtx-5090"),))  # noqa: E731
    assert one_5090(new).price_usd == 5258 and "(new, as of 2026-09)" in one_5090(new).price_basis[0]
    assert one_5090(used).price_usd == 4795 and "(used, as of 2026-09)" in one_5090(used).price_basis[0]


def test_plan_text_says_price_not_known_and_cooling(run_cli):
    out = run_cli("plan", "llama-3.1-70b", "--used", "--top", "200").stdout
    assert "(price not known)" in out and "cooling and power:" in out
    owned = run_cli("plan", "llama-3.1-70b", "--used", "--have", "server").stdout
    assert "yours (--have)" in owned.replace("\n     ", " ")
