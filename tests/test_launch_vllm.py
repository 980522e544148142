"""`vllm serve`: the command an answer with --runtime vllm carries, and `--cmd "vllm serve ..."` read back.

The launcher is data (rules/launch.toml [launcher.vllm-serve]: subcommand, positional model, flag values);
these tests feed each emitted command back through --cmd and ask for the same placement and serving answer."""

from __future__ import annotations

import pytest

from tests.test_launch import _answer

# Workload options a server command line does not carry: passed alongside --cmd, as the rig is.
_PASS = ("--gpu", "--ram", "--pcie", "--concurrency", "--prompt-tokens")


def _passed(argv: tuple[str, ...]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _PASS:
            out += argv[i:i + 2]
            i += 2
        else:
            i += 1
    return out


ROUND_TRIPS = [
    # the three issue-15 examples
    ("llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", "vllm", "--concurrency", "64"),
    ("qwen3-32b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--concurrency", "16"),
    ("qwen2.5-32b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--split", "tensor",
     "--prompt-tokens", "16384", "--ctx", "32768", "--concurrency", "8"),
    # every serving option at once
    ("llama-3.1-70b", "--quant", "fp8", "--gpu", "4xrtx-3090", "--runtime", "vllm", "--kv-cache", "fp8",
     "--gpu-memory-utilization", "0.95", "--max-num-seqs", "32", "--enforce-eager", "--ctx", "16384"),
    # pipeline stages, and tensor x pipeline
    ("llama-3.1-70b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--split", "layer",
     "--ctx", "4096"),
    ("llama-3.1-70b", "--quant", "awq", "--gpu", "4xrtx-3090", "--runtime", "vllm",
     "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"),
    # unquantized, one GPU, the model's whole context (no --max-model-len written)
    ("llama-3.1-8b", "--quant", "BF16", "--gpu", "h100-sxm", "--runtime", "vllm", "--ctx", "131072"),
    # a listed GPTQ checkpoint (its config names gptq: no --quantization), a batched-token budget
    ("llama-3.1-8b", "--quant", "gptq", "--gpu", "rtx-4090", "--runtime", "vllm", "--max-num-batched-tokens", "4096"),
    # FP8 made at load from the 16-bit checkpoint (no FP8 repo listed for Qwen3 4B)
    ("qwen3-4b", "--quant", "fp8", "--gpu", "rtx-4090", "--runtime", "vllm", "--ctx", "16384"),
]


def assert_serving_round_trip(catalog, argv, prefix: str, launcher: str, runtime: str) -> None:
    """The emitted command, fed back through --cmd, gives the same placement, serving answer and command
    (shared by the paged runtimes' launchers: vLLM here, SGLang in test_launch_sglang)."""
    first = _answer(catalog, *argv)
    assert first.launch is not None and first.launch.command.startswith(prefix)
    assert first.launch.launcher == launcher and first.runtime.id == runtime
    again = _answer(catalog, "--cmd", first.launch.command, *_passed(argv))
    assert again.runtime.id == runtime
    assert again.quant.id == first.quant.id and again.context_tokens == first.context_tokens
    assert again.options.kv_type == first.options.kv_type
    a, b = first.placement, again.placement
    assert (a.strategy, a.runs, a.gpu_layers) == (b.strategy, b.runs, b.gpu_layers)
    assert [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes, d.capacity_bytes) for d in a.devices] == \
        [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes, d.capacity_bytes) for d in b.devices]
    s, t = first.serving, again.serving
    assert s is not None and t is not None
    assert (s.kv_cache_tokens, s.max_concurrency, s.running, s.queued, s.max_num_seqs, s.memory_fraction) == \
        (t.kv_cache_tokens, t.max_concurrency, t.running, t.queued, t.max_num_seqs, t.memory_fraction)
    assert again.launch is not None and again.launch.command == first.launch.command


@pytest.mark.parametrize("argv", ROUND_TRIPS, ids=[" ".join(a) for a in ROUND_TRIPS])
def test_emitted_vllm_command_round_trips(catalog, argv):
    assert_serving_round_trip(catalog, argv, "vllm serve ", "vllm-serve", "vllm")


def test_the_command_names_what_the_answer_depends_on(catalog):
    r = _answer(catalog, "qwen3-32b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "vllm",
                "--ctx", "32768", "--kv-cache", "fp8", "--gpu-memory-utilization", "0.95", "--max-num-seqs", "32")
    assert r.launch.command == ("vllm serve Qwen/Qwen3-32B-AWQ --tensor-parallel-size 2 "
                                "--max-model-len 32768 --gpu-memory-utilization 0.95 --kv-cache-dtype fp8 "
                                "--max-num-seqs 32")
    plain = _answer(catalog, "llama-3.1-8b", "--quant", "BF16", "--gpu", "h100-sxm", "--runtime", "vllm",
                    "--ctx", "131072")
    assert plain.launch.command == "vllm serve meta-llama/Llama-3.1-8B"  # vLLM's defaults say the rest


