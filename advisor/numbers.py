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
        raise AdvisorError(f"{what} {_show(text)} is out of range", range_text(lo, hi, whole=True))
    if _INT.fullmatch(t):
        value = int(t.replace("_", "").replace(",", "")) * mult
    elif mult > 1 and _FLOAT.fullmatch(t) and _float_or_none(t) is not None:
        scaled = _float_or_none(t) * mult
        if not math.isfinite(scaled) or not lo <= scaled <= hi:  # 1e308k: no whole number to make of it
            raise AdvisorError(f"{what} {_show(text)} is out of range", range_text(lo, hi, whole=True))
        value = int(scaled)
    else:
        raise AdvisorError(f"{what} {_show(text)} is not a whole number", "e.g. 8192" + (" or 8k" if suffixes else ""))
    if not lo <= value <= hi:
        raise AdvisorError(f"{what} {_show(text)} is out of range", range_text(lo, hi, whole=True))
    return value


def _float_or_none(t: str) -> float | None:
    """`t` as a float, or None where Python cannot read it (`.e5` matches the pattern but is no number)."""
    try:
        return float(t.replace("_", ""))
    except ValueError:
        return None


def parse_float(text: str, what: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """`text` as a finite number from `lo` (excluded with `lo_open`) to `hi`."""
    t = str(text).strip()
    value = _float_or_none(t) if len(t) <= MAX_DIGITS + 8 and _FLOAT.fullmatch(t) else None
    if value is None or not any(c.isdigit() for c in t):
        raise AdvisorError(f"{what} {_show(text)} is not a number", "e.g. 10 or 2.5")
    return check_number(value, what, lo, hi, lo_open)


def check_number(value: float, what: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """A number already parsed (from TOML, XML or JSON), held to the same rule."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AdvisorError(f"{what} must be a number, not {_show(value)}")
    if isinstance(value, int) and abs(value) > 10**MAX_DIGITS:
        raise AdvisorError(f"{what} {_show(value)} is out of range", range_text(lo, hi, lo_open))
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        raise AdvisorError(f"{what} {_show(value)} is out of range", range_text(lo, hi, lo_open))
    return value


def range_text(lo: float, hi: float, lo_open: bool = False, whole: bool = False) -> str:
    """The hint of an out-of-range number: `use 1 to 16,777,216`, `use from 0.05 to 1`, `use more than 0 and at
    most 1e+07` (one wording for the parser, the engine and every file reader)."""
    if whole:
        return f"use {int(lo):,} to {int(hi):,}"
    return f"use {'more than' if lo_open else 'from'} {lo:g} {'and at most' if lo_open else 'to'} {hi:g}"


def _show(value: object) -> str:
    text = str(value)
    return repr(text if len(text) <= 40 else text[:20] + "…" + text[-8:])
