"""Model files through the engine and the CLI: exact bytes from the file, and the same answer as the
catalog for the same model (issue 8's acceptance)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import GGUFWriter  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

from test_modelfile import make_gguf  # noqa: E402

from advisor.engine.check import evaluate  # noqa: E402
from advisor.engine.options import Options  # noqa: E402
from advisor.modelfile import read_model  # noqa: E402
from advisor.probe.flags import rig_from_flags  # noqa: E402


def test_check_json_uses_the_files_exact_bytes(tmp_path, run_cli):
    path = tmp_path / "tiny.gguf"
    expected = make_gguf(path)
    r = run_cli("check", str(path), "--gpu", "rtx-3090", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["memory"]["weights_bytes"] == sum(expected.values())
    assert "gguf file" in d["model"]["source"]
    lm = read_model(str(path))
    kv_per_token_layer = 2 * lm.spec.kv_heads * lm.spec.head_dim * 2
    assert d["memory"]["kv_cache_bytes"] == kv_per_token_layer * lm.spec.layers * d["context_tokens"]


def test_quant_cannot_override_a_file(tmp_path, run_cli):
    path = tmp_path / "tiny.gguf"
    make_gguf(path)
    r = run_cli("check", str(path), "--gpu", "rtx-3090", "--quant", "Q2_K")
    assert r.returncode == 2 and "drop --quant" in r.stderr


def _nbytes(shape: tuple[int, ...], qt: T) -> int:
    block, size = GGML_QUANT_SIZES[qt]
    n = 1
    for d in shape:
        n *= d
    return n // block * size


def write_sparse_llama(path: Path, catalog, model_id: str, qt: T) -> int:
    """A full-size GGUF of a catalog model's real shapes with sparse (unwritten) tensor data."""
    m = catalog.models[model_id]
    w = GGUFWriter(path, "llama")
    w.add_block_count(m.layers)
    w.add_embedding_length(m.hidden_size)
    w.add_head_count(m.attention_heads)
    w.add_head_count_kv(m.kv_heads)
    w.add_context_length(m.max_context)
    w.add_feed_forward_length(m.intermediate_size)
    w.add_vocab_size(m.vocab_size)
    H, F, hd = m.hidden_size, m.intermediate_size, m.head_dim
    shapes = {"token_embd.weight": (m.vocab_size, H), "output_norm.weight": (H,), "output.weight": (m.vocab_size, H)}
    for il in range(m.layers):
        p = f"blk.{il}."
        shapes.update({p + "attn_norm.weight": (H,), p + "ffn_norm.weight": (H,),
                       p + "attn_q.weight": (m.attention_heads * hd, H), p + "attn_k.weight": (m.kv_heads * hd, H),
                       p + "attn_v.weight": (m.kv_heads * hd, H), p + "attn_output.weight": (H, m.attention_heads * hd),
                       p + "ffn_gate.weight": (F, H), p + "ffn_up.weight": (F, H), p + "ffn_down.weight": (H, F)})
    total = 0
    for name, shape in shapes.items():
        t = T.F32 if len(shape) == 1 else qt
        nbytes = _nbytes(shape, t)
        if t == T.F32:
            w.add_tensor_info(name, shape, np.float32, nbytes)
        else:  # quantized tensors are described by their byte shape (rows x bytes per row)
            block, size = GGML_QUANT_SIZES[t]
            w.add_tensor_info(name, (shape[0], shape[1] // block * size), np.uint8, nbytes, raw_dtype=t)
        total += nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as fh:  # the data region, unwritten: a sparse file costs no disk
        fh.seek(0, 2)
        start = fh.tell()
        start += (-start) % 32
        fh.truncate(start + sum(_nbytes(s, T.F32 if len(s) == 1 else qt) + (-_nbytes(s, T.F32 if len(s) == 1 else qt)) % 32
                                for s in shapes.values()))
    return total


@pytest.mark.parametrize("gpu", ["rtx-3060-12gb", "rtx-4060-ti-8gb", "rtx-3090", "2xrtx-3070"])
@pytest.mark.parametrize("ctx", [2048, 16384, 65536])
def test_catalog_and_real_gguf_agree_on_fit(tmp_path, catalog, gpu, ctx):
    path = tmp_path / "llama-3.1-8b-q8_0.gguf"
    total = write_sparse_llama(path, catalog, "llama-3.1-8b", T.Q8_0)
    lm = read_model(str(path))
    assert lm.exact and lm.layout.total_bytes == total
    rig = rig_from_flags(catalog, [gpu], ram=64)
    from_file = evaluate(catalog, rig, lm, Options(ctx=ctx))
    from_catalog = evaluate(catalog, rig, catalog.models["llama-3.1-8b"], Options(quant="Q8_0", ctx=ctx))
    assert from_file.fits == from_catalog.fits
    assert from_file.runs == from_catalog.runs
    w_file = sum(d.weights_bytes for d in from_file.placement.devices) + from_file.placement.host.weights_bytes
    w_cat = sum(d.weights_bytes for d in from_catalog.placement.devices) + from_catalog.placement.host.weights_bytes
    assert abs(w_file / w_cat - 1) < 0.02
    assert from_file.model_source.startswith("gguf file")
