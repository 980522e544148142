"""Truncated, corrupted and crafted model files: each is one AdvisorError, fast, never a traceback,
a hang or a huge allocation. Plus a hypothesis fuzz over both parsers."""

from __future__ import annotations

import json
import os
import random
import struct
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("gguf")
from gguf import GGUFEndian  # noqa: E402
from test_modelfile import LLAMA_CFG, Tiny, make_gguf, make_st_folder, write_st  # noqa: E402

from advisor.errors import AdvisorError  # noqa: E402
from advisor.modelfile import read_model  # noqa: E402

HANG_S = 30.0
"""A hostile file must be refused, not hang: this bound only catches a hang (an endless loop, a read that waits
forever). How fast refusals really are is measured by bench/hostile.py, not asserted here."""


def refused(path: Path | str, match: str | None = None) -> AdvisorError:
    """read_model must raise AdvisorError (one line), and not hang."""
    start = time.perf_counter()
    with pytest.raises(AdvisorError, match=match or None) as err:
        read_model(str(path))
    assert time.perf_counter() - start < HANG_S
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
    return err.value


# ---------------------------------------------------------------- hand-made GGUF


def gstr(s: str | bytes, length: int | None = None) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(raw) if length is None else length) + raw


def kv_u32(key: str, value: int) -> bytes:
    return gstr(key) + struct.pack("<II", 4, value)


def kv_str(key: str, value: str) -> bytes:
    return gstr(key) + struct.pack("<I", 8) + gstr(value)


def tinfo(name: str, dims: list[int], ttype: int = 0, offset: int = 0) -> bytes:
    return gstr(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ttype, offset)


BASE_KV = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 1), kv_u32("llama.embedding_length", 32),
           kv_u32("llama.attention.head_count", 4), kv_u32("llama.context_length", 128), kv_u32("llama.vocab_size", 8)]


def gguf_file(path: Path, kvs: list[bytes] | None = None, infos: list[bytes] | None = None, data: int = 4096,
              *, n_tensors: int | None = None, n_kv: int | None = None, version: int = 3) -> Path:
    kvs = BASE_KV if kvs is None else kvs
    infos = [tinfo("token_embd.weight", [32, 8])] if infos is None else infos
    head = b"GGUF" + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(infos)
    body += bytes(-len(body) % 32)
    path.write_bytes(body + bytes(data))
    return path


def test_hand_made_gguf_is_valid(tmp_path: Path) -> None:
    lm = read_model(str(gguf_file(tmp_path / "ok.gguf")))
    assert lm.layout.total_bytes == 32 * 8 * 4 and lm.spec.vocab_size == 8


@pytest.mark.parametrize(("case", "kwargs", "match"), [
    ("tensor count 2^63", {"n_tensors": 1 << 63}, "tensors"),
    ("tensor count 10^6 in a small file", {"n_tensors": 10**6}, "tensors"),
    ("kv count 2^62", {"n_kv": 1 << 62}, "metadata entries"),
    ("kv count larger than present", {"n_kv": 50}, ""),
    ("version 1", {"version": 1}, "version 1"),
    ("version 99", {"version": 99}, "version 99"),
    ("key length 2^60", {"kvs": [gstr("k", 1 << 60)]}, "claims"),
    ("string value 2^60", {"kvs": [gstr("general.name") + struct.pack("<I", 8) + gstr("x", 1 << 60)]}, "claims"),
    ("array of 2^60 u8", {"kvs": [gstr("a") + struct.pack("<IIQ", 9, 0, 1 << 60)]}, "items"),
    ("array of 2^23 strings", {"kvs": [gstr("a") + struct.pack("<IIQ", 9, 8, 1 << 23)]}, "strings"),
    ("array of 2^40 u32", {"kvs": [gstr("a") + struct.pack("<IIQ", 9, 4, 1 << 40)]}, "items"),
    ("nested array", {"kvs": [gstr("a") + struct.pack("<IIQ", 9, 9, 1)]}, "unsupported item type"),
    ("unknown value type", {"kvs": [gstr("a") + struct.pack("<I", 99)]}, "unknown value type"),
    ("duplicate key", {"kvs": [kv_u32("a", 1), kv_u32("a", 2)]}, "twice"),
    ("not UTF-8 key", {"kvs": [gstr(b"\xff\xfe") + struct.pack("<II", 4, 1)]}, "UTF-8"),
    ("1000 dimensions", {"infos": [gstr("t") + struct.pack("<I", 1000)]}, "dimensions"),
    ("2^200 elements", {"infos": [tinfo("t", [1 << 50] * 4)]}, "larger than the whole file"),
    ("unknown tensor type", {"infos": [tinfo("t", [32], ttype=77)]}, "unknown ggml type"),
    ("row not whole blocks", {"infos": [tinfo("t", [33, 2], ttype=8)]}, "whole number"),
    ("misaligned offset", {"infos": [tinfo("t", [32], offset=3)]}, "aligned"),
    ("offset past the end", {"infos": [tinfo("t", [32], offset=1 << 40)]}, "truncated"),
    ("overlapping tensors", {"infos": [tinfo("a", [64]), tinfo("b", [64], offset=128)]}, "overlap"),
    ("duplicate tensor", {"infos": [tinfo("a", [8]), tinfo("a", [8], offset=32)]}, "twice"),
    ("name length 2^60", {"infos": [gstr("t", 1 << 60)]}, "claims"),
    ("alignment 3", {"kvs": [*BASE_KV, kv_u32("general.alignment", 3)]}, "power of two"),
    ("alignment 0", {"kvs": [*BASE_KV, kv_u32("general.alignment", 0)]}, "power of two"),
    ("block_count 0", {"kvs": [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 0)]}, "out of range"),
    ("block_count a string", {"kvs": [kv_str("general.architecture", "llama"), kv_str("llama.block_count", "two")]}, "expected an integer"),
    ("no architecture", {"kvs": BASE_KV[1:]}, "general.architecture"),
    ("head_count 0", {"kvs": [*BASE_KV[:3], kv_u32("llama.attention.head_count", 0), *BASE_KV[4:]]}, "out of range"),
    ("no tensors", {"infos": []}, "no tensors"),
])
def test_crafted_gguf(tmp_path: Path, case: str, kwargs: dict, match: str) -> None:
    refused(gguf_file(tmp_path / "bad.gguf", **kwargs), match)


