"""`advisor catalog add REFERENCE`: a model read from its own files, written into the user catalog.

The reference is anything `check` reads (a Hugging Face id, `repo:TAG`, a GGUF URL, an Ollama
name, a local file or folder). Its architecture becomes one `[[model]]` table in
`models-added.toml` in the user catalog folder, so the model is named like a built-in afterwards:
by its id, and by the aliases given (the reference itself, plus `--alias`). Never silently:
an id or alias that another entry (built-in or the user's) already has is refused, naming it; an
entry this command wrote before is replaced only with `--replace`; a reference the catalog knows as
another release of a built-in model (`other_releases`) is added as its own model, and the output
says which built-in it differs from and how. The file is written atomically and re-read through
the catalog's own validation before it replaces the old one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from advisor.commands.output import EXIT_YES, emit, emit_json, fmt_of, say
from advisor.errors import AdvisorError

FILE_NAME = "models-added.toml"
MARK = "# written by `advisor catalog add`"
_ID = re.compile(r"^[a-z0-9][a-z0-9.-]{0,99}$")
_COMPARED = ("max_context", "params_total", "layers", "hidden_size", "experts", "kv_heads", "vocab_size")


def cmd_add(args: argparse.Namespace) -> int:
    from advisor.catalog import load
    from advisor.catalog.resolve import exact, normal

    ref = (args.reference or "").strip()
    if not ref:
        raise AdvisorError("catalog add needs a model reference", "e.g. advisor catalog add Qwen/Qwen3-30B-A3B-Instruct-2507")
    catalog = load.load_catalog()
    builtin = load.load_catalog(user=False)
    loaded = _read(ref)
    spec = loaded.spec
    ident = (args.id or _default_id(ref, spec.id)).strip().lower()
    if not _ID.match(ident):
        raise AdvisorError(f"--id {ident[:100]!r} is not an id", "lower case letters, digits, '.' and '-', e.g. kimi-k2-thinking")
    aliases = _unique([ref, *(a.strip() for a in args.alias or () if a.strip())])
    folder = load.user_dir()
    path = folder / FILE_NAME
    mine = _read_mine(path)
    replacing = ident in mine
    if ident in builtin.models:
        raise AdvisorError(f"{ident} is a built-in model ({builtin.models[ident].name})",
                           "pass --id to give the added model its own id")
    if ident in catalog.models and not replacing:
        raise AdvisorError(f"{ident} is already in your catalog (not in {path.name})",
                           f"pass --id to give it another id, or edit the file that defines it in {folder}")
    if replacing and not args.replace:
        raise AdvisorError(f"{ident} is already in {path}", "pass --replace to write it again from this reference")
    for alias in aliases:
        other = exact({k: v for k, v in catalog.models.items() if k != ident}, alias)
        if other is not None:
            raise AdvisorError(f"the alias {alias!r} already names {other} ({catalog.models[other].name})",
                               "leave it out, or use --id to replace that entry's name in your own file")
    entry = _entry(spec, ident, aliases, ref, loaded, args.name)
    notes = _release_notes(ref, spec, builtin, normal)
    mine[ident] = entry
    text = _render(mine)
    _check(text, folder, path)
    from advisor.files import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    load._load_catalog.cache_clear()
    if fmt_of(args) == "json":
        emit_json({"id": ident, "name": entry["name"], "aliases": aliases, "file": str(path), "replaced": replacing,
                   "max_context": entry["max_context"], "params_total": entry["params_total"], "notes": notes})
    else:
        for note in notes:
            say(f"advisor: note: {note}")
        emit(f"{'replaced' if replacing else 'added'} {ident} ({entry['name']}) in {path}\n"
             f"ask for it as {ident} or {', '.join(aliases)}: "
             f"{entry['params_total'] / 1e9:.1f}B parameters, {entry['max_context']:,} tokens of context")
    return EXIT_YES


def _read(ref: str):
    """The model a reference names, read from its files (never a catalog entry)."""
    from advisor.modelfile import looks_like_model_path, read_model, read_reference
    from advisor.commands.args import _progress

    if looks_like_model_path(ref):
        return read_model(ref, progress=_progress)
    loaded = read_reference(ref, progress=_progress)
    if loaded is None:
        raise AdvisorError(f"{ref[:200]!r} is not a model reference",
                           "give ORG/NAME, ORG/NAME-GGUF:TAG, a .gguf URL, ollama:NAME:TAG or a model file")
    return loaded


def _default_id(ref: str, fallback: str) -> str:
    """`moonshotai/Kimi-K2-Thinking` -> `kimi-k2-thinking`; `unsloth/X-GGUF:UD-Q4_K_XL` -> `x`; else the file's id."""
    from advisor.modelfile.fields import slug
    from advisor.modelfile.remote import parse_ref

    try:
        parsed = parse_ref(ref)
    except AdvisorError:
        parsed = None
    if parsed is not None and parsed.kind == "hf" and parsed.repo and not parsed.filename:
        name = re.sub(r"[-_.]gguf$", "", parsed.repo.split("/")[-1], flags=re.IGNORECASE)
        return slug(name)
    if parsed is not None and parsed.kind == "ollama":
        return slug(f"{parsed.name.split('/')[-1]}-{parsed.tag}")
    return fallback


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [i for i in items if not (i.lower() in seen or seen.add(i.lower()))]


