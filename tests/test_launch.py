"""Command lines in and out (advisor/engine/launch.py, rules/launch.toml): every answer carries the
command that realises it, and `--cmd` with that command gives the same placement."""

from __future__ import annotations

import json

import pytest

from advisor.cli import build_parser
from advisor.commands.args import model_inputs, rig_from_args
from advisor.engine.check import evaluate
from advisor.engine.launch import expert_layers_from_overrides, parse_command, quant_in_name
from advisor.errors import AdvisorError


def _args(*argv: str):
    return build_parser("check").parse_args(["check", *argv])


def _answer(catalog, *argv: str):
    args = _args(*argv)
    rig = rig_from_args(args, catalog)
    return evaluate(catalog, rig, *model_inputs(catalog, args, rig))


def _rig_flags(argv: tuple[str, ...]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--gpu", "--ram", "--pcie"):
            out += argv[i:i + 2]
            i += 2
        elif argv[i] == "--nvlink":
            out.append("--nvlink")
            i += 1
        else:
            i += 1
    return out


ROUND_TRIPS = [
    ("llama-3.1-8b", "--gpu", "rtx-3090"),
    ("llama-3.1-70b", "--gpu", "2xrtx-3090", "--quant", "Q4_K_M", "--ctx", "32768"),
    ("llama-3.1-70b", "--gpu", "rtx-3090", "--quant", "Q4_K_M", "--ram", "64"),
    ("qwen3-235b-a22b", "--gpu", "4xrtx-3090", "--quant", "Q4_K_M", "--ram", "128"),
    ("gpt-oss-120b", "--gpu", "2xrtx-3090", "--quant", "MXFP4", "--ram", "64"),
    ("qwen3-30b-a3b", "--gpu", "rtx-3060-12gb", "--ram", "64"),
    ("qwen3-32b", "--gpu", "rtx-4090", "--ctx", "32768", "--kv-cache", "q8_0"),
    ("gemma-3-27b", "--gpu", "rtx-3090", "--concurrency", "4", "--ctx", "4096"),
    ("llama-3.1-8b", "--gpu", "2xrtx-3090", "--split", "tensor", "--quant", "Q8_0"),
    ("llama-3.1-8b", "--gpu", "rtx-4090", "--flash-attn", "off", "--ubatch", "1024", "--quant", "Q6_K"),
    ("mistral-7b", "--ram", "32", "--quant", "Q4_K_M", "--gpu", "rtx-3060-12gb", "--ctx", "16384"),
    ("gpt-oss-120b", "--gpu", "h100-sxm", "--ctx", "131072"),
]


@pytest.mark.parametrize("argv", ROUND_TRIPS, ids=[" ".join(a) for a in ROUND_TRIPS])
def test_emitted_command_round_trips(catalog, argv):
    first = _answer(catalog, *argv)
    assert first.launch is not None and first.launch.command.startswith("llama-server ")
    again = _answer(catalog, "--cmd", first.launch.command, *_rig_flags(argv))
    assert again.quant.id == first.quant.id and again.context_tokens == first.context_tokens
    a, b = first.placement, again.placement
    assert (a.strategy, a.gpu_layers, a.cpu_expert_set) == (b.strategy, b.gpu_layers, b.cpu_expert_set)
    assert [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes) for d in a.devices] == \
        [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes) for d in b.devices]
    assert (a.host.weights_bytes, a.host.kv_cache_bytes) == (b.host.weights_bytes, b.host.kv_cache_bytes)
    assert again.launch is not None and again.launch.command == first.launch.command


def test_the_issue_command_answers_for_exactly_that_configuration(catalog):
    cmd = ("llama-server -m qwen3-30b-a3b-Q4_K_M.gguf -ngl 99 -ts 3,1 -ot exps=CPU -c 32768 -fa on "
           "-ctk q8_0 -ctv q8_0 -np 2")
    r = _answer(catalog, "--cmd", cmd, "--gpu", "2xrtx-3090", "--ram", "64")
    o = r.options
    assert (o.quant, o.ctx, o.concurrency, o.kv_type, o.flash_attn, o.tensor_split) == \
        ("Q4_K_M", 16384, 2, "q8_0", "on", (3.0, 1.0))
    assert r.placement.strategy == "moe_offload" and r.placement.cpu_expert_layers == r.model.layers
    assert all(d.expert_bytes == 0 for d in r.placement.devices)
    gpu0, gpu1 = r.placement.devices
    assert gpu0.layers > 2 * gpu1.layers  # -ts 3,1
    assert r.kv_cache_bytes == 48 * 2 * 4 * 128 * 32768 * 34 // 32  # 48 layers, K+V, 4 KV heads x 128, q8_0


def test_unknown_and_unmodelled_flags_are_named(catalog):
    r = _answer(catalog, "--cmd", "llama-server -m llama-3.1-8b-Q4_K_M.gguf --frobnicate 3 --jinja -nkvo",
                "--gpu", "rtx-3090")
    notes = " ".join(f.message for f in r.findings if f.code == "CMD001")
    assert "--frobnicate 3" in notes and "-nkvo" in notes and "--jinja" not in notes


def test_llama_bench_reads_prompt_and_generation(catalog):
    r = _answer(catalog, "--cmd", "llama-bench -m llama-3.1-8b-Q4_0.gguf -p 512,1024 -n 128 -fa 1 -ngl 99",
                "--gpu", "rtx-4090")
    assert r.options.prompt_tokens == 512 and r.context_tokens == 640 and r.options.flash_attn == "on"
    assert any("sweep" in n for n in r.options.command_notes)