def test_a_vllm_command_reads_back_with_the_model_as_positional(catalog):
    cmd = ("vllm serve Qwen/Qwen3-32B-AWQ --tensor-parallel-size 2 --max-model-len 32768 "
           "--gpu-memory-utilization 0.95 --kv-cache-dtype fp8_e4m3 --max-num-seqs 32 --port 8000 "
           "--trust-remote-code --frobnicate 3 --enable-expert-parallel")
    r = _answer(catalog, "--cmd", cmd, "--gpu", "2xrtx-3090")
    o = r.options
    assert r.model.id == "qwen3-32b" and r.quant.id == "awq" and r.runtime.id == "vllm"
    assert (o.ctx, o.tensor_parallel, o.memory_fraction, o.kv_type, o.max_num_seqs) == \
        (32768, 2, 0.95, "fp8", 32)
    assert r.serving is not None and r.serving.memory_fraction == 0.95
    notes = " ".join(f.message for f in r.findings if f.code == "CMD001")
    assert "--frobnicate 3" in notes and "--enable-expert-parallel" in notes
    assert "--port" not in notes and "--trust-remote-code" not in notes


def test_vllm_without_serve_or_with_a_value_it_does_not_model(catalog):
    from advisor.errors import AdvisorError

    with pytest.raises(AdvisorError, match="vllm serve"):
        _answer(catalog, "--cmd", "vllm bench latency --model Qwen/Qwen3-32B", "--gpu", "rtx-4090")
    r = _answer(catalog, "--cmd", "vllm serve Qwen/Qwen3-32B --quantization marlin_x", "--gpu", "h100-sxm")
    assert r.quant.id == "BF16"
    assert any("--quantization marlin_x" in f.message for f in r.findings if f.code == "CMD001")


def test_every_listed_checkpoint_is_a_catalog_model_and_quant_with_a_source(catalog):
    repos = catalog.rules.checkpoints.repo
    assert len(repos) >= 15
    for repo, c in repos.items():
        assert repo.count("/") == 1 and " " not in repo, repo
        assert c.model in catalog.models and c.quant in catalog.quants, repo
        assert c.source.startswith(f"https://huggingface.co/{repo}"), repo
    pairs = [(c.model, c.quant) for c in repos.values() if c.offered]
    assert len(pairs) == len(set(pairs))  # one checkpoint per model and quant (a repo recorded only to read a --cmd
    # line that names it, offered = false, is named by no answer): the command is not a guess


def test_a_quantized_answer_names_its_checkpoint_and_leaves_the_method_to_vllm(catalog):
    r = _answer(catalog, "llama-3.1-70b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--ctx", "4096")
    assert r.launch.command.startswith("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 ")
    assert "--quantization" not in r.launch.command  # -q awq would force the non-Marlin AWQ kernel
    said = [f for f in r.findings if f.code == "LCH001"]
    assert len(said) == 1 and said[0].severity == "info" and "huggingface.co/hugging-quants" in said[0].message
    back = _answer(catalog, "--cmd", r.launch.command, "--gpu", "2xrtx-3090")
    assert (back.model.id, back.quant.id) == ("llama-3.1-70b", "awq")


def test_fp8_without_a_checkpoint_is_made_at_load_and_awq_without_one_must_be_supplied(catalog):
    fp8 = _answer(catalog, "qwen3-4b", "--quant", "fp8", "--gpu", "rtx-4090", "--runtime", "vllm")
    assert fp8.launch.command.startswith("vllm serve Qwen/Qwen3-4B --quantization fp8")
    assert [f.severity for f in fp8.findings if f.code == "LCH001"] == ["info"]
    awq = _answer(catalog, "qwen3-4b", "--quant", "awq", "--gpu", "rtx-4090", "--runtime", "vllm")
    said = [f for f in awq.findings if f.code == "LCH001"]
    assert len(said) == 1 and said[0].severity == "warning" and "Qwen/Qwen3-4B" in said[0].message
    dense = _answer(catalog, "qwen3-4b", "--quant", "BF16", "--gpu", "rtx-4090", "--runtime", "vllm")
    assert not [f for f in dense.findings if f.code == "LCH001"]
    llama = _answer(catalog, "qwen3-4b", "--quant", "Q4_K_M", "--gpu", "rtx-4090")
    assert not [f for f in llama.findings if f.code == "LCH001"]  # llama.cpp runs the GGUF file it names


def test_max_num_batched_tokens_is_an_option_and_reads_back(catalog):
    r = _answer(catalog, "qwen3-8b", "--gpu", "rtx-4090", "--runtime", "vllm", "--max-num-batched-tokens", "512",
                "--ctx", "8192")
    small = r.placement.devices[0].overhead_bytes
    big = _answer(catalog, "qwen3-8b", "--gpu", "rtx-4090", "--runtime", "vllm", "--max-num-batched-tokens", "8192",
                  "--ctx", "8192").placement.devices[0].overhead_bytes
    assert small < big  # the profile batch is the activation peak
    assert "--max-num-batched-tokens 512" in r.launch.command
    back = _answer(catalog, "--cmd", r.launch.command, "--gpu", "rtx-4090")
    assert back.options.max_num_batched_tokens == 512
