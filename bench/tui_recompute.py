"""Time from an input change to the app showing the new answer, in ms (headless, in one process).

Measures what a user waits for after a key: a Check control (quant, context), a rig change, a Fit
filter or search keystroke (re-filtering the ranked list), and a Fit sort. The Fit list itself
(every catalog model) is computed in a worker once per rig and options and is timed separately.

    python bench/tui_recompute.py            # 2x RTX 3090, Llama 3.1 70B, 5 runs of each
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time


async def measure(runs: int) -> dict[str, list[float]]:
    from advisor.catalog.load import load_catalog
    from advisor.probe.build import build_rig
    from advisor.probe.types import Detection
    from advisor.tui.app import AdvisorApp
    from advisor.tui.widgets.fit import FitView

    catalog = load_catalog(user=False)
    rig = build_rig(catalog, gpus=["2xrtx-3090"], ram="64")
    other = build_rig(catalog, gpus=["rtx-4090"], ram="64")
    app = AdvisorApp(catalog, model="llama-3.1-70b", rig=rig, probe=lambda: Detection(source="none"))
    out: dict[str, list[float]] = {k: [] for k in ("check control", "rig change", "fit list (worker)",
                                                   "fit filter keystroke", "fit sort")}
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.get_default_screen()

        async def timed(key: str, action) -> None:
            start = time.perf_counter()
            await action()
            await pilot.pause()
            out[key].append((time.perf_counter() - start) * 1000)

        for i in range(runs):
            async def control():
                screen.set_control("ctx", (16384, 8192)[i % 2])
            await timed("check control", control)

            async def change_rig():
                screen.set_rig((other, rig)[i % 2])
            await timed("rig change", change_rig)

        await pilot.press("f")
        await app.workers.wait_for_complete()
        view = screen.query_one(FitView)
        for i in range(runs):
            screen._fit_stale = True
            async def fit_list():
                screen.refresh_fit()
                await app.workers.wait_for_complete()
            await timed("fit list (worker)", fit_list)

            async def keystroke():
                view.query_one("#fit-search").value = ("qwen", "")[i % 2]
            await timed("fit filter keystroke", keystroke)

            async def sort():
                view.action_sort()
            await timed("fit sort", sort)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for key, ms in asyncio.run(measure(args.runs)).items():
        print(f"{key + ':':<24} median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms over {len(ms)} runs")


if __name__ == "__main__":
    main()