def _entry(spec, ident: str, aliases: list[str], ref: str, loaded, name: str | None) -> dict[str, Any]:
    """The ModelSpec's fields as a TOML table: what differs from the defaults, sources and notes kept."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name in ("id", "name", "aliases", "sources", "notes", "other_releases"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)  # type: ignore[misc]
        if value != default:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    label = name or (ref.split("/", 1)[1] if "/" in ref and "://" not in ref else spec.name)
    q = loaded.quant
    published = (f"published as {q.id} ({q.bits_per_weight:.2f} bits per weight, {loaded.layout.total_bytes:,} bytes of weights)"
                 if loaded.exact else "its weights were not read (config.json only)")
    return {"id": ident, "name": label[:200], **out, "aliases": aliases,
            "sources": _unique([*(s for s in spec.sources if s), ref]),
            "notes": f"added by `advisor catalog add {ref}`: {spec.notes}; {published}"[:4000]}


def _release_notes(ref: str, spec, builtin, normal) -> list[str]:
    """How the added model differs from a built-in that the catalog knows it as another release of."""
    key = normal(ref)
    out = []
    for other in builtin.models.values():
        if not any(normal(n) == key for n in other.other_releases):
            continue
        diffs = [f"{f.replace('_', ' ')} {getattr(spec, f):,} vs {getattr(other, f):,}"
                 for f in _COMPARED if getattr(spec, f) != getattr(other, f)]
        out.append(f"{ref} is a different release from the built-in {other.id} ({other.name}): "
                   + ("; ".join(diffs) if diffs else "the same architecture, its own weights"))
    return out


# --- the file ----------------------------------------------------------------------------------

def _read_mine(path: Path) -> dict[str, dict[str, Any]]:
    """The entries this command wrote before (the file is the command's own; refused if it is not)."""
    if not path.exists():
        return {}
    from advisor.catalog.load import read_toml
    from advisor.files import read_limited

    head = read_limited(path, 1 << 20, "the added-models file")[: len(MARK)].decode("utf-8", "replace")
    if head != MARK:
        raise AdvisorError(f"{path} exists and was not written by `advisor catalog add`",
                           "move it away or rename it; this command never rewrites your own files")
    data = read_toml(path)
    models = data.get("model", [])
    return {m["id"]: m for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _render(entries: dict[str, dict[str, Any]]) -> str:
    lines = [f"{MARK}: one [[model]] per added reference. Edit freely; `advisor catalog validate` checks it,",
             "# `advisor catalog add REF --replace` writes an entry again from its reference."]
    for entry in entries.values():
        lines += ["", "[[model]]"]
        lines += [f"{key} = {_toml(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise AdvisorError(f"cannot write {type(value).__name__} to the catalog", "")


def _check(text: str, folder: Path, path: Path) -> None:
    """The new file, validated with the catalog's own rules (beside the user's other files) before it is written."""
    import tempfile

    from advisor.catalog import load

    with tempfile.TemporaryDirectory(prefix="advisor-add-") as tmp:
        trial = Path(tmp)
        for other in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
            if other.name != path.name:
                (trial / other.name).write_bytes(other.read_bytes())
        (trial / path.name).write_text(text, encoding="utf-8")
        problems = load.validate_all(trial)
    problems = [p.replace(str(trial), str(folder)) for p in problems]
    if problems:
        raise AdvisorError(f"the entry would not validate: {problems[0]}", "nothing was written")
