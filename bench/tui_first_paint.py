"""Time from process start to the app's first paint, in ms.

Each run spawns a fresh interpreter that builds the app the way `advisor [MODEL] [rig options]`
does (`advisor.app_entry.make_app`: catalog load, model and rig checks, then the lazy Textual
import), runs it headless, and exits right after the first refresh of the screen. The parent
measures from spawn to the child's marker, so interpreter start and every import are counted.
GPU detection runs in a worker and is not waited for (it never blocks first paint).

    python bench/tui_first_paint.py                      # the detected rig, 5 runs
    python bench/tui_first_paint.py --runs 10 -- llama-3.1-70b --gpu 2xrtx-3090
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

MARKER = "first-paint"

CHILD = f"""
import sys, time
from advisor.cli import app_parser
from advisor.app_entry import make_app

app = make_app(app_parser().parse_args(sys.argv[1:]))

def painted():
    print("{MARKER}", flush=True)
    app.exit()

async def pilot(_pilot):
    app.call_after_refresh(painted)

app.run(headless=True, size=(160, 50), auto_pilot=pilot)
"""


def one_run(app_args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *app_args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TEXTUAL": ""})
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == MARKER:
            elapsed = (time.perf_counter() - start) * 1000
            proc.wait(timeout=30)
            return elapsed
    _, err = proc.communicate(timeout=30)
    raise SystemExit(f"the app exited without painting (rc={proc.returncode}):\n{err}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("app_args", nargs="*", help="arguments for `advisor` (after --)")
    args = parser.parse_args()
    times = [one_run(args.app_args) for _ in range(args.runs)]
    print(f"first paint: median {statistics.median(times):.0f} ms, min {min(times):.0f} ms, "
          f"max {max(times):.0f} ms over {len(times)} runs ({' '.join(args.app_args) or 'detected rig'})")


if __name__ == "__main__":
    main()
