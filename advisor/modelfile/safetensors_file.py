"""A bounded reader of safetensors headers (never the tensor data, never pickle).

Layout (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes
of JSON `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}`, then the data.
N is bounded (`limits.MAX_ST_HEADER`) and checked against the file size before it is read; every
tensor's dtype, shape and offsets are checked: known dtype, non-negative integer dims, byte length
equal to elements x dtype size, offsets inside the data area, no two tensors overlapping. A name repeated in the JSON keeps its last entry
(plain JSON semantics; refusing repeats would cost a Python call per object on 10^6-tensor headers).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from advisor.files import open_regular
from advisor.modelfile import limits
from advisor.modelfile.ggml_types import ST_DTYPES
from advisor.modelfile.gguf_file import Tensor
from advisor.modelfile.limits import bad_file


def read_safetensors(path: Path) -> tuple[tuple[Tensor, ...], dict[str, str]]:
    """The tensors of one .safetensors file and its `__metadata__`."""
    size = limits.file_size(path)
    try:
        with open_regular(path) as f:
            return read_safetensors_stream(f, size, path)
    except OSError as exc:
        bad_file(path, f"can't read it ({exc.strerror or exc})", "check the path and permissions")


def read_safetensors_stream(f: BinaryIO, size: int, path: str | Path) -> tuple[tuple[Tensor, ...], dict[str, str]]:
    """The same from any seekable reader of a file of `size` bytes (a remote file read by range
    requests); `path` names it in errors."""
    if size < 8:
        bad_file(path, f"too short to be safetensors ({size} bytes)")
    n = struct.unpack("<Q", f.read(8))[0]
    if n > limits.MAX_ST_HEADER:
        bad_file(path, f"safetensors header claims {n} bytes (this reader accepts up to {limits.MAX_ST_HEADER})")
    if n > size - 8:
        bad_file(path, f"truncated: the safetensors header claims {n} bytes, the file has {size - 8} after the length")
    raw = f.read(n)
    if len(raw) != n:
        bad_file(path, "truncated: the file ended inside the safetensors header")
    if not raw.lstrip(b" ").startswith(b"{"):
        bad_file(path, "not a safetensors file (the header is not a JSON object)", "pass a folder of .safetensors files")
    if raw.count(b'"data_offsets"') > limits.MAX_ST_TENSORS:
        bad_file(path, f"the header lists more than {limits.MAX_ST_TENSORS} tensors, more than one file of a real checkpoint holds")
    header = limits.parse_json(raw, path, "safetensors header", unique_keys=False)
    if not isinstance(header, dict):
        bad_file(path, "the safetensors header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        bad_file(path, "__metadata__ is not a map of strings")
    if len(header) > limits.MAX_TENSORS:
        bad_file(path, f"the header lists {len(header)} tensors (over {limits.MAX_TENSORS})")
    return _tensors(path, header, size - 8 - n), meta


def index_shards(data: Any, where: str | Path) -> dict[str, set[str]]:
    """A `model.safetensors.index.json` as {shard file name: the tensor names it holds}, every field
    checked: a `weight_map` of at least one and at most `limits.MAX_INDEX_TENSORS` entries, each
    naming a .safetensors file beside the index, in at most `limits.MAX_SPLITS` files."""
    wmap = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
        bad_file(where, "has no weight_map of tensor names to file names")
    if not wmap:
        bad_file(where, "has an empty weight_map: it names no tensor", "the upload is incomplete or the index is not the model's")
    if len(wmap) > limits.MAX_INDEX_TENSORS:
        bad_file(where, f"its weight_map lists {len(wmap):,} tensors (over {limits.MAX_INDEX_TENSORS:,})")
    out: dict[str, set[str]] = {}
    for tensor, fname in wmap.items():
        names = out.get(fname)
        if names is None:
            if "/" in fname or "\\" in fname or fname.startswith(".") or not fname.endswith(".safetensors"):
                bad_file(where, f"weight_map names {fname[:100]!r}, not a .safetensors file in this folder")
            if len(out) >= limits.MAX_SPLITS:
                bad_file(where, f"lists more than {limits.MAX_SPLITS} shard files")
            names = out[fname] = set()
        names.add(tensor)
    return out


def _tensors(path: str | Path, header: dict[str, Any], room: int) -> tuple[Tensor, ...]:
    out: list[Tensor] = []
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():  # a tight loop: a crafted header may list 10^6 tensors
        try:
            dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        except (TypeError, KeyError, IndexError):
            bad_file(path, f"tensor {name[:100]!r} is not described by an object with dtype, shape and data_offsets")
        spec = ST_DTYPES.get(dtype) if type(dtype) is str else None
        if spec is None:
            bad_file(path, f"tensor {name[:100]!r} has unknown dtype {str(dtype)[:40]!r}")
        if type(shape) is not list or len(shape) > limits.MAX_ST_DIMS:
            bad_file(path, f"tensor {name[:100]!r} has a malformed shape {str(shape)[:80]}")
        n = 1
        for d in shape:
            if type(d) is not int or d < 0:  # `type(...) is int` also refuses JSON true/false
                bad_file(path, f"tensor {name[:100]!r} has a malformed shape {str(shape)[:80]}")
            n *= d
        if type(offsets) is not list or len(offsets) != 2 or type(offsets[0]) is not int or type(offsets[1]) is not int:
            bad_file(path, f"tensor {name[:100]!r} has malformed data_offsets {str(offsets)[:80]}")
        begin, end = offsets
        if not 0 <= begin <= end <= room:
            bad_file(path, f"tensor {name[:100]!r} data_offsets [{begin}, {end}] lie outside the {room}-byte data area")
        bits = spec[0]
        if n * bits > room * 8 + 7:
            bad_file(path, f"tensor {name[:100]!r} shape {str(shape)[:80]} is larger than the file's data")
        if (n * bits + 7) // 8 != end - begin:
            bad_file(path, f"tensor {name[:100]!r}: {n} x {dtype} is {(n * bits + 7) // 8} bytes, data_offsets span {end - begin}")
        if len(name) > limits.MAX_KEY_LEN:
            bad_file(path, f"a tensor name is longer than {limits.MAX_KEY_LEN} characters")
        spans.append((begin, end, name))
        out.append(Tensor(name, dtype, tuple(shape), n, end - begin, spec[1]))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            bad_file(path, f"tensors {a[:100]!r} and {b[:100]!r} overlap in the file")
    return tuple(out)
