"""Achievable share of peak RAM bandwidth in CPU-only decode, by memory-channel count, from the public
runs in tests/data/cpu_ram_decode.csv (each row cites a run that states its RAM configuration).

For every row: peak = channels x channel width / 8 x MT/s; bytes a token reads = the catalog model's
weights at that quant less the input embedding (a lookup) and the routed experts a token does not
choose (advisor.engine.speed.active_fraction), or the source's own figure where the model is not
named; share = bytes x tok/s / peak. Out of sample, grouped by source: each source's rows are
predicted with the share fitted on the other sources (median of the per-source medians), and the
error is |predicted - measured| / measured tok/s. A channel-count class gets its own share only when
two or more sources stand in it; otherwise the report says the class is too thin to fit.

    python bench/cpu_ram_share.py          # prints the table and the held-out errors
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cpu_ram_decode.csv"


def rows() -> list[dict]:
    with DATA.open(newline="") as f:
        return list(csv.DictReader(f))


def peak_gb_s(r: dict) -> float:
    return int(r["channels"]) * int(r["channel_bits"]) / 8 * int(r["mt_s"]) / 1000


def bytes_per_token(r: dict, catalog=None) -> float:
    if r["bytes_per_token_gb"]:
        return float(r["bytes_per_token_gb"]) * 1e9
    from advisor.catalog.load import load_catalog
    from advisor.engine.memory import weights_layout
    from advisor.engine.speed import active_fraction

    catalog = catalog or load_catalog(user=False)
    model, quant = catalog.models[r["model"]], catalog.quants[r["quant"]]
    lay = weights_layout(model, quant)
    return lay.total_bytes - lay.embed_bytes - sum(lay.expert_bytes) * (1 - active_fraction(model))


def shares(catalog=None) -> list[tuple[dict, float, float]]:
    """(row, bytes per token, share of peak) for every row."""
    out = []
    for r in rows():
        b = bytes_per_token(r, catalog)
        out.append((r, b, b * float(r["tok_s"]) / (peak_gb_s(r) * 1e9)))
    return out


def fit(values_by_source: dict[str, list[float]]) -> float:
    return statistics.median(statistics.median(v) for v in values_by_source.values())


def rulebook_share(catalog=None) -> float:
    from advisor.catalog.load import load_catalog

    return float((catalog or load_catalog(user=False)).rules.speed.decode.cpu_efficiency)


def held_out(catalog=None) -> dict:
    """Leave-one-source-out errors of the pooled share, and the classes with 2+ sources."""
    data = shares(catalog)
    by_source: dict[str, list[float]] = defaultdict(list)
    for r, _, s in data:
        by_source[r["source_url"]].append(s)
    errors: dict[str, list[float]] = defaultdict(list)
    for src in by_source:
        share = fit({k: v for k, v in by_source.items() if k != src})
        for r, b, _ in data:
            if r["source_url"] == src:
                pred = share * peak_gb_s(r) * 1e9 / b
                errors[src].append(abs(pred - float(r["tok_s"])) / float(r["tok_s"]))
    classes: dict[int, set[str]] = defaultdict(set)
    for r, _, _ in data:
        classes[int(r["channels"])].add(r["source_url"])
    per_source = {src: statistics.mean(e) for src, e in errors.items()}
    rulebook = rulebook_share(catalog)
    rule_error = {src: statistics.mean(abs(rulebook / s - 1) for s in v) for src, v in by_source.items()}
    return {"pooled_share": fit(by_source), "per_source_error": per_source, "rulebook_share": rulebook,
            "rulebook_error": rule_error, "share_range": (min(s for _, _, s in data), max(s for _, _, s in data)),
            "median_error": statistics.median(per_source.values()), "max_error": max(per_source.values()),
            "sources_per_class": {c: len(s) for c, s in sorted(classes.items())}}


def main() -> None:
    for r, b, s in shares():
        print(f"{r['machine']:26} {r['channels']:>2} ch {r['ram_type']}-{r['mt_s']} peak {peak_gb_s(r):6.1f} GB/s  "
              f"{r['model'] or '(source size)':14} {r['quant']:7} {b / 1e9:6.2f} GB/token x {float(r['tok_s']):6.2f} t/s "
              f"= share {s:.3f}")
    h = held_out()
    print(f"\npooled share (median of per-source medians): {h['pooled_share']:.3f}")
    for src, e in h["per_source_error"].items():
        print(f"  held out {src}: mean |error| {e:.1%}")
    print(f"median {h['median_error']:.1%}, worst {h['max_error']:.1%} (sources held out one at a time)")
    print(f"rules/speed.toml cpu_efficiency {h['rulebook_share']:g}: mean |error| per source "
          + ", ".join(f"{e:.1%}" for e in h["rulebook_error"].values())
          + f"; measured shares span {h['share_range'][0]:.2f}-{h['share_range'][1]:.2f}")
    thin = [c for c, n in h["sources_per_class"].items() if n < 2]
    print(f"sources per channel-count class: {h['sources_per_class']}; "
          f"classes too thin to fit on their own (under 2 sources): {thin}")


if __name__ == "__main__":
    main()
