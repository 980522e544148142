"""Accuracy report: the advisor's predictions against public measurements, out of sample.

    python bench/accuracy.py            # the report
    python bench/accuracy.py --write    # and write the error band per kind of answer (rules/speed_bands.toml)
    python bench/accuracy.py --heldout  # only the 2025-26 held-out section (fast: nothing is refitted)

Speed: |predicted / measured - 1| per row, summarised as median (p50) and 90th percentile. The
headline is grouped cross-validation: the speed tables are refitted (bench/calibrate.py) once per
group with that group's rows held out, and only the held-out rows are scored: leave one source out
(a new table from someone else's machines, builds and settings) and leave one GPU architecture out
(hardware the fit never saw). The in-sample figure (fitted and scored on the same rows) is printed
beside it, and so is a naive baseline (peak bandwidth over the model file for decode, dense FP16
throughput over 2 x active parameters for prefill, each times one global fraction fitted out of
sample the same way), so the model's terms show what they earn.

Fit: a measured speed means it ran, an OOM that it did not; the advisor is right when `fits`
agrees (llama-bench runs with every layer on the GPUs). Beside it the naive rule "weights <= total
VRAM". Nothing is fitted on fit/OOM labels.

Held out, 2025-26: today's speed tables (rules/speed.toml, never fitted on these rows) scored on the
public 2025-26 measurements (measurements.HELDOUT_DATASETS), each row asked as a user would ask it
(its GPU, model, quant, runtime and test; 128 GB of RAM; the advisor's own placement, partial offload
included). Rows the catalog cannot ask about are counted by reason. The naive baseline's fraction is
fitted on the calibration rows, like the tables.

Error bands: every answer's band comes from a pool of rows (advisor.engine.speed.band_pools): its kind of
answer (runtime x hardware x placement: answer_kind) where that has `MIN_BAND_ROWS` rows, else its backend
family (CUDA, ROCm, Vulkan, Metal), else all rows. A pool's band is the p50/p90 of the out-of-sample errors of
its rows (the calibration rows left one source out, the 2025-26 rows under today's tables). Their p90 coverage
is measured on the 2025-26 rows with each band rebuilt without the row's source (p90_coverage).
tests/test_accuracy.py bounds the out-of-sample figures.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate import LINKS, Row, build_rows, fit_rules, in_fit  # noqa: E402
from measurements import ROOT, SPEED_DATASETS, Case, load_cases, load_heldout, placer_for  # noqa: E402

from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.catalog.rulebook import build_rulebook, rulebook_to_dict  # noqa: E402
from advisor.engine import memory as mem  # noqa: E402
from advisor.engine import speed as spd  # noqa: E402

MIN_BAND_ROWS = 10
"""Held-out rows a kind of answer needs before it is given a band (fewer: "not measured")."""
BANDS_TOML = ROOT / "rules" / "speed_bands.toml"
GROUPS: dict[str, Callable[[Case], str]] = {"source": lambda c: c.dataset, "architecture": lambda c: c.family}
TESTS = (("tg", "decode"), ("pp", "prefill"))

Predictions = dict[int, float]
"""id(row) -> predicted tokens/s."""


@dataclass(frozen=True)
class FitOutcome:
    case: Case
    fits: bool
    naive_fits: bool
    """The naive rule: the model file fits in the GPUs' total memory."""


def fit_outcomes(cases: list[Case]) -> list[FitOutcome]:
    """Fit/OOM predictions for the rows that carry a fit/OOM label (the tables that report OOM)."""
    catalog = load_catalog(user=False)
    out = []
    for c in cases:
        if not c.dataset.startswith("xiongjiedai"):
            continue
        placer = placer_for(catalog, c)
        vram = sum(g.spec.vram_gib for g in placer.rig.gpus) * 2**30
        weights = mem.weights_layout(placer.model, placer.quant).total_bytes
        out.append(FitOutcome(c, placer.at(c.ctx).fits, weights <= vram))
    return out


