"""The CPU-only RAM-bandwidth runs (tests/data/cpu_ram_decode.csv) and bench/cpu_ram_share.py: every row
cites a run that states its RAM configuration; the held-out figures the README and rules/speed.toml
quote are what the script computes; no per-channel share is in the rulebook while no channel-count
class has two sources to fit and test it on."""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cpu_ram_decode.csv"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("cpu_ram_share", ROOT / "bench" / "cpu_ram_share.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rows_are_cited_and_complete():
    with DATA.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 9
    for r in rows:
        assert r["source_url"].startswith("https://github.com/"), r
        assert int(r["channels"]) >= 1 and int(r["mt_s"]) >= 800 and int(r["channel_bits"]) in (16, 32, 64)
        assert float(r["tok_s"]) > 0 and (r["model"] or r["bytes_per_token_gb"]), r
        assert r["notes"], r


def test_shares_are_physical(bench, catalog):
    for r, b, share in bench.shares(catalog):
        assert 0.05 < share <= 1.0, (r["machine"], share)  # no run reads faster than its RAM's peak


def test_quoted_figures_are_the_scripts(bench, catalog):
    h = bench.held_out(catalog)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    speed = (ROOT / "rules" / "speed.toml").read_text(encoding="utf-8")
    for text in (readme, speed):
        assert f"{h['pooled_share']:.3f}" in text
        assert f"{h['median_error']:.1%}" in text
    assert f"{h['share_range'][0]:.2f}" in readme and f"{h['share_range'][1]:.2f}" in readme
    assert h["rulebook_share"] == 0.7


def test_no_per_channel_share_without_two_sources_per_class(bench, catalog):
    h = bench.held_out(catalog)
    fittable = [c for c, n in h["sources_per_class"].items() if n >= 2]
    speed = (ROOT / "rules" / "speed.toml").read_text(encoding="utf-8")
    per_channel = re.search(r"^cpu_efficiency\s*=\s*\{", speed, re.M)
    assert bool(per_channel) <= bool(fittable), "a per-channel share needs two sources in its class"