def test_truncated_gguf_at_every_stage(tmp_path: Path) -> None:
    src = tmp_path / "ok.gguf"
    make_gguf(src, Tiny(layers=1))
    raw = src.read_bytes()
    cuts = [0, 3, 4, 7, 12, 20, 24, 60, 200, 1000, 3000, len(raw) // 2, len(raw) - 1]
    for cut in cuts:
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(raw[:cut])
        refused(bad)


def test_random_bytes(tmp_path: Path) -> None:
    rng = random.Random(7)
    for i in range(20):
        blob = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 5000)))
        for name, body in ((f"r{i}.gguf", blob), (f"m{i}.gguf", b"GGUF" + blob), (f"r{i}.bin", blob)):
            (tmp_path / name).write_bytes(body)
            refused(tmp_path / name)


def test_big_endian_gguf_reads_the_same(tmp_path: Path) -> None:
    expected = make_gguf(tmp_path / "le.gguf", Tiny(layers=1))
    make_gguf(tmp_path / "be.gguf", Tiny(layers=1), endianess=GGUFEndian.BIG)
    big = read_model(str(tmp_path / "be.gguf"))
    assert big.layout == read_model(str(tmp_path / "le.gguf")).layout
    assert big.layout.total_bytes == sum(expected.values()) and big.spec.layers == 1


# ---------------------------------------------------------------- safetensors


def st_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(LLAMA_CFG))
    return folder


@pytest.mark.parametrize(("case", "header", "data", "header_len", "match"), [
    ("header length 2^63", {}, 0, 1 << 63, "header claims"),
    ("header length past the end", {}, 0, 10**6, "truncated"),
    ("header not JSON", None, 0, None, "not a safetensors file|not valid JSON"),
    ("unknown dtype", {"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}, 1, None, "unknown dtype"),
    ("negative dim", {"a": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 2]}}, 2, None, "malformed shape"),
    ("bool dim", {"a": {"dtype": "F16", "shape": [True], "data_offsets": [0, 2]}}, 2, None, "malformed shape"),
    ("float dim", {"a": {"dtype": "F16", "shape": [1.5], "data_offsets": [0, 2]}}, 2, None, "malformed shape"),
    ("20 dims", {"a": {"dtype": "U8", "shape": [1] * 20, "data_offsets": [0, 1]}}, 1, None, "malformed shape"),
    ("offsets past the end", {"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}}, 4, None, "outside"),
    ("offsets reversed", {"a": {"dtype": "F16", "shape": [0], "data_offsets": [4, 0]}}, 4, None, "outside"),
    ("offsets 2^64", {"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 1 << 64]}}, 4, None, "outside"),
    ("one offset", {"a": {"dtype": "F16", "shape": [1], "data_offsets": [0]}}, 4, None, "malformed data_offsets"),
    ("no dtype", {"a": {"shape": [1], "data_offsets": [0, 2]}}, 4, None, "not described"),
    ("size mismatch", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, 8, None, "span"),
    ("huge shape", {"a": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 4]}}, 8, None, "larger than"),
    ("overlap", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 12, None, "overlap"),
    ("metadata not strings", {"__metadata__": {"x": 1}}, 0, None, "__metadata__"),
    ("tensor not an object", {"a": [1, 2]}, 0, None, "not described"),
    ("header a list", [1, 2], 0, None, "not a safetensors file"),
])
def test_crafted_safetensors(tmp_path: Path, case: str, header, data: int, header_len, match: str) -> None:
    folder = st_folder(tmp_path)
    if header is None:
        (folder / "model.safetensors").write_bytes(struct.pack("<Q", 9) + b"{not json")
    else:
        write_st(folder / "model.safetensors", header, data, header_len=header_len)
    refused(folder, match)


def test_safetensors_deep_nesting_and_short_files(tmp_path: Path) -> None:
    folder = st_folder(tmp_path)
    deep = b"{" + b'"a":[' * 200_000
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(deep)) + deep)
    refused(folder, "nested too deeply|not valid JSON")
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 20) + b"{")
    refused(folder, "truncated")
    (folder / "model.safetensors").write_bytes(b"\x01\x02")
    refused(folder, "too short")