def in_sample(rows: list[Row], rules: dict) -> Predictions:
    book = build_rulebook(fit_rules(rows, rules, quiet=True))
    return {id(r): r.predicted_tokens_per_s(book) for r in rows}


def held_out(rows: list[Row], rules: dict, group: Callable[[Case], str]) -> Predictions:
    """Each scored row predicted by tables fitted without its group."""
    scored = [r for r in rows if in_fit(r.case)]
    out = {}
    for g in sorted({group(r.case) for r in scored}):
        book = build_rulebook(fit_rules([r for r in scored if group(r.case) != g], rules, quiet=True))
        out.update({id(r): r.predicted_tokens_per_s(book) for r in scored if group(r.case) == g})
    return out


def naive_held_out(rows: list[Row], group: Callable[[Case], str]) -> Predictions:
    """The naive baseline: one global fraction per test (the median measured/naive of the other groups)."""
    scored = [r for r in rows if in_fit(r.case)]
    out = {}
    for test, _ in TESTS:
        of_test = [r for r in scored if r.test == test]
        for g in sorted({group(r.case) for r in of_test}):
            train = [math.log(r.case.measured / r.naive) for r in of_test if group(r.case) != g]
            frac = math.exp(statistics.median(train)) if train else 1.0
            out.update({id(r): frac * r.naive for r in of_test if group(r.case) == g})
    return out


def errors(rows: list[Row], preds: Predictions, test: str) -> list[tuple[Row, float]]:
    return [(r, abs(preds[id(r)] / r.case.measured - 1)) for r in rows if r.test == test and id(r) in preds]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)]


def stats(e: list[float]) -> dict:
    return {"rows": len(e), "median": statistics.median(e) if e else float("nan"), "p90": pct(e, 0.9)}


@dataclass
class Accuracy:
    rows: list[Row]
    preds: dict[str, Predictions]
    """'in sample', 'held out by source', 'held out by architecture', 'naive, held out by source', ..."""
    fit: list[FitOutcome]

    def summary(self, name: str, test: str) -> dict:
        return stats([e for _, e in errors(self.rows, self.preds[name], test)])

    def by(self, name: str, test: str, key: Callable[[Row], str]) -> dict[str, dict]:
        groups: dict[str, list[float]] = defaultdict(list)
        for r, e in errors(self.rows, self.preds[name], test):
            groups[key(r)].append(e)
        return {k: stats(v) for k, v in sorted(groups.items())}


def measure(cases: list[Case] | None = None, groups: tuple[str, ...] = tuple(GROUPS)) -> Accuracy:
    cases = load_cases() if cases is None else cases
    rules = rulebook_to_dict(load_catalog(user=False).rules)
    rows = [r for r in build_rows(cases) if in_fit(r.case)]
    with LINKS:
        preds = {"in sample": in_sample(rows, rules)}
        for g in groups:
            preds[f"held out by {g}"] = held_out(rows, rules, GROUPS[g])
            preds[f"naive, held out by {g}"] = naive_held_out(rows, GROUPS[g])
    return Accuracy(rows, preds, fit_outcomes(cases))


@dataclass
class HeldOut:
    """Today's tables on the 2025-26 rows: model and naive predictions, and what could not be asked."""
    rows: list[Row]
    model: Predictions
    naive: Predictions
    skipped: dict[str, int]
    total: int

    def by(self, test: str, key: Callable[[Row], str] | None = None) -> dict[str, tuple[dict, dict]]:
        groups: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        for (r, e), (_, n) in zip(errors(self.rows, self.model, test), errors(self.rows, self.naive, test)):
            k = key(r) if key else "all"
            groups[k][0].append(e)
            groups[k][1].append(n)
        return {k: (stats(m), stats(n)) for k, (m, n) in sorted(groups.items())}


