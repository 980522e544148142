"""Read the catalog (hardware_db/) and the rulebook (rules/), merge the user's files over them.

Built-in files are trusted: the test-suite validates every entry with pydantic, so at run time
they are turned into dataclasses directly (fast start). User files are validated with pydantic
before use, every time, because nobody else has checked them.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import fields, is_dataclass
from functools import lru_cache
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any

from advisor.catalog.types import (
    Catalog,
    CpuCluster,
    CpuMemory,
    CpuSpec,
    GpuSpec,
    ModelSpec,
    MultiNode,
    NvlinkSpec,
    PresetRig,
    Price,
    QuantSpec,
    RecurrentSpec,
    RuntimeRelease,
    RuntimeSpec,
    VisionDims,
)
from advisor.catalog.rulebook import Rulebook, build_rulebook
from advisor.errors import AdvisorError

USER_DIR_ENV = "ADVISOR_CONFIG_DIR"
MAX_TOML_BYTES = 512 * 1024
"""A catalog or rig file larger than this is refused before it is read (the largest built-in file,
models.toml, is under 100 KB; parsing 512 KiB of tiny tables takes about half a second)."""
MAX_USER_ENTRIES = 2000
"""Entries in one user catalog file (the whole built-in catalog has a few hundred): more is refused
unvalidated, so a generated file cannot keep every command busy."""

# Which array-of-tables key holds which entry type.
KINDS: dict[str, type] = {
    "gpu": GpuSpec,
    "model": ModelSpec,
    "quant": QuantSpec,
    "runtime": RuntimeSpec,
    "preset": PresetRig,
    "cpu": CpuSpec,
}
_NESTED: dict[str, type] = {"nvlink": NvlinkSpec, "price": Price, "used_price": Price, "recurrent": RecurrentSpec,
                            "vision": VisionDims, "multinode": MultiNode, "memory": CpuMemory}
_NESTED_LISTS: dict[str, type] = {"clusters": CpuCluster, "releases": RuntimeRelease}
"""Arrays of tables that become tuples of their dataclass."""
_PLURAL = {"gpu": "gpus", "model": "models", "quant": "quants", "runtime": "runtimes", "preset": "presets",
           "cpu": "cpus"}


def _package_data(name: str) -> Path:
    """Where `hardware_db` or `rules` is: inside the wheel, or beside the package in a checkout."""
    here = Path(__file__).resolve().parent.parent
    shipped = here / "_data" / name
    return shipped if shipped.is_dir() else here.parent / name


def builtin_dirs() -> tuple[Path, Path]:
    return _package_data("hardware_db"), _package_data("rules")


def user_dir() -> Path:
    """The user's catalog folder: $ADVISOR_CONFIG_DIR, else the platform's config dir."""
    env = os.environ.get(USER_DIR_ENV)
    if env:
        return Path(env).expanduser()
    if sys.platform.startswith("linux"):  # platformdirs' answer, without its import cost
        return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "advisor"
    import platformdirs

    return Path(platformdirs.user_config_dir("advisor", appauthor=False))


def cache_dir() -> Path | None:
    """Where the parsed built-in catalog is cached ($ADVISOR_CACHE_DIR, else the platform's cache dir)."""
    env = os.environ.get("ADVISOR_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    try:
        if sys.platform.startswith("linux"):
            return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "advisor"
        import platformdirs

        return Path(platformdirs.user_cache_dir("advisor", appauthor=False))
    except Exception:  # noqa: BLE001 - no home directory: no cache
        return None


def read_toml(path: Path) -> dict[str, Any]:
    """Parse one TOML file, bounded in size; any problem is an AdvisorError naming the file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    from advisor.errors import one_line
    from advisor.files import read_limited

    raw = read_limited(path, MAX_TOML_BYTES, "a catalog or rig file")
    where = one_line(str(path), 300)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AdvisorError(f"{where}: not a text file (TOML must be UTF-8)",
                           _what_is_it(raw) or "is this the right file?") from None
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        other = _what_is_it(raw)
        if other:
            raise AdvisorError(f"{where}: not a TOML file: {other}") from None
        raise AdvisorError(f"{where}: malformed TOML: {exc}", "fix the file or remove it") from None
    except RecursionError:
        raise AdvisorError(f"{where}: nested too deeply to be a catalog or rig file",
                           "fix the file or remove it") from None


def _what_is_it(raw: bytes) -> str:
    """A hint for a file that is not TOML but something the user may have meant to pass."""
    head = raw[:4096].lstrip(b"\xef\xbb\xbf\xff\xfe \t\r\n\x00")
    if head.startswith(b"<"):
        return "this looks like XML: `advisor detect --from FILE` reads an `nvidia-smi -q -x` dump"
    if b"NVSMI LOG" in raw[:4096]:
        return ("this is `nvidia-smi -q` text: capture `nvidia-smi -q -x` (XML) instead and pass it to "
                "`advisor detect --from`")
    if b"GPU0" in head and (b" X " in head or b"\tX\t" in head or b"Legend" in raw):
        return ("this is `nvidia-smi topo -m` output, not a rig file: put its matrix in a rig file as "
                "`topology = [...]`")
    return ""


def _build(cls: type, data: dict[str, Any]) -> Any:
    """Trusted construction: nested tables become their dataclass, lists become tuples."""
    kwargs = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name in _NESTED and isinstance(value, dict):
            value = _build(_NESTED[f.name], value)
        elif f.name in _NESTED_LISTS and isinstance(value, list):
            value = tuple(_build(_NESTED_LISTS[f.name], v) if isinstance(v, dict) else v for v in value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def as_dict(obj: Any) -> dict[str, Any]:
    """A dataclass entry as the plain dict its TOML table would hold (for merging and JSON)."""
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            value = as_dict(value)
        elif isinstance(value, tuple):
            value = [as_dict(v) if is_dataclass(v) else v for v in value]
        out[f.name] = value
    return out


# Plausible ranges for the numbers an entry may carry: a user file with `layers = 1e12` or a
# negative bandwidth is refused at load time instead of stalling or dividing by zero later. A key is a
# field name, or `Type.field` where one field name means different things in different records (the
# qualified key wins); each key is written once (tests/test_catalog_bounds.py reads this table's source).
BOUNDS: dict[str, tuple[float, float]] = {
    "vram_gib": (0.001, 65536), "memory_bandwidth_gb_s": (0.001, 1e6), "fp16_tflops": (0.001, 1e6),
    "power_w": (0, 1e5), "pcie_gen": (1, 7), "pcie_lanes": (1, 32), "usd": (0, 1e8), "gb_s": (0, 1e5),
    "max_gpus": (1, 1024), "generation": (1, 9),
    "params_total": (1e6, 1e14), "params_active": (1e6, 1e14), "layers": (1, 2048), "hidden_size": (1, 1e6),
    "intermediate_size": (0, 1e7), "attention_heads": (1, 1e5), "kv_heads": (1, 1e5), "head_dim": (1, 1e5),
    "vocab_size": (1, 1e8), "max_context": (1, 1e8), "experts": (0, 1e5), "experts_active": (0, 1e5),
    "shared_experts": (0, 1e5), "moe_intermediate_size": (0, 1e7), "dense_layers": (0, 2048),
    "sliding_window": (0, 1e8), "sliding_window_layers": (0, 2048), "kv_lora_rank": (0, 1e5),
    "qk_rope_head_dim": (0, 1e5), "conv_kernel": (0, 64), "inner_size": (1, 1e6), "state_size": (1, 1e5),
    "group_count": (0, 1e5), "global_kv_heads": (0, 1e5), "global_head_dim": (0, 1e5),
    "per_layer_embed_params": (0, 1e12), "indexer_head_dim": (0, 1e5), "mtp_layers": (0, 64), "indexer_ratio": (1, 1e6),
    "vision_params": (0, 1e12), "ff_size": (1, 1e7), "heads": (1, 1e5), "patch_size": (1, 1e4), "merge": (1, 64), "image_size": (0, 1e6), "out_hidden": (0, 1e6),
    "expert_matrices": (1, 4), "bits_per_weight": (0.5, 64), "linear_bits": (0.5, 64), "embed_bits": (0.5, 64), "head_bits": (0.5, 64), "mlp_bits": (0.5, 64),
    "kld": (0, 100), "context_mib": (0, 1e6), "ubatch": (1, 1e6), "compute_fixed_mib": (0, 1e6), "reserve_mib_other_gpus": (0, 1e6), "fit_margin_mib": (0, 1e6), "attention_pool_lookahead": (0, 16),
    "RuntimeSpec.max_gpus": (0, 1024),  # 0: any number (a platform's or an NVLink domain's needs at least 1)
    "gpu_memory_utilization": (0, 1), "ram_gib": (0.001, 65536), "kv_pad_cells": (0, 1e6),
    # the rulebook
    "efficiency": (0, 1), "cpu_efficiency": (0, 1), "attention_efficiency": (0, 1), "mfu": (0, 1),
    "host_staged_factor": (0, 1), "chipset_bandwidth_factor": (0, 1), "small_fraction": (0, 1),
    "large_fraction": (0, 1), "nvidia_reserved_mib": (0, 1e5), "os_reserve_gib": (0, 1e4),
    "headless_max_ram_gib": (0, 1e4), "used_gib": (0, 65536), "headless_reserve_gib": (0, 1e4),
    "default_ram_bandwidth_gb_s": (0.001, 1e5), "default_ram_gib": (0.001, 1e6), "pipeline_microbatches": (1, 1e4),
    "helps_above": (1, 100), "needed_above": (1, 100), "reading_tokens_per_s": (0, 1e4),
    "comfort_factor": (1, 100), "density_doubling_months": (0.1, 1200),
    "count": (1, 64), "memory_gib": (0, 65536), "node": (0, 1024), "ram_bandwidth_gb_s": (0.1, 1e5),
    # CPUs (hardware_db/cpus.toml)
    "cores": (1, 1024), "ghz": (0.1, 10), "simd_bits": (64, 2048), "pipes": (1, 8), "mt_s": (100, 20000),
    "channels": (1, 64), "channel_bits": (8, 128), "ccds": (0, 64), "ccd_read_gb_s": (0, 1e4),
    "compute_efficiency": (0, 1), "prefill_efficiency": (0, 1),
}


_MONTH = re.compile(r"(19|20)\d\d-(0[1-9]|1[0-2])")


def out_of_bounds(obj: Any, prefix: str = "") -> list[str]:
    """Fields of an entry (and its nested tables) outside BOUNDS, as `name = value` phrases."""
    problems = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            problems += out_of_bounds(value, f"{prefix}{f.name}.")
        elif (bounds := BOUNDS.get(f"{type(obj).__name__}.{f.name}", BOUNDS.get(f.name))) is not None \
                and isinstance(value, (int, float)) and not isinstance(value, bool):
            lo, hi = bounds
            if not lo <= value <= hi:
                problems.append(f"{prefix}{f.name} = {value!r} is out of range ({lo:g} to {hi:g})")
    if not prefix and getattr(obj, "kv_heads", 0) > getattr(obj, "attention_heads", 1 << 62):
        problems.append("kv_heads is larger than attention_heads")
    if not prefix and getattr(obj, "params_active", 0) > getattr(obj, "params_total", 1 << 62):
        problems.append("params_active is larger than params_total")
    if not prefix and getattr(obj, "experts_active", 0) > getattr(obj, "experts", 1 << 62):
        problems.append("experts_active is larger than experts")
    if not prefix and getattr(obj, "released", "") and not _MONTH.fullmatch(obj.released):
        problems.append(f"released = {obj.released!r} is not a month (YYYY-MM)")
    if not prefix and hasattr(obj, "pattern_problems"):
        problems += obj.pattern_problems()
    return problems


def validate_entry(cls: type, data: dict[str, Any]) -> Any:
    """Strict validation with pydantic (unknown keys rejected) and BOUNDS; raises ValueError."""
    entry = _adapter(cls).validate_python(data)
    problems = out_of_bounds(entry)
    if problems:
        raise ValueError("; ".join(problems))
    return entry


@lru_cache(maxsize=None)
def _adapter(cls: type):
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def _toml_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


def _format_validation(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        parts = []
        for err in errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
        return "; ".join(parts)
    return str(exc)


def load_catalog(user: Path | None | bool = None) -> Catalog:
    """The merged catalog. `user=False` skips user files; a Path uses that folder instead."""
    return _load_catalog(None if user is None else (False if user is False else Path(user)))


CACHE_FORMAT = 2
"""Bumped whenever what the cache holds changes shape; part of the cache's name with the version."""
MAX_CACHE_BYTES = 32 * 1024 * 1024


def _builtin_data() -> list[tuple[str, bool, dict[str, Any]]]:
    """(file stem, is a rules file, parsed TOML) for every built-in file.

    Parsing the TOML is most of a cold start, so the parsed data is cached as JSON (data only,
    never code) under the user's cache dir. The cache's name carries the code version, the
    format and each file's name, size and mtime; its first line carries a SHA-256 of the rest, and
    the data must have the shape parsed TOML has. A cache that is stale, edited, truncated, of the
    wrong shape or not a regular file is ignored and rebuilt.
    """
    import json
    import zlib

    from advisor import __version__

    shipped = Path(__file__).resolve().parent.parent / "_data" / "catalog.json"
    if shipped.is_file():  # a wheel install: parsed at build time from these same files (hatch_build.py)
        return [(stem, rules, data) for stem, rules, data in json.loads(shipped.read_text(encoding="utf-8"))]
    db_dir, rules_dir = builtin_dirs()
    paths = _toml_files(db_dir) + _toml_files(rules_dir)
    stamp = repr([__version__, CACHE_FORMAT]
                 + [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths]).encode()
    key = f"{zlib.crc32(stamp):08x}{zlib.adler32(stamp):08x}"
    folder = cache_dir()
    cached = folder / f"catalog-v{CACHE_FORMAT}-{key}.json" if folder else None
    stems = [(p.stem, p.parent == rules_dir) for p in paths]
    if cached is not None:
        data = _read_cache(cached, key, stems)
        if data is not None:
            return data
    out = [(p.stem, p.parent == rules_dir, read_toml(p)) for p in paths]
    if cached is not None:
        try:
            from advisor.files import write_atomic

            cached.parent.mkdir(parents=True, exist_ok=True)
            body = json.dumps(out)
            write_atomic(cached, json.dumps({"key": key, "sha256": _sha256(body)}) + "\n" + body)
        except (OSError, AdvisorError):
            pass
    return out


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_cache(path: Path, key: str, stems: list[tuple[str, bool]]) -> list[tuple[str, bool, dict[str, Any]]] | None:
    """The cached parse, or None when it is missing or cannot be trusted (then it is rebuilt)."""
    import json

    from advisor.files import read_limited

    try:
        head, _, body = read_limited(path, MAX_CACHE_BYTES, "the catalog cache").decode("utf-8").partition("\n")
        meta = json.loads(head)
        if not (isinstance(meta, dict) and meta.get("key") == key and meta.get("sha256") == _sha256(body)):
            return None
        data = json.loads(body)
    except (AdvisorError, ValueError, RecursionError):
        return None
    if not (isinstance(data, list) and [tuple(e[:2]) for e in data if isinstance(e, list)] == stems
            and all(len(e) == 3 and isinstance(e[2], dict) for e in data)):
        return None
    return [(stem, rules, entry) for stem, rules, entry in data]


@lru_cache(maxsize=4)
def _load_catalog(user: Path | None | bool) -> Catalog:
    tables: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    rules: dict[str, Any] = {}
    raw: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    for stem, is_rules, data in _builtin_data():
        data = dict(data)
        for kind, cls in KINDS.items():
            if isinstance(data.get(kind), list):  # [[kind]] arrays are entries; a plain [kind] table is rules
                for entry in data.pop(kind):
                    entry = raw[kind][entry["id"]] = _inherit(entry, raw[kind])
                    tables[kind][entry["id"]] = _build(cls, entry)
        if is_rules and data:
            rules[stem] = data
    if user is not False:
        folder = user_dir() if user is None else user
        paths = _toml_files(folder)
        owner: dict[tuple[str, str], Path] = {}
        for path in paths:
            problems = merge_user_file(path, tables, owner)
            if problems:
                raise AdvisorError(f"{problems[0]}",
                                   f"run `advisor catalog validate` to see every problem; files are in {folder}")
        problems = _cross_check(tables) if paths else []
        if problems:
            raise AdvisorError(f"{folder}: {problems[0]}",
                               f"run `advisor catalog validate` to see every problem; files are in {folder}")
    return Catalog(
        gpus=tables["gpu"], models=tables["model"], quants=tables["quant"],
        runtimes=tables["runtime"], presets=tables["preset"], rules=build_rulebook(rules), cpus=tables["cpu"],
    )


def _inherit(entry: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """An entry that names a runtime it behaves like (`like`) takes every field it leaves out from it."""
    like = entry.get("like")
    if not isinstance(like, str) or not like:
        return entry
    base = known.get(like)
    if base is None:
        raise ValueError(f"like = {like!r} names no entry defined before it (known: {', '.join(known)})")
    base = base if isinstance(base, dict) else as_dict(base)
    return {**{k: v for k, v in base.items() if k not in ("aliases", "notes")}, **entry}


def merge_user_file(path: Path, tables: dict[str, dict[str, Any]],
                    owner: dict[tuple[str, str], Path] | None = None) -> list[str]:
    """Merge one user file over `tables` by id (fields override); return the problems found.
    `owner` remembers which user file defined each id, so two user files cannot both define one."""
    try:
        data = read_toml(path)
    except AdvisorError as exc:
        return [exc.message]
    problems: list[str] = []
    count = sum(len(v) for k, v in data.items() if k in KINDS and isinstance(v, list))
    if count > MAX_USER_ENTRIES:
        return [f"{path}: {count} entries is more than the {MAX_USER_ENTRIES} a catalog file may hold"]
    for kind in data:
        if kind not in KINDS:
            problems.append(f"{path}: unknown table [[{kind}]] (expected one of: {', '.join(KINDS)})")
    for kind, cls in KINDS.items():
        entries = data.get(kind, [])
        if not isinstance(entries, list):
            problems.append(f"{path}: `{kind}` must be an array of tables ([[{kind}]])")
            continue
        for n, entry in enumerate(entries, 1):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                problems.append(f"{path}: [[{kind}]] #{n}: every entry needs a string `id`")
                continue
            if owner is not None:
                first = owner.setdefault((kind, entry["id"]), path)
                if first != path:
                    problems.append(f"{path}: [[{kind}]] id={entry['id']!r}: also defined in {first}; keep one")
                    continue
            base = tables[kind].get(entry["id"])
            merged = {**as_dict(base), **entry} if base is not None else dict(entry)
            for key in _NESTED:
                if base is not None and isinstance(entry.get(key), dict) and getattr(base, key) is not None:
                    merged[key] = {**as_dict(getattr(base, key)), **entry[key]}
            try:
                if base is None:
                    merged = _inherit(merged, tables[kind])
                tables[kind][entry["id"]] = validate_entry(cls, merged)
            except Exception as exc:  # pydantic.ValidationError, kept lazy
                problems.append(f"{path}: [[{kind}]] id={entry['id']!r}: {_format_validation(exc)}")
    return problems


def validate_all(user: Path | None = None) -> list[str]:
    """Every problem in the built-in and user files, each with its file and entry (for `catalog validate`)."""
    problems: list[str] = []
    db_dir, rules_dir = builtin_dirs()
    tables: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    rules: dict[str, Any] = {}
    for path in _toml_files(db_dir) + _toml_files(rules_dir):
        try:
            data = read_toml(path)
        except AdvisorError as exc:
            problems.append(exc.message)
            continue
        tables_here = {k: v for k, v in data.items() if k not in KINDS}
        if path.parent == rules_dir and tables_here:
            rules[path.stem] = tables_here
        for kind, cls in KINDS.items():
            for n, entry in enumerate(data.get(kind, []), 1):
                ident = entry.get("id", f"#{n}") if isinstance(entry, dict) else f"#{n}"
                if ident in tables[kind]:
                    problems.append(f"{path}: [[{kind}]] id={ident!r}: duplicate id")
                try:
                    tables[kind][ident] = validate_entry(cls, _inherit(entry, tables[kind]) if isinstance(entry, dict)
                                                         else entry)
                except Exception as exc:
                    problems.append(f"{path}: [[{kind}]] id={ident!r}: {_format_validation(exc)}")
    try:
        validate_entry(Rulebook, rules)
    except Exception as exc:
        problems.append(f"{rules_dir}: the rulebook: {_format_validation(exc)}")
    folder = user_dir() if user is None else user
    owner: dict[tuple[str, str], Path] = {}
    for path in _toml_files(folder):
        problems.extend(merge_user_file(path, tables, owner))
    problems.extend(_cross_check(tables))
    return problems


def _cross_check(tables: dict[str, dict[str, Any]]) -> list[str]:
    """Checks across entries: aliases unique, presets name known GPUs, runtimes' formats exist."""
    problems = []
    for kind in ("gpu", "model"):
        seen: dict[str, str] = {}
        for ident, entry in tables[kind].items():
            for name in (ident, *getattr(entry, "aliases", ())):
                key = name.strip().lower()
                if key in seen and seen[key] != ident:
                    problems.append(f"[[{kind}]] alias {name!r} names both {seen[key]!r} and {ident!r}")
                seen[key] = ident
    for ident, model in tables["model"].items():
        if model.native_quant and model.native_quant not in tables["quant"]:
            problems.append(f"[[model]] id={ident!r}: native_quant {model.native_quant!r} is not a quant id "
                            f"(known: {', '.join(sorted(tables['quant']))})")
    if tables["runtime"] and not any(rt.trains for rt in tables["runtime"].values()):
        problems.append("[[runtime]]: no runtime has trains = true (fine-tuning estimates need one)")
    for ident, rt in tables["runtime"].items():
        for name, value, allowed in (("compute_buffers", rt.compute_buffers, ("ggml_graph", "activation_peak")),
                                     ("moe_activations", rt.moe_activations, ("expert_mlp", "fused_workspace")),
                                     ("tensor_split", rt.tensor_split, ("heads", "rows", "channels", "meta")),
                                     ("default_split", rt.default_split, ("layer", "tensor")),
                                     ("family", rt.family, ("ggml", "paged", "exllama", "torch")),
                                     ("multinode.split", rt.multinode.split,
                                      ("none", "layer", "tp_in_node", "tensor", "pipeline")),
                                     ("multinode.order", rt.multinode.order, ("any", "workers_first", "head_first"))):
            if value not in allowed:
                problems.append(f"[[runtime]] id={ident!r}: {name} = {value!r} (use one of: {', '.join(allowed)})")
    for ident, preset in tables["preset"].items():
        for spec in preset.gpus:
            gid = spec.split("x", 1)[1] if spec[:1].isdigit() and "x" in spec else spec
            if gid not in tables["gpu"]:
                problems.append(f"[[preset]] id={ident!r}: unknown GPU {gid!r}")
    return problems


def schemas() -> dict[str, Any]:
    """JSON Schemas of every entry type (for `advisor catalog schema`)."""
    return {kind: _adapter(cls).json_schema() for kind, cls in KINDS.items()}