def test_bad_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    for body in ("[]", "{", '{"num_hidden_layers": "32"}', json.dumps({**LLAMA_CFG, "num_hidden_layers": 10**9}),
                 json.dumps({**LLAMA_CFG, "num_attention_heads": 0}), json.dumps({k: v for k, v in LLAMA_CFG.items() if k != "vocab_size"}),
                 json.dumps({**LLAMA_CFG, "num_local_experts": 4})):
        (folder / "config.json").write_text(body)
        refused(folder / "config.json")


def test_oversized_json_is_not_read(tmp_path: Path) -> None:
    folder = st_folder(tmp_path)
    with open(folder / "model.safetensors.index.json", "wb") as f:
        f.truncate(200 * 1024**2)  # sparse: 200 MiB that would take a while to parse
    refused(folder, "more than")


# ---------------------------------------------------------------- fuzz

_BASE: dict[str, tuple[bytes, int]] = {}


def _base(kind: str) -> tuple[bytes, int]:
    """A valid small file of each kind and the length of its header (where mutations matter)."""
    if kind not in _BASE:
        tmp = Path(tempfile.mkdtemp(prefix="modelfile-fuzz-"))
        if kind == "gguf":
            make_gguf(tmp / "m.gguf", Tiny(layers=1, vocab=64))
            raw = (tmp / "m.gguf").read_bytes()
            head = raw.index(b"output.weight") + 64
        else:
            make_st_folder(tmp, shards=1)
            raw = (tmp / "model.safetensors").read_bytes()
            head = 8 + struct.unpack("<Q", raw[:8])[0]
        _BASE[kind] = (raw, head)
    return _BASE[kind]


EXTREMES = [0, 1, 2**31, 2**32 - 1, 2**32, 2**60, 2**63, 2**64 - 1]

mutation = st.one_of(
    st.tuples(st.just("byte"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("u64"), st.floats(0, 1), st.one_of(st.sampled_from(EXTREMES), st.integers(0, 2**64 - 1))),
    st.tuples(st.just("u32"), st.floats(0, 1), st.one_of(st.sampled_from([0, 1, 7, 9, 12, 99, 2**31]), st.integers(0, 2**32 - 1))),
    st.tuples(st.just("digits"), st.floats(0, 1), st.sampled_from(["-1", "0", "1e999", "18446744073709551616", "true", "null", "9" * 40])),
    st.tuples(st.just("cut"), st.floats(0, 1), st.just(0)),
)


def _mutate(raw: bytes, head: int, muts: list) -> bytes:
    buf = bytearray(raw)
    for kind, where, value in muts:
        if not buf:
            break
        pos = int(where * (min(head, len(buf)) - 1))
        if kind == "byte":
            buf[pos] = value
        elif kind == "u64":
            buf[pos:pos + 8] = struct.pack("<Q", value)
        elif kind == "u32":
            buf[pos:pos + 4] = struct.pack("<I", value)
        elif kind == "digits":
            text = bytes(buf)
            at = next((i for i in range(pos, len(text)) if 48 <= text[i] <= 57), None)
            if at is not None:
                end = at
                while end < len(text) and 48 <= text[end] <= 57:
                    end += 1
                buf[at:end] = value.encode()
        else:
            del buf[pos:]
    return bytes(buf)


def _fuzz_one(kind: str, muts: list) -> None:
    raw, head = _base(kind)
    body = _mutate(raw, head, muts)
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "gguf":
            target = Path(tmp) / "m.gguf"
            target.write_bytes(body)
        else:
            target = Path(tmp)
            (target / "config.json").write_text(json.dumps(LLAMA_CFG))
            (target / "model.safetensors").write_bytes(body)
        start = time.perf_counter()
        try:
            read_model(str(target))
        except AdvisorError as exc:
            assert "\n" not in str(exc)
        assert time.perf_counter() - start < HANG_S


FUZZ = settings(max_examples=int(os.environ.get("MODELFILE_FUZZ_EXAMPLES", "800")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@FUZZ
@given(st.lists(mutation, min_size=1, max_size=6))
def test_fuzz_gguf_only_advisor_error_escapes(muts: list) -> None:
    _fuzz_one("gguf", muts)


@FUZZ
@given(st.lists(mutation, min_size=1, max_size=6))
def test_fuzz_safetensors_only_advisor_error_escapes(muts: list) -> None:
    _fuzz_one("safetensors", muts)