def held_out_2025(calibration: list[Row]) -> HeldOut:
    """Score today's rules/speed.toml on the 2025-26 rows (never fitted on them)."""
    catalog = load_catalog(user=False)
    cases, skipped, total = load_heldout(catalog)
    rows = build_rows(cases, offload=True)
    if len(rows) < len(cases):
        skipped = {**skipped, "the advisor's placement does not run it": len(cases) - len(rows)}
    fraction = {}
    for test, _ in TESTS:  # the naive baseline's one fraction per test, from the calibration rows
        logs = [math.log(r.case.measured / r.naive) for r in calibration if r.test == test]
        fraction[test] = math.exp(statistics.median(logs)) if logs else 1.0
    return HeldOut(rows, {id(r): r.predicted_tokens_per_s(catalog.rules) for r in rows},
                   {id(r): fraction[r.test] * r.naive for r in rows}, skipped, total)


def cpu_only_decode(h: HeldOut) -> dict[str, tuple[list[float], list[float]]]:
    """The CPU-only decode rows by source: |error| with the CPU its source names (hardware_db/cpus.toml: compute
    ceiling, fabric cap, its memory interface) and before the CPU catalog (the same rows asked with the CPU unknown:
    the rulebook's default RAM bandwidth, bandwidth alone)."""
    catalog = load_catalog(user=False)
    rows = [r for r in h.rows if not r.case.gpu_count and r.test == "tg"]
    before = {id(r): b for r in rows for b in build_rows([replace(r.case, cpu_id="")], offload=True)}
    out: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in rows:
        out[r.case.dataset][0].append(abs(h.model[id(r)] / r.case.measured - 1))
        b = before.get(id(r))
        if b is not None:
            out[r.case.dataset][1].append(abs(b.predicted_tokens_per_s(catalog.rules) / r.case.measured - 1))
    return dict(sorted(out.items()))


def cpu_only_report(h: HeldOut) -> str:
    by_source = cpu_only_decode(h)
    lines = ["\nCPU-only decode (tg), held out 2025-26: the CPU named vs unknown (before the CPU catalog)",
             f"  {'':<40} {'rows':>5} {'median':>8} {'before':>8}"]
    every: tuple[list[float], list[float]] = ([], [])
    for source, (now, before) in by_source.items():
        every[0].extend(now)
        every[1].extend(before)
        lines.append(f"  {'  ' + source:<40} {len(now):>5} {statistics.median(now):>8.1%} "
                     f"{statistics.median(before):>8.1%}")
    if every[0]:
        lines.insert(2, f"  {'all':<40} {len(every[0]):>5} {statistics.median(every[0]):>8.1%} "
                        f"{statistics.median(every[1]):>8.1%}")
    return "\n".join(lines)


def _pair(label: str, m: dict, n: dict) -> str:
    return (f"  {label:<40} {m['rows']:>5} {m['median']:>8.1%} {m['p90']:>8.1%}"
            f" {n['median']:>8.1%} {n['p90']:>8.1%}")


def heldout_report(h: HeldOut) -> str:
    asked = sum(h.skipped.values())
    lines = [f"held out, 2025-26 (today's rules/speed.toml, never fitted on these rows): {h.total} rows, "
             f"{len(h.rows)} scored from {len({r.case.dataset for r in h.rows})} sources, {asked} not askable:"]
    lines += [f"  not askable: {n} {why}" for why, n in sorted(h.skipped.items(), key=lambda x: -x[1])]
    for test, name in TESTS:
        lines.append(f"\n{name} ({test}), held out 2025-26")
        lines.append(f"  {'':<40} {'rows':>5} {'median':>8} {'p90':>8} {'naive50':>8} {'naive90':>8}")
        for label, key in (("all", None), ("backend family", _family), ("kind", lambda r: r.kind),
                           ("source", lambda r: r.case.dataset)):
            groups = h.by(test, key)
            if label != "all":
                lines.append(f"  per {label}")
            for k, (m, n) in groups.items():
                lines.append(_pair(("  " + k) if label != "all" else "all", m, n))
    return "\n".join(lines) + "\n" + cpu_only_report(h)


Errors = list[tuple[Row, float]]


