"""The one bounded number parser, for every option and every number read from a file.

Python turns any digit string into an int (a 5,000-digit one raises ValueError, a 400-digit one
overflows the float arithmetic downstream), so a number is refused by its length before it is
converted, and by its range after. Every caller names the plausible range of what it reads.
"""

from __future__ import annotations

import math
import re

from advisor.errors import AdvisorError

MAX_DIGITS = 24
"""No quantity the advisor reads has more digits than this (bytes of a 16 TiB card have 14)."""

_INT = re.compile(r"[+]?\d[\d_,]*", re.ASCII)
_FLOAT = re.compile(r"[+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d{1,3})?", re.ASCII)
"""A decimal with at least one digit before the exponent (`.e5`, `e5` and `.` are not numbers)."""
_SUFFIX = {"k": 1024, "m": 1024 * 1024}


def parse_int(text: str, what: str, lo: int, hi: int, suffixes: bool = False) -> int:
    """`text` as a whole number from `lo` to `hi` (`8192`, `8_192`, `8,192`; with `suffixes`, `8k`)."""
    t = str(text).strip().lower()
    mult = 1
    if suffixes and t[-1:] in _SUFFIX:
        t, mult = t[:-1], _SUFFIX[t[-1]]
    if len(t) > MAX_DIGITS:
        raise AdvisorError(f"{what} {_show(text)} is out of range", f"use {lo:,} to {hi:,}")
    if _INT.fullmatch(t):
        value = int(t.replace("_", "").replace(",", "")) * mult
    elif mult > 1 and _FLOAT.fullmatch(t):
        number = float(t.replace("_", "")) * mult  # `1e308k` is inf: refused below, never int(inf)
        if not math.isfinite(number) or not lo <= number <= hi:
            raise AdvisorError(f"{what} {_show(text)} is out of range", f"use {lo:,} to {hi:,}")
        value = int(number)
    else:
        raise AdvisorError(f"{what} {_show(text)} is not a whole number", "e.g. 8192" + (" or 8k" if suffixes else ""))
    if not lo <= value <= hi:
        raise AdvisorError(f"{what} {_show(text)} is out of range", f"use {lo:,} to {hi:,}")
    return value


def parse_float(text: str, what: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """`text` as a finite number from `lo` (excluded with `lo_open`) to `hi`."""
    t = str(text).strip()
    if len(t) > MAX_DIGITS + 8 or not _FLOAT.fullmatch(t):
        raise AdvisorError(f"{what} {_show(text)} is not a number", "e.g. 10 or 2.5")
    return check_number(float(t.replace("_", "")), what, lo, hi, lo_open)


def check_number(value: float, what: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """A number already parsed (from TOML, XML or JSON), held to the same rule."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AdvisorError(f"{what} must be a number, not {_show(value)}")
    if isinstance(value, int) and abs(value) > 10**MAX_DIGITS:
        raise AdvisorError(f"{what} {_show(value)} is out of range", f"use {lo:g} to {hi:g}")
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        raise AdvisorError(f"{what} {_show(value)} is out of range",
                           f"use {'more than' if lo_open else 'from'} {lo:g} {'and at most' if lo_open else 'to'} {hi:g}")
    return value


def _show(value: object) -> str:
    text = str(value)
    return repr(text if len(text) <= 40 else text[:20] + "…" + text[-8:])