def test_ik_llama_flags_pick_the_ik_runtime(catalog):
    r = _answer(catalog, "--cmd", "llama-server -m deepseek-r1-Q2_K.gguf -fmoe -mla 3 -rtr -amb 512 -ot exps=CPU "
                                  "-ngl 99 -c 16384", "--gpu", "rtx-4090", "--ram", "512")
    assert r.runtime.id == "ik_llama.cpp"
    assert any("-amb" in n for n in r.options.command_notes)
    assert not any("unknown" in n for n in r.options.command_notes)


def test_llama_cli_and_llama_server_share_the_memory_flags(catalog):
    a = _answer(catalog, "--cmd", "llama-cli -m qwen3-8b-Q8_0.gguf -c 8192 -ngl 20 -p 'hello there'",
                "--gpu", "rtx-3060-12gb", "--ram", "32")
    assert a.placement.strategy == "cpu_offload" and a.placement.gpu_layers == 20
    assert not a.options.command_notes


def test_n_cpu_moe_keeps_the_first_layers_experts_in_ram(catalog):
    r = _answer(catalog, "--cmd", "llama-server -m qwen3-30b-a3b-Q4_K_M.gguf -ngl 99 --n-cpu-moe 10 -c 8192",
                "--gpu", "rtx-3090")
    assert r.placement.cpu_expert_set == tuple(range(10))
    assert "--n-cpu-moe 10" in r.launch.command


def test_override_patterns_match_like_llama_cpp():
    assert expert_layers_from_overrides([r"blk\.(1[0-2])\.ffn_.*_exps\.=CPU"], 20) == (10, 11, 12)
    assert expert_layers_from_overrides(["exps=CPU"], 3) == (0, 1, 2)
    assert expert_layers_from_overrides([r"blk\.0\.=CUDA0,exps=CPU"], 3) == (1, 2)  # first match wins


def test_a_backtracking_pattern_is_matched_in_linear_time():
    # Python's re needs over 20 s for one tensor name with this pattern (exponential backtracking); RE2 is
    # linear, so 94 layers x 3 expert tensors answer at once. Run aside so a regression fails, not hangs.
    import threading

    out = []
    t = threading.Thread(target=lambda: out.append(
        expert_layers_from_overrides([r"(.*)*(.*)*(.*)*(a+)+$=CPU"], 94)), daemon=True)
    t.start()
    t.join(10)
    assert out == [()]


def test_a_pattern_re2_cannot_read_is_one_line(run_cli):
    r = run_cli("check", "--cmd", r"llama-server -m qwen3-30b-a3b-Q4_K_M.gguf -ot '(e)\1=CPU'", "--gpu", "rtx-3090")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "regular expression" in r.stderr


def test_quant_is_read_from_the_file_name():
    assert quant_in_name("Qwen3-235B-A22B-Q4_K_M-00001-of-00003.gguf", ["Q4_K_M", "Q4_K_S", "Q4_0"]) == \
        ("Qwen3-235B-A22B", "Q4_K_M")
    assert quant_in_name("gpt-oss-120b-mxfp4.gguf", ["MXFP4"]) == ("gpt-oss-120b", "MXFP4")
    assert quant_in_name("model.gguf", ["Q4_0"]) == ("model", None)


@pytest.mark.parametrize("cmd,needle", [
    ("llama-server -m 'x.gguf", "quotes"),
    ("vim -m x.gguf", "not a program"),
    ("llama-server -m x.gguf -c", "needs a value"),
    ("llama-server -m x.gguf -ctk q8_0 -ctv f16", "differ"),
    ("llama-server -m x.gguf -ot '(=CPU'", "regular expression"),
    ("", "empty"),
])
def test_bad_command_lines_are_one_clear_error(catalog, cmd, needle):
    with pytest.raises(AdvisorError, match=needle):
        if not cmd or "x.gguf" not in cmd or "vim" in cmd or "'x" in cmd:
            parse_command(catalog.rules.launch, cmd)
        else:
            _answer(catalog, "llama-3.1-8b", "--cmd", cmd, "--gpu", "rtx-3090")


def test_ollama_answers_carry_a_modelfile(catalog, run_cli):
    r = run_cli("check", "qwen3-8b", "--gpu", "rtx-3090", "--runtime", "ollama", "--kv-cache", "q8_0", "--json")
    d = json.loads(r.stdout)
    assert d["launch"]["runtime"] == "ollama" and "PARAMETER num_ctx 8192" in d["launch"]["modelfile"]
    assert d["launch"]["env"] == {"OLLAMA_NUM_PARALLEL": "1", "OLLAMA_FLASH_ATTENTION": "1",
                                  "OLLAMA_KV_CACHE_TYPE": "q8_0"}


def test_cli_cmd_exit_codes(run_cli):
    ok = run_cli("check", "--cmd", "llama-server -m llama-3.1-8b-Q4_K_M.gguf -c 8192 -np 1", "--gpu", "rtx-3090",
                 "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["launch"]["command"].startswith("llama-server -m llama-3.1-8b-Q4_K_M.gguf")
    bad = run_cli("check", "--cmd", "llama-server -m llama-3.1-8b-Q4_K_M.gguf -c", "--gpu", "rtx-3090")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
