"""`python -m sglang.launch_server`: the command an answer with --runtime sglang carries, and
`--cmd "python -m sglang.launch_server ..."` read back.

The launcher is data (rules/launch.toml [launcher.sglang]); these tests feed each emitted command back
through --cmd and ask for the same placement and serving answer."""

from __future__ import annotations

import pytest

from tests.test_launch import _answer
from tests.test_launch_vllm import assert_serving_round_trip

ROUND_TRIPS = [
    # one GPU, the default fraction, a context shorter than the model's
    ("llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", "sglang", "--concurrency", "64"),
    # AWQ over two consumer cards (tensor parallel), a workload that queues
    ("qwen3-32b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "sglang", "--concurrency", "16"),
    # every SGLang option at once
    ("llama-3.1-70b", "--quant", "fp8", "--gpu", "4xrtx-3090", "--runtime", "sglang", "--kv-cache", "fp8",
     "--mem-fraction-static", "0.9", "--max-running-requests", "32", "--disable-cuda-graph", "--ctx", "16384"),
    # four GPUs per layer on 24 GB cards (the default fraction's larger CUDA-graph batch)
    ("qwen3-14b", "--quant", "BF16", "--gpu", "4xrtx-4090", "--runtime", "sglang", "--ctx", "40960"),
    # unquantized, the model's whole context (no --context-length written)
    ("llama-3.1-8b", "--quant", "BF16", "--gpu", "h100-sxm", "--runtime", "sglang", "--ctx", "131072"),
]


@pytest.mark.parametrize("argv", ROUND_TRIPS, ids=[" ".join(a) for a in ROUND_TRIPS])
def test_emitted_sglang_command_round_trips(catalog, argv):
    assert_serving_round_trip(catalog, argv, "python -m sglang.launch_server ", "sglang", "sglang")


def test_the_command_uses_sglangs_names(catalog):
    r = _answer(catalog, "qwen3-32b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "sglang",
                "--ctx", "32768", "--kv-cache", "fp8", "--mem-fraction-static", "0.9",
                "--max-running-requests", "32", "--disable-cuda-graph")
    # AWQ is a checkpoint (issue 27: `--quantization awq` on the BF16 repo does not load): the AWQ repo, the
    # method read from its config
    assert r.launch.command == ("python -m sglang.launch_server --model-path Qwen/Qwen3-32B-AWQ "
                                "--tp 2 --context-length 32768 --mem-fraction-static 0.9 "
                                "--kv-cache-dtype fp8_e5m2 --max-running-requests 32 --disable-cuda-graph")
    plain = _answer(catalog, "llama-3.1-8b", "--quant", "BF16", "--gpu", "h100-sxm", "--runtime", "sglang",
                    "--ctx", "131072")
    assert plain.launch.command == "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B"


def test_a_written_sglang_command_reads_back(catalog):
    cmd = ("python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B-AWQ --tp-size 2 --context-length 32768 "
           "--mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 --max-running-requests 48 "
           "--chunked-prefill-size 4096 --host 0.0.0.0 --port 30000 --trust-remote-code --dp-size 2 --frobnicate 3")
    r = _answer(catalog, "--cmd", cmd, "--gpu", "2xrtx-3090")
    o = r.options
    assert r.model.id == "qwen3-32b" and r.quant.id == "awq" and r.runtime.id == "sglang"
    assert (o.ctx, o.tensor_parallel, o.memory_fraction, o.kv_type, o.max_num_seqs, o.max_num_batched_tokens) == \
        (32768, 2, 0.85, "fp8", 48, 4096)
    assert r.serving is not None and r.serving.memory_fraction == 0.85 and r.serving.max_num_seqs == 48
    notes = " ".join(f.message for f in r.findings if f.code == "CMD001")
    assert "--frobnicate 3" in notes and "--dp-size" in notes
    assert "--port" not in notes and "--trust-remote-code" not in notes


def test_the_default_fraction_depends_on_the_chunk_read_back(catalog):
    """Without --mem-fraction-static SGLang derives it; a larger --chunked-prefill-size reserves more for
    activations, so the pool shrinks (server_args._handle_gpu_memory_settings)."""
    base = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --context-length 8192"
    small = _answer(catalog, "--cmd", base, "--gpu", "rtx-4090")
    big = _answer(catalog, "--cmd", base + " --chunked-prefill-size 8192", "--gpu", "rtx-4090")
    assert small.serving.memory_fraction > big.serving.memory_fraction
    assert small.serving.kv_cache_tokens > big.serving.kv_cache_tokens


def test_sglang_names_on_the_command_line(catalog):
    """check takes SGLang's own option names: --chunked-prefill-size (it also moves the default fraction),
    --tp, --context-length, and they are written back as SGLang spells them."""
    r = _answer(catalog, "llama-3.1-8b", "--quant", "BF16", "--gpu", "2xrtx-4090", "--runtime", "sglang",
                "--tp", "2", "--context-length", "16384", "--chunked-prefill-size", "4096")
    assert (r.options.tensor_parallel, r.options.ctx, r.options.max_num_batched_tokens) == (2, 16384, 4096)
    assert r.launch.command == ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp 2 "
                                "--context-length 16384 --chunked-prefill-size 4096")
    # 24,564 MiB card, tp 2: 512 + 4096 x 1.5 + 24 x 2 + 2 x 128 = 6,960 MiB reserved
    assert r.serving.memory_fraction == round((24576 - 6960) / 24576, 3)


def test_what_would_make_it_fit_in_sglangs_names(catalog):
    """70B AWQ on two 3090s at 8k: SGLang would start but refuse the request; the remedies are spelt as
    SGLang takes them (an fp8 cache is fp8_e5m2, not vLLM's bare fp8)."""
    r = _answer(catalog, "llama-3.1-70b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "sglang")
    assert r.serving is not None and not r.serving.starts
    options = [m.option for m in r.serving.remedies]
    assert "--kv-cache-dtype fp8_e5m2" in options and any(o.startswith("--context-length ") for o in options)
    assert any(o.startswith("--mem-fraction-static ") for o in options)
    msg = next(f.message for f in r.findings if f.code == "SRV002")
    assert "would start but refuse one 8,192-token request" in msg
