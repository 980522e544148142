"""Accuracy report: the advisor's predictions against public llama.cpp measurements.

    python bench/accuracy.py            # fit/OOM agreement, decode and prefill error per dataset and family
    python bench/accuracy.py --write    # and record the median errors in rules/speed.toml (shown to users)

Fit: a measured speed means it ran, an OOM that it did not; the advisor is right when `fits`
agrees (llama-bench runs with every layer on the GPUs). Speed: |predicted / measured - 1| per row,
summarised as median and 90th percentile. The tests (tests/test_accuracy.py) fail when these grow
past the bounds the project has reached.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measurements import ROOT, SPEED_DATASETS, Case, load_cases, placer_for  # noqa: E402

from advisor.catalog.load import load_catalog  # noqa: E402
from advisor.engine.check import decode_seconds, prefill_seconds  # noqa: E402


@dataclass(frozen=True)
class Outcome:
    case: Case
    fits: bool
    predicted: float | None


def predict(cases: list[Case], rules: dict | None = None) -> list[Outcome]:
    catalog = load_catalog(user=False)
    rules = rules or catalog.rules
    out = []
    for c in cases:
        placer = placer_for(catalog, c)
        p = placer.at(c.ctx)
        pred = None
        if p.fits:
            args = (p, placer.rig, placer.model, placer.quant, placer.runtime, rules)
            if c.test == "tg":
                # llama-bench tg N generates N tokens from an empty cache: on average half-way deep.
                pred = 1 / decode_seconds(*args, placer.options, c.ctx, depth=c.n_gen // 2)
            else:
                pred = c.n_prompt / prefill_seconds(*args, c.n_prompt)
        out.append(Outcome(c, p.fits, pred))
    return out


def errors(outcomes: list[Outcome], test: str) -> list[tuple[Outcome, float]]:
    return [(o, abs(o.predicted / o.case.measured - 1)) for o in outcomes
            if o.case.test == test and o.case.measured and o.predicted]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)]


def fit_rows_of(outcomes: list[Outcome]) -> list[Outcome]:
    """Rows that carry a fit/OOM label: the datasets that report OOM alongside speeds."""
    return [o for o in outcomes if o.case.dataset.startswith("xiongjiedai")]


def summary(outcomes: list[Outcome]) -> dict:
    fit_rows = fit_rows_of(outcomes)
    right = sum(o.fits == (o.case.measured is not None) for o in fit_rows)
    out = {"fit_right": right, "fit_rows": len(fit_rows)}
    for test in ("tg", "pp"):
        e = [x for o, x in errors(outcomes, test) if o.case.dataset in SPEED_DATASETS]
        out[f"{test}_median"] = statistics.median(e) if e else float("nan")
        out[f"{test}_p90"] = pct(e, 0.9)
        out[f"{test}_rows"] = len(e)
    return out


def report(outcomes: list[Outcome]) -> str:
    lines = []
    s = summary(outcomes)
    lines.append(f"fit/OOM agreement (llama-bench, full offload): {s['fit_right']}/{s['fit_rows']} "
                 f"({s['fit_right'] / max(s['fit_rows'], 1):.1%})")
    for ds in sorted({o.case.dataset for o in fit_rows_of(outcomes)}):
        rows = [o for o in outcomes if o.case.dataset == ds]
        ok = sum(o.fits == (o.case.measured is not None) for o in rows)
        lines.append(f"  {ds:<28} {ok}/{len(rows)}")
    wrong = [o for o in outcomes if o.case.dataset.startswith("xiongjiedai") and o.fits != (o.case.measured is not None)]
    for o in wrong[:20]:
        lines.append(f"  wrong: {o.case.dataset} {o.case.label}: predicted {'fit' if o.fits else 'OOM'}, "
                     f"measured {'OOM' if o.case.measured is None else 'ran'}")
    for test, name in (("tg", "decode"), ("pp", "prefill")):
        lines.append("")
        lines.append(f"{name} ({test}): median {s[f'{test}_median']:.1%}, p90 {s[f'{test}_p90']:.1%} over "
                     f"{s[f'{test}_rows']} llama-bench rows ({', '.join(SPEED_DATASETS)}; others listed, not counted)")
        for key in ("dataset", "runtime", "family"):
            groups: dict[str, list[float]] = defaultdict(list)
            for o, e in errors(outcomes, test):
                groups[getattr(o.case, key)].append(e)
            lines.append(f"  {'by ' + key:<28} {'rows':>5} {'median':>8} {'p90':>8}")
            for k, v in sorted(groups.items()):
                lines.append(f"  {k:<28} {len(v):>5} {statistics.median(v):>8.1%} {pct(v, 0.9):>8.1%}")
    return "\n".join(lines)


def main() -> int:
    t0 = time.perf_counter()
    outcomes = predict(load_cases())
    print(report(outcomes))
    if "--write" in sys.argv:
        s = summary(outcomes)
        path = ROOT / "rules" / "speed.toml"
        src = path.read_text()
        import re

        src = re.sub(r"(?m)^decode_median_pct = .*$", f"decode_median_pct = {round(s['tg_median'] * 100)}", src)
        src = re.sub(r"(?m)^prefill_median_pct = .*$", f"prefill_median_pct = {round(s['pp_median'] * 100)}", src)
        path.write_text(src)
        print(f"wrote the error band into {path}")
    print(f"\n{len(outcomes)} rows in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