def band_errors(acc: Accuracy, h: HeldOut, test: str) -> Errors:
    """Every row's out-of-sample error for a test: the calibration rows predicted without their source (leave one
    source out), and the 2025-26 rows predicted by today's tables, which never saw them."""
    return errors(acc.rows, acc.preds["held out by source"], test) + errors(h.rows, h.model, test)


def _family(r: Row) -> str:
    return spd.BACKEND_NAMES.get(r.backend, r.backend)


def _pools(errs: Errors) -> dict[str, list[tuple[Row, float]]]:
    """Rows by pool: each row counts in its kind, its backend family and all rows (advisor.engine.speed.band_pools)."""
    pools: dict[str, list[tuple[Row, float]]] = defaultdict(list)
    for r, e in errs:
        for key in spd.band_pools(r.kind, _family(r)):
            pools[key].append((r, e))
    return pools


def _p90_of(pools: dict, r: Row) -> float | None:
    """The p90 of the narrowest pool of `r` that has MIN_BAND_ROWS rows (what the answer would be given)."""
    for key in spd.band_pools(r.kind, _family(r)):
        if len(pools.get(key, ())) >= MIN_BAND_ROWS:
            return pct([e for _, e in pools[key]], 0.9)
    return None


def p90_coverage(acc: Accuracy, h: HeldOut) -> dict[str, float]:
    """Share of the 2025-26 held-out rows whose error is within the p90 band they would be given, each band built
    without the row's own source (so the coverage is measured out of sample), per test."""
    out = {}
    for test, name in TESTS:
        errs = band_errors(acc, h, test)
        held = errors(h.rows, h.model, test)
        inside = 0
        for source in sorted({r.case.dataset for r, _ in held}):
            pools = _pools([(r, e) for r, e in errs if r.case.dataset != source])
            for r, e in held:
                if r.case.dataset == source:
                    p90 = _p90_of(pools, r)
                    inside += p90 is not None and e <= p90
        out[name] = round(100 * inside / max(len(held), 1), 1)
    return out


def bands(acc: Accuracy, h: HeldOut) -> list[dict]:
    """The error band of each pool (a kind of answer, a backend family, all rows): p50/p90 of the out-of-sample
    errors of its rows (band_errors); fewer than MIN_BAND_ROWS rows: none, the answer pools up."""
    by_test = {name: _pools(band_errors(acc, h, test)) for test, name in TESTS}
    out = []
    for key in sorted(set(by_test["decode"]) | set(by_test["prefill"]), key=lambda k: (k == spd.ALL_ROWS, k)):
        band: dict = {"kind": key}
        for _, name in TESTS:
            e = [x for _, x in by_test[name].get(key, [])]
            band[f"{name}_rows"] = len(e)
            if len(e) >= MIN_BAND_ROWS:
                band[f"{name}_p50_pct"] = round(statistics.median(e) * 100, 1)
                band[f"{name}_p90_pct"] = round(pct(e, 0.9) * 100, 1)
        rows = [r for _, name in TESTS for r, _ in by_test[name].get(key, [])]
        band["sources"] = " ".join(sorted({r.case.source for r in rows}))
        out.append(band)
    return out


def bands_toml(acc: Accuracy, h: HeldOut) -> str:
    cover = p90_coverage(acc, h)
    lines = ["# Error band per pool, GENERATED by `python bench/accuracy.py --write`: do not edit.",
             "# p50/p90 of |predicted / measured - 1| over the public measurements of a pool: the calibration rows",
             "# each predicted by speed tables fitted without its source (leave one source out), and the 2025-26",
             "# rows predicted by today's tables, which never saw them (tests/data/speed_measurements.csv). A pool is a",
             "# kind of answer, a backend family (`<family> backend family`) or `all rows`; an answer takes the",
             "# narrowest pool of its own with min_rows rows (advisor.engine.speed.error_band).",
             "# p90_coverage_pct: share of the 2025-26 rows within the p90 band they would be given, each band built",
             "# without the row's own source.",
             f"min_rows = {MIN_BAND_ROWS}",
             "p90_coverage_pct = { " + ", ".join(f"{k} = {v}" for k, v in cover.items()) + " }", ""]
    for b in bands(acc, h):
        lines.append(f'[band."{b["kind"]}"]')
        for k, v in b.items():
            if k != "kind":
                lines.append(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}")
        lines.append("")
    return "\n".join(lines)


