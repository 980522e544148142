"""The memory engine held to llama.cpp itself (tests/data/llamacpp_oracle.json, bench/llamacpp_oracle.py).

The fixture records what llama.cpp (CPU backend, llama-cpp-python 0.3.36) allocated for zero-weight GGUFs
of real per-layer shapes over context x flash attention x KV type x n_ubatch x slots. Weights and KV
must be exact (to the 0.01 MiB llama.cpp prints), compute buffers within 3%.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.catalog.types import ModelSpec
from advisor.engine.options import Options
from advisor.engine.placement import Placer
from advisor.engine.scenario import Scenario
from advisor.probe.flags import rig_from_flags

MIB = 1024**2
FIXTURE = json.loads((Path(__file__).parent / "data" / "llamacpp_oracle.json").read_text())
ORACLE = Path(__file__).resolve().parents[2] / "shared" / "tools" / "llamacpp-oracle"


def _spec(arch: str) -> ModelSpec:
    s = dict(FIXTURE["models"][arch]["spec"])
    return ModelSpec(**{**s, "sources": ("tests/data/llamacpp_oracle.json",)})


def _placement(catalog, row: dict):
    n = row["n_seq_max"]
    rig = rig_from_flags(catalog, [], ram=1024)
    opts = Options(ctx=row["n_ctx"] // n, concurrency=n, kv_unified=row["kv_unified"], flash_attn=row["fa"],
                   ubatch=row["n_ubatch"], kv_type=row["type_k"], quant="F16")
    p = Placer(Scenario.of(_spec(row["arch"]), catalog.quants["F16"], catalog.runtimes["llama.cpp"], rig, opts,
                           catalog.rules))
    return p.at(row["n_ctx"] // n)


def _id(row: dict) -> str:
    return (f"{row['arch']}-{row['n_ctx']}-fa{row['fa']}-{row['type_k']}-ub{row['n_ubatch']}-np{row['n_seq_max']}"
            f"{'u' if row['kv_unified'] else ''}")


ROWS = [pytest.param(r, id=_id(r)) for r in FIXTURE["rows"]]


def test_fixture_records_its_provenance():
    assert FIXTURE["llama_cpp"]["llama_cpp_python"] and FIXTURE["llama_cpp"]["backend"] == "CPU"
    assert {r["arch"] for r in FIXTURE["rows"]} == {"llama", "qwen3", "gemma3", "qwen3moe", "deepseek2"}
    assert all(m["fa_auto_cpu"] == "enabled" for m in FIXTURE["models"].values())


@pytest.mark.parametrize("row", ROWS)
def test_kv_cache_is_exact(catalog, row):
    p = _placement(catalog, row)
    assert p.host.kv_cache_bytes / MIB == pytest.approx(row["kv_mib"], abs=0.006)


@pytest.mark.parametrize("row", ROWS)
def test_compute_buffer_within_3pct(catalog, row):
    """Every row, f16 and quantized caches alike: with a q8_0/q4_0 cache llama.cpp rotates K and V with a
    Hadamard matrix and its allocator lays the buffer out differently (memory.compute_buffer_bytes)."""
    p = _placement(catalog, row)
    ours = p.host.overhead_bytes / MIB
    assert abs(ours / row["compute_mib"] - 1) <= 0.03, (ours, row["compute_mib"])


def test_quantized_cache_is_rotated_as_llama_cpp_logs_it(catalog):
    """attn_rot_k/attn_rot_v as the fixture's load logs (llama.cpp 0.3.36) would print them: rotated for a
    block-quantized cache with head sizes that are multiples of 64; not for f16, not for MLA's K-only cache
    (no separate V), and not on ik_llama.cpp, where the transform is opt-in (-khad/-vhad)."""
    from advisor.engine import memory as mem

    rt = catalog.runtimes["llama.cpp"]
    for arch in ("llama", "qwen3", "gemma3", "qwen3moe"):
        assert mem.kv_rotated(_spec(arch), rt, "q8_0", catalog.rules), arch
        assert mem.kv_rotated(_spec(arch), rt, "q4_0", catalog.rules), arch
        assert not mem.kv_rotated(_spec(arch), rt, "f16", catalog.rules), arch
    assert not mem.kv_rotated(_spec("deepseek2"), rt, "q8_0", catalog.rules)
    assert catalog.models["phi-3-mini"].head_dim == 96  # 96 % 64 != 0: not rotated
    assert not mem.kv_rotated(catalog.models["phi-3-mini"], rt, "q8_0", catalog.rules)
    assert not mem.kv_rotated(_spec("llama"), catalog.runtimes["ik_llama.cpp"], "q8_0", catalog.rules)


def test_rotation_moves_one_hidden_buffer_where_the_oracle_does(catalog):
    """The allocator effect itself, on the llama shape (feed-forward phase dominant): from 2 x hidden cells
    (8192) on, a quantized cache's buffer is one hidden state (4096 x 512 x 4 = 8 MiB) below the f16
    cache's; below that they are equal (fixture rows at 4096 and 32768 cells)."""
    rows = {(r["n_ctx"], r["type_k"]): r for r in FIXTURE["rows"]
            if r["arch"] == "llama" and r["fa"] == "on" and r["n_ubatch"] == 512 and r["n_seq_max"] == 1}
    for ctx in (4096, 32768):
        f16 = _placement(catalog, rows[ctx, "f16"]).host.overhead_bytes / MIB
        q8 = _placement(catalog, rows[ctx, "q8_0"]).host.overhead_bytes / MIB
        logged = rows[ctx, "q8_0"]["compute_mib"] - rows[ctx, "f16"]["compute_mib"]
        assert q8 - f16 == pytest.approx(logged, abs=0.1), ctx


@pytest.mark.parametrize("arch", sorted(FIXTURE["models"]))
def test_weights_are_the_files_tensor_bytes(arch):
    """llama.cpp's model buffer is the file's tensor bytes, which the advisor's GGUF reader read."""
    m = FIXTURE["models"][arch]
    assert m["file_tensor_bytes"] / MIB == pytest.approx(m["model_buffer_mib"], abs=0.006)


@pytest.mark.skipif(not (ORACLE / "gen.py").exists(), reason="../shared/tools/llamacpp-oracle is absent")
def test_weights_exact_from_regenerated_files(tmp_path):
    pytest.importorskip("gguf")
    from advisor.modelfile import read_model

    env = dict(os.environ, ORACLE_MODELS=str(tmp_path))
    r = subprocess.run([sys.executable, str(ORACLE / "gen.py"), *FIXTURE["models"]], env=env, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"the oracle's gen.py does not run here: {r.stderr[-200:]}")
    for arch, m in FIXTURE["models"].items():
        lm = read_model(str(tmp_path / f"{arch}.gguf"))
        assert lm.layout.total_bytes / MIB == pytest.approx(m["model_buffer_mib"], abs=0.006), arch
        assert {k: getattr(lm.spec, k) for k in m["spec"]} == {k: (tuple(v) if isinstance(v, list) else v)
                                                                 for k, v in m["spec"].items()}, arch
