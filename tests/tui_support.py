"""Shared by the app's tests: no NVML anywhere, and async tests run with plain asyncio."""

from __future__ import annotations

import asyncio
import functools

from advisor.probe.types import Detection

NO_GPU = Detection(source="none", warnings=("no NVIDIA driver",))


def run(test):
    """Run an async test with asyncio (the project has no async pytest plugin)."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        asyncio.run(test(*args, **kwargs))

    return wrapper


def screen_text(app) -> str:
    """What the terminal shows now, as plain text (one line per row)."""
    return "\n".join("".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips())
