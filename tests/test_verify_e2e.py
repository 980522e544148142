"""One real end-to-end `advisor verify` on this machine's CPU: llama.cpp's own kernels (the prebuilt
llama-cpp-python wheel in ../shared/tools/llamacpp-oracle, its README) behind a stand-in `llama-bench` on
PATH, timing a small Llama-shaped GGUF the test writes with the gguf package; the advisor's CPU prediction
against the measured tokens/s, and the calibration taking effect on the next `check`.

Skipped only when the wheel is absent. The stand-in runs one thread: on a shared 2-core CI machine
llama.cpp's spinning worker threads otherwise contend with the other jobs, and the run stays a few seconds.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zipfile
from pathlib import Path

import pytest

WHEELS = sorted((Path(__file__).resolve().parents[2] / "shared" / "tools" / "llamacpp-oracle" / "wheel")
                .glob("llama_cpp_python-*.whl"))

SHAPE = {"n_vocab": 8192, "n_embd": 768, "n_layer": 4, "n_head": 12, "n_kv": 4, "n_ff": 2048}
"""A 40 MB Q8_0 Llama: big enough that a decode step reads more than a CPU's caches hold, small enough to
write and time in seconds."""

STAND_IN = r'''
"""A stand-in llama-bench: llama.cpp's kernels through llama-cpp-python's C API, timed as llama-bench times
them (tools/llama-bench/llama-bench.cpp: a warm-up run, then -r repetitions of pp on random tokens in one
batch and of tg one random token at a time, each from an empty cache), printed as llama-bench's -o json."""
import ctypes, json, os, random, sys, time, types

pkg = types.ModuleType("llama_cpp")  # the ctypes bindings only: the package's __init__ wants diskcache & co
pkg.__path__ = [os.path.join(os.environ["VERIFY_LLAMA_CPP_DIR"], "llama_cpp")]
sys.modules["llama_cpp"] = pkg
import llama_cpp.llama_cpp as L

args = sys.argv[1:]
def opt(name, default):
    return args[args.index(name) + 1] if name in args else default
n_prompt, n_gen, reps = int(opt("-p", "512")), int(opt("-n", "128")), int(opt("-r", "5"))
ngl, fa, threads = int(opt("-ngl", "99")), opt("-fa", "auto"), int(opt("-t", "1"))
quiet = L.llama_log_callback(lambda level, text, data: None)  # kept alive while llama.cpp holds it
L.llama_log_set(quiet, ctypes.c_void_p(0))
L.llama_backend_init()
mp = L.llama_model_default_params()
mp.n_gpu_layers = ngl
model = L.llama_model_load_from_file(opt("-m", "").encode(), mp)
if not model:
    sys.exit("main: error: failed to load model")
n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
cp = L.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch = n_prompt + n_gen, max(n_prompt, 1), min(max(n_prompt, 1), 512)
cp.n_threads = cp.n_threads_batch = threads
cp.flash_attn_type = {"on": 1, "1": 1, "off": 0, "0": 0}.get(fa, -1)
ctx = L.llama_init_from_model(model, cp)
rng = random.Random(0)

def decode(tokens):
    arr = (L.llama_token * len(tokens))(*tokens)
    if L.llama_decode(ctx, L.llama_batch_get_one(arr, len(tokens))) != 0:
        sys.exit("main: error: llama_decode failed")

def timed(kind):
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    t0 = time.perf_counter_ns()
    if kind == "pp":
        decode([rng.randrange(n_vocab) for _ in range(n_prompt)])
    else:
        for _ in range(n_gen):
            decode([rng.randrange(n_vocab)])
    L.llama_synchronize(ctx)
    return time.perf_counter_ns() - t0

rows = []
for kind, n_p, n_g in (("pp", n_prompt, 0), ("tg", 0, n_gen)):
    if n_p or n_g:
        timed(kind)
        ns = [timed(kind) for _ in range(reps)]
        ts = [(n_p or n_g) / (x / 1e9) for x in ns]
        rows.append({"build_commit": "llama-cpp-python", "cpu_info": os.environ.get("VERIFY_CPU", ""), "gpu_info": "",
                     "backends": "CPU", "model_filename": opt("-m", ""), "model_type": "llama ?B Q8_0",
                     "n_threads": threads, "type_k": "f16", "n_gpu_layers": ngl, "flash_attn": fa, "n_prompt": n_p,
                     "n_gen": n_g, "n_depth": 0, "avg_ns": sum(ns) // len(ns), "avg_ts": sum(ts) / len(ts),
                     "samples_ts": ts})
