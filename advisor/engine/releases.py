"""A runtime as one of its older releases started (`--runtime-version X.Y.Z`): the start-up defaults that
release had where they differ from today's, from rules/runtimes.toml `[[runtime.releases]]` (each range with
its source). Every range that covers the release applies, in the file's order; a release no range covers is
answered as today's runtime. Pure: no I/O."""

from __future__ import annotations

import re
from dataclasses import fields, replace

from advisor.catalog.types import RuntimeRelease, RuntimeSpec
from advisor.errors import AdvisorError

_RANGE = ("since", "before", "basis")  # a release's own fields; every other one is a default it changes
_VERSION = re.compile(r"v?(\d{1,6}(?!\.\D)(?:\.\d{1,4}){0,3})")  # "0.x" is not release 0; "0.8.5.post1" is 0.8.5


def parse_version(text: str) -> tuple[int, ...]:
    """`0.8.1` (or `v0.8.1`, `0.8.5.post1`'s leading numbers) as (0, 8, 1), llama.cpp's build `4567` as (4567,);
    one line and exit 2 otherwise (`0.x`)."""
    m = _VERSION.match(text.strip())
    if not m:
        raise AdvisorError(f"runtime version {text[:40]!r} is not a release number",
                           "give it as vLLM and llama.cpp print it, e.g. 0.8.1")
    return tuple(int(p) for p in m.group(1).split("."))


def _covers(rel: RuntimeRelease, version: tuple[int, ...]) -> bool:
    low = parse_version(rel.since) if rel.since else ()
    return low <= version and (not rel.before or version < parse_version(rel.before))


def at_release(runtime: RuntimeSpec, version: str | None) -> RuntimeSpec:
    """The runtime with the defaults of `version` (None: today's)."""
    if not version:
        return runtime
    asked = parse_version(version)
    for rel in runtime.releases:
        if not _covers(rel, asked):
            continue
        changed = {f.name: getattr(rel, f.name) for f in fields(rel) if f.name not in _RANGE}
        runtime = replace(runtime, **{name: v for name, v in changed.items() if v is not None})
    return runtime
