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
    p = Placer(_spec(row["arch"]), catalog.quants["F16"], catalog.runtimes["llama.cpp"], rig, opts, catalog.rules)
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


@pytest.mark.parametrize("row", [r for r in ROWS if r.values[0]["type_k"] == "f16"])
def test_compute_buffer_within_3pct(catalog, row):
    p = _placement(catalog, row)
    ours = p.host.overhead_bytes / MIB
    assert abs(ours / row["compute_mib"] - 1) <= 0.03, (ours, row["compute_mib"])


@pytest.mark.parametrize("row", [r for r in ROWS if r.values[0]["type_k"] != "f16"])
def test_compute_buffer_with_quantized_kv(catalog, row):
    """With a quantized cache the CPU backend's allocator reuses one hidden-state buffer (hidden x ubatch
    x 4 bytes) for the mask once the context is long; the engine budgets the f16 graph, so it is within 3%
    or above by at most that one buffer, never below."""
    p = _placement(catalog, row)
    ours = p.host.overhead_bytes / MIB
    reused = FIXTURE["models"][row["arch"]]["spec"]["hidden_size"] * row["n_ubatch"] * 4 / MIB
    assert ours >= row["compute_mib"] * 0.97, (ours, row["compute_mib"])
    assert ours - row["compute_mib"] <= max(0.03 * row["compute_mib"], reused), (ours, row["compute_mib"])


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