L.llama_free(ctx)
L.llama_model_free(model)
print(json.dumps(rows, indent=2))
'''


def write_gguf(path: Path, random: bool = True) -> None:
    """A Llama-architecture GGUF of SHAPE, Q8_0 matrices (random normal x 0.02, or zeros) and unit norms."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize

    s = SHAPE
    hd = s["n_embd"] // s["n_head"]
    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), "llama")
    w.add_name("verify-e2e")
    w.add_file_type(7)  # MOSTLY_Q8_0
    w.add_quantization_version(2)
    w.add_context_length(4096)
    w.add_embedding_length(s["n_embd"])
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_kv"])
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(s["n_vocab"])
    w.add_tokenizer_model("none")

    def matrix(name: str, rows: int, cols: int) -> None:
        a = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02 if random else np.zeros((rows, cols), np.float32)
        w.add_tensor(name, quantize(a, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)

    e, kv, ff = s["n_embd"], s["n_kv"] * hd, s["n_ff"]
    matrix("token_embd.weight", s["n_vocab"], e)
    w.add_tensor("output_norm.weight", np.ones(e, np.float32))
    matrix("output.weight", s["n_vocab"], e)
    for i in range(s["n_layer"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(e, np.float32))
        for name, rows, cols in (("attn_q", e, e), ("attn_k", kv, e), ("attn_v", kv, e), ("attn_output", e, e),
                                 ("ffn_gate", ff, e), ("ffn_up", ff, e), ("ffn_down", e, ff)):
            matrix(f"{b}{name}.weight", rows, cols)
        w.add_tensor(b + "ffn_norm.weight", np.ones(e, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def llama_cpp_dir(tmp_path_factory) -> Path:
    """The wheel's llama_cpp package (its ctypes bindings and shared libraries), unpacked."""
    if not WHEELS:
        pytest.skip("the llama-cpp-python wheel (../shared/tools/llamacpp-oracle/wheel) is absent")
    out = tmp_path_factory.mktemp("llama-cpp")
    with zipfile.ZipFile(WHEELS[-1]) as z:
        z.extractall(out, [n for n in z.namelist() if n.startswith("llama_cpp/") and "/server/" not in n])
    return out


def _main_json(capsys, *argv: str) -> dict:
    from advisor.cli import main

    code = main([*argv, "--json"])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return json.loads(out.out)


def test_cpu_prediction_against_llama_cpp_and_the_calibration_after(capsys, tmp_path, monkeypatch, llama_cpp_dir):
    pytest.importorskip("gguf")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    bench = bin_dir / "llama-bench"
    bench.write_text(f"#!{sys.executable}\n{STAND_IN}")
    bench.chmod(bench.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VERIFY_LLAMA_CPP_DIR", str(llama_cpp_dir))
    model = tmp_path / "verify-e2e-Q8_0.gguf"
    write_gguf(model)
    rig = tmp_path / "cpu-rig.toml"  # this machine as a CPU-only rig, whatever its probe finds
    rig.write_text('[rig]\nram_gib = 16\ncpu = "this CPU"\n')
    plain = _main_json(capsys, "check", str(model), "--rig", str(rig), "--prompt-tokens", "64")

    got = _main_json(capsys, "verify", str(model), "--rig", str(rig), "--prompt-tokens", "64", "--repetitions", "2")
    rows = {r["what"]: r for r in got["comparisons"]}
    tg, pp = rows["tg128"], rows["pp64"]
    with capsys.disabled():  # the numbers, for `pytest -s`
        print(f"\nCPU decode: predicted {tg['predicted']} tok/s, measured {tg['measured']:.1f} (x{tg['ratio']}); "
              f"prefill: predicted {pp['predicted']}, measured {pp['measured']:.1f} (x{pp['ratio']})")
    assert tg["predicted"] == plain["speed"]["decode_tokens_per_s"]
    assert pp["predicted"] == plain["speed"]["prefill_tokens_per_s"]
    # the plain CPU model within a factor of ten of llama.cpp itself (units, bytes per token, the RAM fraction)
    assert 0.1 < tg["ratio"] < 10, tg
    assert got["fit"]["held"] is True and got["stored"]["runs"] == 2

    after = _main_json(capsys, "check", str(model), "--rig", str(rig), "--prompt-tokens", "64")
    cal = after["speed"]["calibration"]
    assert (cal["device"], cal["backend"], cal["placement"], cal["runs"]) == ("cpu: this CPU", "llama.cpp/cpu",
                                                                             "CPU only", 1)
    decode = after["speed"]["decode_tokens_per_s"]
    assert abs(decode - tg["measured"]) <= abs(plain["speed"]["decode_tokens_per_s"] - tg["measured"])
    assert decode == pytest.approx(tg["measured"], rel=0.01, abs=0.11)
    assert after["speed"]["prefill_tokens_per_s"] == pytest.approx(pp["measured"], rel=0.01, abs=0.11)
    assert _main_json(capsys, "check", str(model), "--rig", str(rig), "--prompt-tokens", "64",
                      "--no-calibration")["speed"] == plain["speed"]
