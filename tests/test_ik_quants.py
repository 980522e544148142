"""ik_llama.cpp's own quant types (IQ2_K ... IQ6_K, IQ2_KS ... IQ5_KS, IQ1_KT ... IQ4_KT, the repacked
*_R4): a GGUF written here with those ggml type ids is sized exactly by the bounded reader, only
ik_llama.cpp runs it (mainline llama.cpp and Ollama refuse with one finding naming ik_llama.cpp), and
`advisor quants` lists them.

The byte oracle is written out here from ik_llama.cpp's sources (ikawrakow/ik_llama.cpp @ 8337e4cd), not
taken from advisor/modelfile/ggml_types.py: ggml/include/ggml.h enum ggml_type (the id), ggml/src/ggml.c
type_traits (blck_size, row_meta_size) and the static_asserts on the block structs in
ggml/src/ggml-common.h (bytes per block, QK_K = 256). A row of ne0 weights takes
row_meta + ne0 / block x bytes (ggml_row_size)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGUFWriter  # noqa: E402

from advisor.cli import main  # noqa: E402
from advisor.engine.check import evaluate  # noqa: E402
from advisor.engine.options import Options  # noqa: E402
from advisor.modelfile import read_model  # noqa: E402
from advisor.probe.flags import rig_from_flags  # noqa: E402

# id: (name, weights per block, bytes per block, bytes per row)
IK_TYPES = {
    137: ("IQ2_K", 256, 2 + 2 + 8 + 64, 0),          # block_iq2_k
    138: ("IQ3_K", 256, 2 + 4 + 8 + 64 + 32, 0),     # block_iq3_k
    139: ("IQ4_K", 256, 2 + 2 + 128 + 12, 0),        # block_iq4_k
    140: ("IQ5_K", 256, 2 + 2 + 128 + 32 + 12, 0),   # block_iq5_k
    141: ("IQ6_K", 256, 2 + 2 + 128 + 64 + 16, 0),   # block_iq6_k
    144: ("IQ4_KS", 256, 8 + 128, 4),                # block_iq4_ks, float row scale
    145: ("IQ2_KS", 256, 2 + 4 + 64, 2),             # block_iq2_ks, half row scale
    146: ("IQ4_KSS", 256, 32 * 4, 4),                # block_iq4_kss
    152: ("IQ5_KS", 256, 8 + 128 + 32, 4),           # block_iq5_ks
    153: ("IQ2_KT", 256, 64 + 4, 4),                 # block_iq2_kt
    154: ("IQ3_KT", 256, 64 + 32 + 4, 4),            # block_iq3_kt
    155: ("IQ4_KT", 256, 128, 4),                    # block_iq4_kt
    158: ("IQ1_KT", 256, 32 + 16 + 8, 4),            # block_iq1_kt
    339: ("IQ4_K_R4", 256, 2 + 2 + 128 + 12, 0),     # same bytes as IQ4_K, rows interleaved by 4
    344: ("IQ4_KS_R4", 256, 8 + 128, 4),
    219: ("IQ1_S_R4", 32, 24 // 4, 2),               # blocks of 32, block_iq1_s_r4 (24 B) per 4 rows
}
# llama_ftype ids (include/llama.h)
FTYPE = {"IQ4_KS": 145, "IQ2_KT": 151, "IQ4_K_R4": 340, "IQ6_K": 142}

H, FFN, VOCAB, LAYERS = 256, 512, 320, 2


def _bytes(shape_ne: tuple[int, ...], tid: int) -> int:
    _, block, size, meta = IK_TYPES[tid] if tid in IK_TYPES else (None, 1, 4, 0)  # F32 norms
    ne0, rows = shape_ne[0], int(np.prod(shape_ne[1:], dtype=np.int64)) if len(shape_ne) > 1 else 1
    return rows * (meta + ne0 // block * size)


def make_ik_gguf(path: Path, tid: int, ftype: int | None = None, experts: int = 0) -> dict[str, int]:
    """A llama (or MoE) model of real GGUF layout whose matrices are all of ggml type `tid`;
    returns {tensor: bytes} from the oracle above."""
    w = GGUFWriter(path, "qwen3moe" if experts else "llama")
    w.add_name("Tiny IK")
    w.add_block_count(LAYERS)
    w.add_embedding_length(H)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(4096)
    w.add_feed_forward_length(FFN)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(2)
        w.add_expert_feed_forward_length(256)
    if ftype is not None:
        w.add_file_type(ftype)
    w.add_token_list([f"tok{i}" for i in range(VOCAB)])
    out: dict[str, int] = {}

    def add(name: str, ne: tuple[int, ...], t: int) -> None:
        n = _bytes(ne, t)
        # raw bytes with the logical shape (numpy order: ne reversed) and the type id as ggml writes it
        w.add_tensor(name, np.zeros(n, np.int8), raw_shape=tuple(reversed(ne)), raw_dtype=t)
        out[name] = n

    add("token_embd.weight", (H, VOCAB), tid)
    for il in range(LAYERS):
        p = f"blk.{il}."
        add(p + "attn_norm.weight", (H,), 0)
        add(p + "attn_q.weight", (H, 4 * 64), tid)
        add(p + "attn_k.weight", (H, 2 * 64), tid)
        add(p + "attn_v.weight", (H, 2 * 64), tid)
        add(p + "attn_output.weight", (4 * 64, H), tid)
        add(p + "ffn_norm.weight", (H,), 0)
        if experts:
            add(p + "ffn_gate_inp.weight", (H, experts), 0)
            add(p + "ffn_gate_exps.weight", (H, 256, experts), tid)
            add(p + "ffn_up_exps.weight", (H, 256, experts), tid)
            add(p + "ffn_down_exps.weight", (256, H, experts), tid)
        else:
            add(p + "ffn_gate.weight", (H, FFN), tid)
            add(p + "ffn_up.weight", (H, FFN), tid)
            add(p + "ffn_down.weight", (FFN, H), tid)
    add("output_norm.weight", (H,), 0)
    add("output.weight", (H, VOCAB), tid)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


@pytest.mark.parametrize("tid", sorted(IK_TYPES), ids=lambda t: IK_TYPES[t][0])
def test_ik_types_are_sized_exactly(tmp_path: Path, tid: int) -> None:
    path = tmp_path / "ik.gguf"
    expected = make_ik_gguf(path, tid)
    lm = read_model(str(path))
    assert lm.layout.total_bytes == sum(expected.values())
    assert lm.layout.embed_bytes == expected["token_embd.weight"]
    assert lm.layout.layer_bytes == tuple(sum(b for n, b in expected.items() if n.startswith(f"blk.{il}."))
                                          for il in range(LAYERS))
    assert lm.quant.ggml_tables == ("ik_llama.cpp",) and lm.quant.runtimes == ("ik_llama.cpp",)
    assert lm.quant.kernel


def test_row_scales_count_once_per_row(tmp_path: Path) -> None:
    # IQ4_KS: 16 blocks of 136 bytes + a 4-byte float per 4096-wide row (not per block)
    path = tmp_path / "ik.gguf"
    w = GGUFWriter(path, "llama")
    w.add_tensor("blk.0.attn_q.weight", np.zeros(3 * (4 + 16 * 136), np.int8), raw_shape=(3, 4096), raw_dtype=144)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from advisor.modelfile.gguf_file import read_gguf

    (t,) = read_gguf(path).tensors
    assert (t.dtype, t.n_bytes) == ("IQ4_KS", 3 * 2180)


@pytest.mark.parametrize("name, ftype", sorted(FTYPE.items()))
def test_ik_file_type_names_the_quant(tmp_path: Path, name: str, ftype: int) -> None:
    tid = {"IQ4_KS": 144, "IQ2_KT": 153, "IQ4_K_R4": 339, "IQ6_K": 141}[name]
    make_ik_gguf(tmp_path / "m.gguf", tid, ftype=ftype)
    assert read_model(str(tmp_path / "m.gguf")).quant.id == name


def _check(catalog, path: Path, runtime: str):
    rig = rig_from_flags(catalog, ["rtx-3090"], ram=64)
    return evaluate(catalog, rig, read_model(str(path)), Options(runtime=runtime, ctx=4096))


def test_mainline_refuses_an_ik_file_and_names_ik_llama(catalog, tmp_path: Path) -> None:
    make_ik_gguf(tmp_path / "m.gguf", 144, ftype=145, experts=8)
    for rt in ("llama.cpp", "ollama"):
        r = _check(catalog, tmp_path / "m.gguf", rt)
        assert not r.placement.runs
        errors = [f for f in r.findings if f.severity == "error"]
        assert [f.code for f in errors] == ["CMP001"]
        assert "IQ4_KS" in errors[0].message and "--runtime ik_llama.cpp" in errors[0].message
    ok = _check(catalog, tmp_path / "m.gguf", "ik_llama.cpp")
    assert ok.placement.runs and ok.placement.fits and not ok.refusal
    assert ok.quant.id == "IQ4_KS"


def test_catalog_quants_run_only_on_ik_llama(catalog) -> None:
    rig = rig_from_flags(catalog, ["rtx-3090"], ram=64)
    from advisor.commands.args import resolve_model

    model = resolve_model(catalog, "qwen3-30b-a3b")
    for q in ("IQ4_KS", "IQ2_KT", "IQ4_K_R4", "IQ6_K"):
        refused = evaluate(catalog, rig, model, Options(runtime="llama.cpp", quant=q, ctx=4096))
        assert refused.refusal and "ik_llama.cpp" in refused.refusal and not refused.placement.runs
        ran = evaluate(catalog, rig, model, Options(runtime="ik_llama.cpp", quant=q, ctx=4096))
        assert ran.placement.runs and not ran.refusal


def test_mainline_only_types_are_refused_by_ik_llama(catalog) -> None:
    from advisor.catalog.types import QuantSpec

    tq = QuantSpec(id="TQ2_0", format="gguf", bits_per_weight=2.06, bpw_basis="file", runtimes=("llama.cpp",),
                   ggml_tables=("llama.cpp",))
    assert catalog.runtimes["llama.cpp"].loads(tq) and catalog.runtimes["ollama"].loads(tq)
    assert not catalog.runtimes["ik_llama.cpp"].loads(tq)


def test_cmd_with_an_ik_quant_runs_ik_llama_server(catalog) -> None:
    from advisor.cli import build_parser
    from advisor.commands.args import command_inputs, rig_from_args

    args = build_parser("check").parse_args(["check", "--cmd", "llama-server -m qwen3-30b-a3b-IQ4_KS.gguf -ngl 99",
                                             "--gpu", "rtx-3090"])
    _, options = command_inputs(catalog, args, rig_from_args(args, catalog))
    assert options.runtime == "ik_llama.cpp" and options.quant == "IQ4_KS"


def test_quants_lists_the_ik_types(capsys) -> None:
    assert main(["quants", "--json"]) == 0
    rows = {q["id"]: q for q in json.loads(capsys.readouterr().out)}
    for name in ("IQ2_K", "IQ3_K", "IQ4_K", "IQ5_K", "IQ6_K", "IQ2_KS", "IQ4_KS", "IQ4_KSS", "IQ5_KS",
                 "IQ1_KT", "IQ2_KT", "IQ3_KT", "IQ4_KT"):
        assert rows[name]["runtimes"] == ["ik_llama.cpp"], name
        assert rows[name]["bpw_basis"] and rows[name]["quality_basis"]
    assert "IQ4_KS_R4" in rows["IQ4_KS"]["aliases"]
    # whole-file bits are above the type's own block bits (the Q5_K/Q6_K output and row scales add to them)
    block = {k: v[2] * 8 / v[1] for k, v in ((n, (n, b, s)) for n, b, s, _ in IK_TYPES.values())}
    for name in ("IQ2_K", "IQ4_KS", "IQ5_KS", "IQ2_KT"):
        assert block[name] < rows[name]["bits_per_weight"] < block[name] + 0.3
    assert rows["IQ4_KS"]["ppl_delta_pct"] == 2.68
    assert main(["quants", "IQ4_KS"]) == 0
    assert "ik_llama.cpp" in capsys.readouterr().out
