"""Is this tree slower than another? bench/bench.py's measurements for two checkouts, interleaved in one run.

    python bench/compare.py OTHER_TREE [--runs N]

OTHER_TREE is another checkout of the advisor (e.g. `git worktree add /tmp/old <commit>`). Each measurement runs
in fresh processes with PYTHONPATH set to one tree or the other, alternating, so a busy machine slows both alike;
the ratio this tree / the other is what to read. Measured: `advisor check llama-3.1-8b --gpu rtx-3090 --json`
(median wall time of fresh processes), every catalog model on 2x RTX 3090, `fit` ranked and `plan` for Llama 3.1
70B (best of 3, in process), and the app's first paint (bench/tui_first_paint.py of each tree).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

IN_PROCESS = r"""
import json, time
from advisor.catalog.load import load_catalog
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.plan import make_plan
from advisor.engine.rank import rank_models
from advisor.probe.flags import rig_from_flags

def best(fn, runs=3):
    out = []
    for _ in range(runs):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)

catalog = load_catalog(user=False)
rig = rig_from_flags(catalog, ["2xrtx-3090"], ram=64)
print(json.dumps({
    "every model": best(lambda: [evaluate(catalog, rig, m, Options()) for m in catalog.models.values()]),
    "fit": best(lambda: rank_models(catalog, rig, Options(ctx=8192))),
    "plan 70b": best(lambda: make_plan(catalog, catalog.models["llama-3.1-70b"], Options(quant="Q4_K_M", ctx=8192),
                                       min_tps=10.0)),
}))
"""


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _check_once(tree: Path) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "advisor", "check", "llama-3.1-8b", "--gpu", "rtx-3090", "--json"],
                   cwd=tree, env=_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def _in_process(tree: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", IN_PROCESS], cwd=tree, env=_env(tree), capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _first_paint(tree: Path) -> float | None:
    out = subprocess.run([sys.executable, str(tree / "bench" / "tui_first_paint.py"), "--runs", "3", "--",
                          "llama-3.1-70b", "--gpu", "2xrtx-3090"], cwd=tree, env=_env(tree), capture_output=True,
                         text=True, timeout=600)
    words = (out.stdout.strip().splitlines() or [""])[-1].split()
    nums = [float(w) for w in words if w.replace(".", "", 1).isdigit()]
    return nums[0] / 1000 if nums and "ms" in words else (nums[0] if nums else None)


def main() -> int:
    args = sys.argv[1:]
    if not args or not Path(args[0]).is_dir():
        print("usage: python bench/compare.py OTHER_TREE [--runs N]", file=sys.stderr)
        return 2
    other, runs = Path(args[0]).resolve(), int(args[args.index("--runs") + 1]) if "--runs" in args else 9
    trees = {"this": HERE, "other": other}
    for tree in trees.values():  # bytecode first, as an installed package has it
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "advisor")], check=False,
                       stdout=subprocess.DEVNULL)
        _check_once(tree)
    checks: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            checks[name].append(_check_once(tree))
    rows = {"check --json": {k: statistics.median(v) for k, v in checks.items()}}
    inproc = {k: [_in_process(t), _in_process(t)] for k, t in trees.items()}
    for key in inproc["this"][0]:
        rows[key] = {k: min(r[key] for r in v) for k, v in inproc.items()}
    rows["app first paint"] = {k: _first_paint(t) for k, t in trees.items()}
    print(f"{'':<16} {'this':>10} {'other':>10} {'this/other':>11}   (seconds; {runs} runs of check, best of 6 else)")
    for key, v in rows.items():
        ratio = f"{v['this'] / v['other']:.2f}" if v["this"] and v["other"] else "—"
        fmt = (lambda x: f"{x:10.3f}" if x is not None else f"{'—':>10}")
        print(f"{key:<16} {fmt(v['this'])} {fmt(v['other'])} {ratio:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
