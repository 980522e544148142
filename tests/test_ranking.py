"""Issue 26 (choosing): `fit` ranks by what the user gets, not by size alone, and says its key."""

from __future__ import annotations

import re

from advisor.engine.options import Options
from advisor.engine.rank import effective_params, rank_key, rank_models
from advisor.probe.flags import rig_from_flags


def _order(catalog, gpus):
    ranked = rank_models(catalog, rig_from_flags(catalog, gpus, ram=64), Options())
    return [r.model.id for r in ranked if r.report.fits]


def test_every_release_month_is_a_month(catalog):
    for m in catalog.models.values():
        assert m.released == "" or re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", m.released), (m.id, m.released)
    assert sum(1 for m in catalog.models.values() if m.released) >= 0.9 * len(catalog.models)


def test_newer_models_outrank_bigger_old_ones(catalog):
    # before: size first, so Llama 2 70B (2023-07) ranked above Qwen3 32B (2025-04) and Qwen3.5 27B (2026-02)
    order = _order(catalog, ["2xrtx-3090"])
    assert order.index("qwen3.5-27b") < order.index("llama-3.3-70b") < order.index("llama-2-70b")
    assert order.index("qwen3-32b") < order.index("llama-2-70b")
    # but a tiny new model does not outrank a capable older one
    assert order.index("llama-3.1-8b") < order.index("gemma-3-270m")


def test_effective_size_follows_the_density_rule(catalog):
    rules = catalog.rules
    months = float(rules.quality.rank.density_doubling_months)
    a, b = catalog.models["llama-3.1-8b"], catalog.models["llama-3.3-70b"]  # 2024-07, 2024-12: 5 months apart
    ratio = (effective_params(b, rules) / b.params_total) / (effective_params(a, rules) / a.params_total)
    assert abs(ratio - 2 ** (5 / months)) < 1e-9
    from dataclasses import replace

    unknown = replace(catalog.models["llama-3.1-8b"], released="")  # no release month: no credit
    assert effective_params(unknown, rules) == unknown.params_total


def test_fit_says_its_ranking_key(run_cli):
    out = run_cli("fit", "--gpu", "rtx-4090")
    text = " ".join(out.stdout.split())
    assert "ranked by: fits on the GPUs, then fits only tight, quality loss not steep, then effective size" in text
    assert "released 2026-" in text
    import json

    rows = json.loads(run_cli("fit", "--gpu", "rtx-4090", "--json").stdout)
    assert all(r["released"] is None or len(r["released"]) == 7 for r in rows)
    cpu = " ".join(run_cli("fit").stdout.split())
    assert "ranked by: runs, decodes at reading speed" in cpu


def test_rank_key_names_its_numbers(catalog):
    key = rank_key(catalog.rules, False)
    assert f"{float(catalog.rules.quality.rank.density_doubling_months):g} months" in key
    assert catalog.rules.quality.rank.reference_month in key


def test_a_release_that_is_not_a_month_is_refused(catalog):
    from dataclasses import asdict

    import pytest

    from advisor.catalog.load import validate_entry
    from advisor.catalog.types import ModelSpec

    data = {k: v for k, v in asdict(catalog.models["llama-3.1-8b"]).items() if v not in ((), None)}
    assert validate_entry(ModelSpec, {**data, "released": "2024-07"}).released == "2024-07"
    with pytest.raises(ValueError, match="not a month"):
        validate_entry(ModelSpec, {**data, "released": "July 2024"})