def _row(label: str, s: dict) -> str:
    return f"  {label:<40} {s['rows']:>5} {s['median']:>8.1%} {s['p90']:>8.1%}"


def report(acc: Accuracy) -> str:
    lines = []
    right = sum(o.fits == (o.case.measured is not None) for o in acc.fit)
    naive = sum(o.naive_fits == (o.case.measured is not None) for o in acc.fit)
    n = max(len(acc.fit), 1)
    lines.append(f"fit/OOM agreement (llama-bench, full offload), {len(acc.fit)} labelled rows: advisor "
                 f"{right} ({right / n:.1%}), naive 'weights <= total VRAM' {naive} ({naive / n:.1%})")
    for o in [o for o in acc.fit if o.fits != (o.case.measured is not None)][:20]:
        lines.append(f"  wrong: {o.case.dataset} {o.case.label}: predicted {'fit' if o.fits else 'OOM'}, "
                     f"measured {'OOM' if o.case.measured is None else 'ran'}")
    sources = sorted({r.case.dataset for r in acc.rows})
    lines.append(f"\nspeed rows scored: {len(acc.rows)} from {len(sources)} sources ({', '.join(sources)}); "
                 f"the llama-bench tables {', '.join(SPEED_DATASETS)} and other runtimes' own results")
    for test, name in TESTS:
        lines.append(f"\n{name} ({test})")
        lines.append(f"  {'':<40} {'rows':>5} {'median':>8} {'p90':>8}")
        for label in acc.preds:
            lines.append(_row(label, acc.summary(label, test)))
        for key, label in ((lambda r: r.case.dataset, "source"), (lambda r: r.kind, "kind"),
                           (lambda r: r.case.family, "architecture")):
            lines.append(f"  held out by source, per {label}")
            for k, s in acc.by("held out by source", test, key).items():
                lines.append(_row("  " + k, s))
    return "\n".join(lines)


def bands_report(acc: Accuracy, h: HeldOut) -> str:
    cover = p90_coverage(acc, h)
    lines = [f"error bands (out of sample; a pool with fewer than {MIN_BAND_ROWS} rows pools up to the backend family, "
             f"then all rows); p90 covers {cover['decode']:g}% of the 2025-26 decode rows and {cover['prefill']:g}% "
             f"of the prefill rows, each band built without the row's source"]
    for b in bands(acc, h):
        parts = [f"{name} {b[name + '_p50_pct']:g}%/{b[name + '_p90_pct']:g}% (n={b[name + '_rows']})"
                 if name + "_p50_pct" in b else f"{name} pools up (n={b[name + '_rows']})" for _, name in TESTS]
        lines.append(f"  {b['kind']:<40} " + ", ".join(parts))
    return "\n".join(lines)


def main() -> int:
    t0 = time.perf_counter()
    if "--heldout" in sys.argv:
        cal = [r for r in build_rows(load_cases()) if in_fit(r.case)]
        print(heldout_report(held_out_2025(cal)))
        print(f"\nin {time.perf_counter() - t0:.1f} s")
        return 0
    acc = measure()
    h = held_out_2025(acc.rows)
    print(report(acc))
    print()
    print(heldout_report(h))
    print()
    print(bands_report(acc, h))
    if "--write" in sys.argv:
        tmp = BANDS_TOML.with_suffix(".toml.tmp")
        tmp.write_text(bands_toml(acc, h))
        tmp.replace(BANDS_TOML)
        print(f"wrote {BANDS_TOML}")
    print(f"\n{len(acc.rows)} speed rows, {len(acc.fit)} fit rows in {time.perf_counter() - t0:.1f} s")
    print("rows per test:", dict(Counter(r.test for r in acc.rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
