"""A bounded reader of GGUF headers: metadata key/values and tensor infos, never tensor data.

Why not `gguf.GGUFReader`: the `gguf` package is not a runtime dependency of the advisor, and its
reader trusts the header. It memory-maps the file (a file that shrinks while mapped kills the
process with SIGBUS), walks every array item in Python building one numpy view per item (a crafted
array length of 2^60 loops practically forever, since reads past the end return empty views
instead of failing), and builds a numpy view over each tensor's data. This reader instead reads the
header through a small moving window with plain file reads, checks every count and length against
`limits` and against the bytes left in the file before using it, skips what the advisor does not
need (tokenizer arrays are walked, not stored), and then checks that every tensor's data lies
inside the file, aligned and without overlap. A bad file raises `AdvisorError` with one line.

Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (versions 2 and 3; both byte
orders).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from advisor.files import open_regular
from advisor.modelfile import limits
from advisor.modelfile.ggml_types import GGML_TYPES
from advisor.modelfile.limits import bad_file

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
_WINDOW = 1 << 20

# GGUF value types -> struct code (8 = string, 9 = array are handled apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GgufArray:
    """An array value: its item type, length, and its items when short and numeric."""

    item_type: int
    count: int
    values: tuple | None = None


class Tensor(NamedTuple):
    """One tensor as a file describes it (a NamedTuple: a model may have 10^5 of them)."""

    name: str
    dtype: str
    """ggml type name (`Q4_K`) or safetensors dtype (`BF16`)."""
    shape: tuple[int, ...]
    """As the file stores it (GGUF: ggml order, fastest dimension first)."""
    n_elements: int
    n_bytes: int
    kernel: str


@dataclass(frozen=True)
class GgufFile:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: tuple[Tensor, ...]


class _Cursor:
    """Reads forward through a file via a bounded window; every read is checked against the size."""

    def __init__(self, f: BinaryIO, size: int, path: Path, order: str = "<") -> None:
        self.f, self.size, self.path, self.order = f, size, path, order
        self.pos = 0
        self.base = 0
        self.buf = b""
        self.string_items = 0
        self._structs: dict[str, struct.Struct] = {}

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> int:
        """Offset in `buf` of the next `n` bytes, refilling the window; refuses reads past the end."""
        if n > self.size - self.pos:
            bad_file(self.path, f"truncated: {what} at byte {self.pos} needs {n} bytes, the file ends at {self.size}")
        off = self.pos - self.base
        if off < 0 or off + n > len(self.buf):
            self.f.seek(self.pos)
            self.buf = self.f.read(max(n, min(_WINDOW, self.size - self.pos)))
            self.base, off = self.pos, 0
            if len(self.buf) < n:
                bad_file(self.path, f"truncated: the file ended at byte {self.pos + len(self.buf)} while reading {what}")
        return off

    def _struct(self, code: str) -> struct.Struct:
        st = self._structs.get(code)
        if st is None:
            st = self._structs[code] = struct.Struct(self.order + code)
        return st

    def unpack_many(self, code: str, what: str) -> tuple:
        st = self._struct(code)
        off = self.pos - self.base
        if off < 0 or off + st.size > len(self.buf):  # the fast path stays inside the window
            off = self.need(st.size, what)
        self.pos += st.size
        return st.unpack_from(self.buf, off)

    def unpack(self, code: str, what: str) -> Any:
        return self.unpack_many(code, what)[0]

    def skip(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            bad_file(self.path, f"truncated: {what} at byte {self.pos} runs {n} bytes past the end of the file")
        self.pos += n

    def string(self, what: str, limit: int) -> str | None:
        """A GGUF string; None (skipped) when longer than `limit`."""
        n = self.unpack("Q", f"{what} length")
        if n > self.left():
            bad_file(self.path, f"{what} claims {n} bytes at byte {self.pos}, but only {self.left()} are left in the file")
        if n > limit:
            self.pos += n
            return None
        off = self.need(n, what)
        raw = self.buf[off : off + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            bad_file(self.path, f"{what} at byte {self.pos - n} is not UTF-8 text")

    def skip_strings(self, count: int, what: str) -> None:
        self.string_items += count
        if self.string_items > limits.MAX_STRING_ITEMS:
            bad_file(self.path, f"{what}: more than {limits.MAX_STRING_ITEMS} strings in arrays")
        unpack = struct.Struct(self.order + "Q").unpack_from
        end = self.size
        for _ in range(count):
            off = self.pos - self.base
            if off + 8 > len(self.buf):
                off = self.need(8, what)
            n = unpack(self.buf, off)[0]
            if n > end - self.pos - 8:
                bad_file(self.path, f"{what}: a string at byte {self.pos} claims {n} bytes, past the end of the file")
            self.pos += 8 + n


def read_gguf(path: Path) -> GgufFile:
    """Read one GGUF file's metadata and tensor infos, checking them against the file's size."""
    size = limits.file_size(path)
    try:
        with open_regular(path) as f:
            return _parse(f, size, path)
    except OSError as exc:
        bad_file(path, f"can't read it ({exc.strerror or exc})", "check the path and permissions")


def read_gguf_stream(f: BinaryIO, size: int, where: str | Path) -> GgufFile:
    """Read a GGUF header from any seekable reader of a file of `size` bytes (a remote file read by
    range requests: `advisor.modelfile.fetch.RangeFile`); `where` names it in errors."""
    return _parse(f, size, where)


def _parse(f: BinaryIO, size: int, path: str | Path) -> GgufFile:
    head = f.read(8)
    if head[:4] != MAGIC:
        bad_file(path, "not a GGUF file (it does not start with the GGUF magic)", "pass a .gguf model file")
    if len(head) < 8:
        bad_file(path, "truncated: the GGUF header is incomplete")
    order = "<"
    version = struct.unpack_from("<I", head, 4)[0]
    if version & 0xFFFF == 0 and version:
        order, version = ">", struct.unpack_from(">I", head, 4)[0]
    if version == 1:
        bad_file(path, "GGUF version 1 is not supported", "convert the model again with a current llama.cpp")
    if version not in (2, 3):
        bad_file(path, f"unknown GGUF version {version}", "this reader knows versions 2 and 3")
    cur = _Cursor(f, size, path, order)
    cur.pos = 8
    n_tensors = cur.unpack("Q", "tensor count")
    n_kv = cur.unpack("Q", "metadata count")
    if n_tensors > limits.MAX_GGUF_TENSORS or n_tensors * 24 > cur.left():
        bad_file(path, f"header claims {n_tensors} tensors, impossible in {size} bytes (or over {limits.MAX_GGUF_TENSORS})")
    if n_kv > limits.MAX_KV or n_kv * 12 > cur.left():
        bad_file(path, f"header claims {n_kv} metadata entries, impossible in {size} bytes (or over {limits.MAX_KV})")
    metadata = _read_metadata(cur, n_kv)
    infos = [_read_tensor_info(cur, i) for i in range(n_tensors)]
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1) or alignment > 1 << 30:
        bad_file(path, f"general.alignment {alignment!r} is not a power of two")
    data_start = -(-cur.pos // alignment) * alignment
    tensors = _check_data(path, infos, data_start, size, alignment)
    return GgufFile(path=Path(path), version=version, metadata=metadata, tensors=tensors)


def _read_metadata(cur: _Cursor, n_kv: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = cur.string(f"metadata key #{i}", limits.MAX_KEY_LEN)
        if key is None:
            bad_file(cur.path, f"metadata key #{i} is longer than {limits.MAX_KEY_LEN} bytes")
        if key in metadata:
            bad_file(cur.path, f"metadata key {key[:100]!r} appears twice")
        vtype = cur.unpack("I", f"type of {key[:100]!r}")
        metadata[key] = _read_value(cur, vtype, key[:100])
    return metadata


def _read_value(cur: _Cursor, vtype: int, key: str) -> Any:
    if vtype in _SCALARS:
        return cur.unpack(_SCALARS[vtype], f"value of {key!r}")
    if vtype == _STRING:
        return cur.string(f"value of {key!r}", limits.MAX_KEPT_STRING)
    if vtype != _ARRAY:
        bad_file(cur.path, f"metadata {key!r} has unknown value type {vtype}")
    itype = cur.unpack("I", f"item type of {key!r}")
    count = cur.unpack("Q", f"length of {key!r}")
    if count > limits.MAX_ARRAY_ITEMS:
        bad_file(cur.path, f"array {key!r} claims {count} items (over {limits.MAX_ARRAY_ITEMS})")
    if itype == _STRING:
        if count * 8 > cur.left():
            bad_file(cur.path, f"array {key!r} claims {count} strings, more than the file can hold")
        cur.skip_strings(count, f"array {key!r}")
        return GgufArray(itype, count)
    if itype not in _SCALARS:
        bad_file(cur.path, f"array {key!r} has unsupported item type {itype}")
    item = struct.calcsize(_SCALARS[itype])
    if count * item > cur.left():
        bad_file(cur.path, f"array {key!r} claims {count} items, more than the file can hold")
    if count <= limits.MAX_KEPT_ARRAY:
        fmt = f"{cur.order}{count}{_SCALARS[itype]}"
        off = cur.need(item * count, f"array {key!r}")
        cur.pos += item * count
        return GgufArray(itype, count, struct.unpack_from(fmt, cur.buf, off))
    cur.skip(count * item, f"array {key!r}")
    return GgufArray(itype, count)


def _read_tensor_info(cur: _Cursor, i: int) -> tuple[str, int, tuple[int, ...], int]:
    name = cur.string(f"name of tensor #{i}", limits.MAX_KEY_LEN)
    if name is None:
        bad_file(cur.path, f"name of tensor #{i} is longer than {limits.MAX_KEY_LEN} bytes")
    n_dims = cur.unpack("I", "tensor dimensions")
    if n_dims > limits.MAX_GGUF_DIMS:
        bad_file(cur.path, f"tensor {name[:100]!r} claims {n_dims} dimensions (GGUF allows {limits.MAX_GGUF_DIMS})")
    *dims, ttype, offset = cur.unpack_many(f"{n_dims}QIQ", "tensor shape, type and offset")
    return name, ttype, tuple(dims), offset


def _check_data(path: Path, infos: list, data_start: int, size: int, alignment: int) -> tuple[Tensor, ...]:
    room = max(size - data_start, 0)
    tensors: list[Tensor] = []
    spans: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for name, ttype, dims, offset in infos:
        label = repr(name[:100])
        if name in seen:
            bad_file(path, f"tensor {label} appears twice")
        seen.add(name)
        gt = GGML_TYPES.get(ttype)
        if gt is None:
            bad_file(path, f"tensor {label} has unknown ggml type {ttype}", "a newer llama.cpp type, or a corrupted file")
        n = 1
        for d in dims:
            n *= d
            if n > size * gt.block:  # cheap early stop: more elements than the file could hold
                bad_file(path, f"tensor {label} shape {list(dims)} is larger than the whole file")
        if dims and dims[0] % gt.block:
            bad_file(path, f"tensor {label} row of {dims[0]} is not a whole number of {gt.name} blocks ({gt.block})")
        nbytes = n // gt.block * gt.type_size
        if gt.row_meta and dims and dims[0]:  # ik_llama.cpp's row-scaled types: a scale in front of every row
            nbytes += n // dims[0] * gt.row_meta
        if offset % alignment:
            bad_file(path, f"tensor {label} data offset {offset} is not aligned to {alignment}")
        if offset + nbytes > room:
            bad_file(path, f"truncated: tensor {label} needs bytes up to {data_start + offset + nbytes}, the file has {size}")
        spans.append((offset, offset + nbytes, name))
        tensors.append(Tensor(name, gt.name, dims, n, nbytes, gt.kernel))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            bad_file(path, f"tensors {a[:100]!r} and {b[:100]!r} overlap in the file")
    return tuple(tensors)
