"""Speed goals, measured in one run on this machine (ratios, not absolute times, are the point).

    python bench/bench.py            # everything
    python bench/bench.py --quick    # fewer repetitions

1. `advisor check llama-3.1-8b --gpu rtx-3090 --json` wall time against a bare `python -c pass`,
   both as fresh processes, median of N runs (goal: <= 250 ms and <= 6x the bare interpreter).
2. Every catalog model evaluated on one rig, in process (goal: < 2 s).
3. `advisor fit` and `advisor plan` in process, with the number of rigs `plan` evaluated
   (goal: a full plan well under a second).
4. The app's first paint (bench/tui_first_paint.py, goal <= 1.5 s) and recompute after a key
   (bench/tui_recompute.py, goal <= 0.3 s).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall(cmd: list[str], runs: int) -> float:
    """Median wall time of `runs` fresh processes."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def timed(fn, runs: int = 3):
    best = None
    out = None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, out


def main() -> int:
    quick = "--quick" in sys.argv
    runs = 5 if quick else 15
    py = sys.executable
    # `pip install` compiles the package to bytecode; an editable checkout under
    # PYTHONDONTWRITEBYTECODE would otherwise recompile every module on every run.
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "advisor")], stdout=subprocess.DEVNULL, check=False)
    wall([py, "-m", "advisor", "check", "llama-3.1-8b", "--gpu", "rtx-3090", "--json"], 1)  # warm caches
    # the `advisor` console script, as a user runs it (python -m adds runpy's import machinery)
    script = Path(py).with_name("advisor")
    advisor = [str(script)] if script.exists() else [py, "-m", "advisor"]
    # interleave the two so that a busy machine slows both alike
    bare_t, check_t = [], []
    for _ in range(runs):
        bare_t.append(wall([py, "-c", "pass"], 1))
        check_t.append(wall([*advisor, "check", "llama-3.1-8b", "--gpu", "rtx-3090", "--json"], 1))
    bare, check = statistics.median(bare_t), statistics.median(check_t)
    print(f"python -c pass:                      {bare * 1000:7.1f} ms (median of {runs})")
    print(f"advisor check --json:                {check * 1000:7.1f} ms  = {check / bare:.1f}x bare "
          f"(goal <= 250 ms and <= 6x)")

    from advisor.catalog.load import load_catalog
    from advisor.engine.check import evaluate
    from advisor.engine.options import Options
    from advisor.engine.plan import make_plan
    from advisor.engine.rank import rank_models
    from advisor.probe.flags import rig_from_flags

    catalog = load_catalog(user=False)
    rig = rig_from_flags(catalog, ["2xrtx-3090"], ram=64)
    n = len(catalog.models)
    dt, _ = timed(lambda: [evaluate(catalog, rig, m, Options()) for m in catalog.models.values()])
    print(f"every catalog model on 2x RTX 3090:  {dt * 1000:7.1f} ms for {n} models (goal < 2 s)")
    dt, _ = timed(lambda: rank_models(catalog, rig, Options(ctx=8192)))
    print(f"advisor fit (ranked):                {dt * 1000:7.1f} ms")
    for model, opts, tps in (("llama-3.1-70b", Options(quant="Q4_K_M", ctx=8192), 10.0),
                             ("llama-3.1-8b", Options(quant="Q4_K_M"), 30.0),
                             ("llama-3.1-405b", Options(), None)):
        dt, plan = timed(lambda: make_plan(catalog, catalog.models[model], opts, min_tps=tps))
        print(f"advisor plan {model:<15}         {dt * 1000:7.1f} ms, {plan.evaluated} rigs evaluated "
              f"(goal well under 1 s)")
    first = subprocess.run([py, str(ROOT / "bench" / "tui_first_paint.py"), "--runs", "3" if quick else "5", "--",
                            "llama-3.1-70b", "--gpu", "2xrtx-3090"], capture_output=True, text=True)
    print("app first paint:                     " + (first.stdout.strip().splitlines() or ["(failed)"])[-1])
    again = subprocess.run([py, str(ROOT / "bench" / "tui_recompute.py"), "--runs", "3" if quick else "5"],
                           capture_output=True, text=True)
    for line in again.stdout.strip().splitlines() or ["(failed)"]:
        print("app recompute, " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
