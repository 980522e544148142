"""Names people type (`RTX 3090`, `3090`, `Llama 3.1 70B`, `4x A100 SXM4 80GB`) to catalog ids.

Exact id, then alias, then name, each compared in a normal form (lower case, runs of spaces,
underscores and dots-between-words collapsed to hyphens, vendor words dropped). Unknown or
ambiguous names are an AdvisorError listing the closest ids.
"""

from __future__ import annotations

import re
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Mapping

from advisor.errors import AdvisorError

_NOISE = ("nvidia", "geforce", "amd", "radeon", "intel", "apple", "meta", "tesla")


def normal(text: str) -> str:
    text = text.strip().lower()
    text = re.sub(r"[\s_/:]+", "-", text)
    parts = [p for p in text.split("-") if p and p not in _NOISE]
    return "-".join(parts)


def _index(entries: Mapping[str, object]) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for ident, entry in entries.items():
        names = {ident, getattr(entry, "name", ident), *getattr(entry, "aliases", ())}
        for name in names:
            index.setdefault(normal(name), set()).add(ident)
            index.setdefault(normal(name).replace("-", ""), set()).add(ident)
    return index


def exact(entries: Mapping[str, object], text: str) -> str | None:
    """The id whose id, name or one of its aliases is `text` (in the normal form), or None: no
    fuzzy step, so a Hugging Face id or an Ollama name reaches the catalog only when listed."""
    if text in entries:
        return text
    key = normal(text)
    hits = {i for i, e in entries.items()
            if key in (normal(i), normal(getattr(e, "name", i)), *(normal(a) for a in getattr(e, "aliases", ())))}
    return next(iter(hits)) if len(hits) == 1 else None


_LISTED = ("gpu", "model")
"""Kinds with a command of their own that lists them (`advisor gpus`, `advisor models`)."""


def _listing(what: str, entries: Mapping[str, object]) -> str:
    """Where to find the valid ids: the listing command, or the ids themselves when there is none."""
    if what in _LISTED:
        return f"see `advisor {what}s` for the ids"
    ids = sorted(entries)
    return f"known {what} ids: {', '.join(ids[:40])}" + (", …" if len(ids) > 40 else "")


def resolve(entries: Mapping[str, object], text: str, what: str) -> str:
    """The id that `text` names among `entries`; AdvisorError with candidates otherwise."""
    if text in entries:
        return text
    key = normal(text)
    if not key:
        raise AdvisorError(f"empty {what} name", _listing(what, entries))
    index = _index(entries)
    for probe in (key, key.replace("-", "")):
        hits = index.get(probe)
        if hits and len(hits) == 1:
            return next(iter(hits))
        if hits:
            raise AdvisorError(f"{what} {text!r} is ambiguous: it could be {', '.join(sorted(hits))}",
                               "use one of those ids")
    # Unambiguous prefix or containment ("a100-80" -> a100-sxm4-80gb would be ambiguous; "5090" exact alias)
    contained = sorted(i for i in entries if key in normal(i))
    if len(contained) == 1:
        return contained[0]
    import difflib

    close = contained or difflib.get_close_matches(key, list(entries), n=5, cutoff=0.5)
    hint = f"closest: {', '.join(close[:6])}" if close else _listing(what, entries)
    if len(contained) > 1:
        raise AdvisorError(f"{what} {text!r} is ambiguous: it could be {', '.join(contained[:8])}",
                           "use one of those ids")
    raise AdvisorError(f"unknown {what} {text!r}", hint)


_COUNT = re.compile(r"^\s*(\d+)\s*[x×*]\s*(.+)$", re.IGNORECASE)


def parse_gpu_spec(entries: Mapping[str, object], spec: str, what: str = "gpu") -> tuple[int, str]:
    """`[Nx]GPU` (or `[Nx]CPU` with `what="cpu"`) to (count, id). Counts from 1 to 64."""
    match = _COUNT.match(spec)
    if match:
        from advisor.numbers import parse_int

        count, name = parse_int(match.group(1), f"--{what} count", 1, 64), match.group(2)
    else:
        count, name = 1, spec
    return count, resolve(entries, name, what)
