"""Bounds on everything read from a model file, and the one way this package reports a bad file.

Every count, length and size taken from a file is checked against these limits and against the
bytes actually left in the file *before* anything is allocated or looped over, so a truncated,
corrupted or crafted file fails fast with one line instead of a hang or a huge allocation. The
limits are far above any real model (DeepSeek V3 has ~1,000 GGUF tensors and a 130 KB safetensors
index; the largest vocabularies are ~260k tokens).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NoReturn

from advisor.errors import AdvisorError

MIB = 1024**2

MAX_TENSORS = 1_000_000
"""Tensors in one model (all files together)."""
MAX_GGUF_TENSORS = 65_536
"""Tensors in one GGUF file (llama.cpp stores each layer's experts as one 3-D tensor: ~1,100 for
DeepSeek V3); a header claiming more is refused before any tensor info is read."""
MAX_ST_TENSORS = 131_072
"""Tensors in one safetensors file (checkpoints are sharded at a few GB: a few thousand per shard);
counted in the raw header before the JSON is parsed, so a crafted one costs no memory."""
MAX_KV = 100_000
"""GGUF metadata key/value pairs in one file."""
MAX_KEY_LEN = 65_536
"""Bytes of one GGUF key or tensor name."""
MAX_KEPT_STRING = 1 * MIB
"""GGUF string values longer than this are skipped, not decoded (chat templates are ~10 KB)."""
MAX_ARRAY_ITEMS = 1 << 24
"""Items of one GGUF array."""
MAX_STRING_ITEMS = 4_000_000
"""Strings inside GGUF arrays, all arrays of a file together (tokens + merges are under 1M)."""
MAX_KEPT_ARRAY = 4096
"""Numeric GGUF arrays up to this length are kept (per-layer values); longer ones are skipped."""
MAX_GGUF_DIMS = 4
MAX_ST_DIMS = 8
MAX_SPLITS = 1024
"""Parts of a split GGUF or shards of a safetensors checkpoint."""
MAX_ST_HEADER = 32 * MIB
"""Safetensors JSON header."""
MAX_SMALL_JSON = 16 * MIB
"""config.json, an Ollama manifest, an HF ref."""
MAX_INDEX_JSON = 40 * MIB
"""model.safetensors.index.json: MAX_INDEX_TENSORS entries of ~100 bytes (a 56-character tensor
name, a 33-character shard name, quotes and indentation) take ~40 MB; parsed, such an index takes
~250 MiB at the peak (measured: bench/hostile.py's bound is 300 MiB for the whole process)."""
MAX_INDEX_TENSORS = 400_000
"""Entries of a safetensors index. The most tensors a public checkpoint has: Kimi K2 (61 layers, 1
dense, 384 routed experts: hardware_db/models.toml) has 60 x 384 x 3 = 69,120 expert matrices; a
GPTQ copy stores 4 tensors each (qweight, qzeros, scales, g_idx): 276,480, plus attention and norms."""
MAX_LISTING_JSON = 16 * MIB
"""A Hub listing with file sizes (`?blobs=true`): ~250 bytes a file (path, blob id, LFS sha256 and size)."""
MAX_LISTING_FILES = 50_000
"""Files in one listed repo. The Hub's own guidance is under 100k files per repo and 10k per folder
(huggingface.co/docs/hub/storage-limits); the largest model repos (every quantization of a
model, split in parts) hold a few hundred."""
MAX_SEARCH_JSON = 1 * MIB
"""One page of a Hub model search (ids for a closest-names hint)."""
MAX_FILE_BYTES = 1 << 50
"""A size a listing may give a file (1 PiB; the largest model files are ~50 GB parts)."""
MAX_JSON_ITEMS = 500_000
"""Values in one JSON document (commas and brackets counted in the raw bytes before it is parsed):
a MAX_INDEX_TENSORS index fits, and a document of tiny values (`[{},{},...]`, 60+ bytes each
once parsed) cannot cost more than ~40 MB."""
JSON_WIDE = 4
"""Bytes per character of the text a JSON document is decoded to, at worst (one character past
U+FFFF makes Python store every character in 4 bytes): a document that is not ASCII has its byte
limit divided by this."""


def bad_file(where: str | Path, reason: str, hint: str = "") -> NoReturn:
    """Raise the package's one error: `<file>: <reason>`, on one line."""
    text = f"{display(where)}: {reason}"
    raise AdvisorError(_one_line(text), _one_line(hint or "the file may be incomplete or corrupted: download it again"))


def display(where: str | Path) -> str:
    text = os.fspath(where)
    return text if len(text) <= 300 else f"{text[:150]}…{text[-100:]}"


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)[:2000]


def file_size(path: Path) -> int:
    """The size of a regular file; anything else (a FIFO, a device, a folder) is refused unread."""
    from advisor import files

    return files.file_size(path, "pass a .gguf file, a model folder or a config.json")


def read_json(path: Path, limit: int, what: str) -> Any:
    """A small JSON file, bounded in size, items and nesting, duplicate keys refused."""
    from advisor import files

    size = file_size(path)
    if size > limit:
        bad_file(path, f"{what} is {size} bytes, more than the {limit} this reader accepts")
    return parse_json(files.read_limited(path, limit, what), path, what, limit=limit)


def parse_json(raw: bytes | bytearray, where: str | Path, what: str, unique_keys: bool = True, *,
               limit: int | None = None, max_items: int = MAX_JSON_ITEMS) -> Any:
    """JSON from bytes. What parsing costs is bounded first, from the raw bytes: at most `max_items`
    values (each but the first of a container follows a comma), and, when `limit` is given, at most
    `limit` bytes (`limit / JSON_WIDE` when it is not ASCII: its decoded text may take 4 bytes a
    character). The C decoder checks the recursion limit itself (deep nesting is a RecursionError).
    Duplicate keys are refused unless `unique_keys` is off (a safetensors header of 10^6 tensors
    parses 3x faster without the hook; every surviving entry is still checked)."""
    items = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if items > max_items:
        bad_file(where, f"{what} holds about {items:,} values, more than the {max_items:,} this reader parses",
                 "this is not a model's metadata")
    if limit is not None and len(raw) > limit // JSON_WIDE and not raw.isascii():
        bad_file(where, f"{what} is {len(raw):,} bytes, not all ASCII: more than the {limit // JSON_WIDE:,} "
                        "this reader parses when it is not", "this is not a model's metadata")
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates if unique_keys else None)
    except _Duplicate as dup:
        bad_file(where, f"{what} repeats the key {str(dup)[:80]!r}")
    except RecursionError:
        bad_file(where, f"{what} is nested too deeply to be real JSON")
    except (UnicodeDecodeError, ValueError) as exc:
        bad_file(where, f"{what} is not valid JSON ({str(exc)[:120]})")


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out

