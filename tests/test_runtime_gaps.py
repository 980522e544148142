"""Runtime refusals and wording as data (issue 16, the gaps stop 23 noticed): what a user typed is what an error
names, a runtime's refusals say why with their source, and "try instead" names only runtimes that would run."""

from __future__ import annotations

import pytest


def _one_line_exit_2(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


# --- bad input names the flag as typed, and the runtime's own model flag ------------------------------------

@pytest.mark.parametrize("flag,value,other", [
    ("--mem-fraction-static", "2", "--gpu-memory-utilization"),
    ("--gpu-memory-utilization", "2", "--mem-fraction-static"),
    ("--max-running-requests", "0", "--max-num-seqs"),
    ("--tp-size", "0", "--tensor-parallel-size"),
    ("--chunked-prefill-size", "abc", "--max-num-batched-tokens"),
    ("--context-length", "-5", "--ctx"),
])
def test_an_aliased_option_is_named_as_typed(run_cli, flag, value, other):
    line = _one_line_exit_2(run_cli("check", "llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", "sglang", flag, value))
    assert line.startswith(f"advisor: {flag} ") and other not in line


def test_the_equals_form_is_named_too(run_cli):
    line = _one_line_exit_2(run_cli("check", "llama-3.1-8b", "--gpu", "h100-sxm", "--mem-fraction-static=1.5"))
    assert "--mem-fraction-static '1.5' is out of range" in line


@pytest.mark.parametrize("cmd,says,not_says", [
    ("python -m sglang.launch_server --tp-size 2", "--model-path REPO", "-hf"),
    ("vllm serve --tensor-parallel-size 2", "vllm serve REPO or --model REPO", "-hf"),
    ("llama-server -c 4096", "-m FILE or -hf REPO", "--model-path"),
    ("python main.py --max-seq-len 4096", "--model-name FOLDER", "-hf"),
])
def test_a_command_without_a_model_names_its_own_model_flag(run_cli, cmd, says, not_says):
    line = _one_line_exit_2(run_cli("check", "--cmd", cmd, "--gpu", "2xh100-sxm"))
    assert f"--cmd names no model ({says})" in line and not_says not in line


# --- --concurrency on a paged runtime: how many run at once, and that the rest queue -------------------------

def test_concurrency_says_how_many_run_at_once_and_that_the_rest_queue(run_cli):
    import json

    args = ("check", "qwen2.5-32b", "--quant", "awq", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--split", "tensor",
            "--prompt-tokens", "16384", "--ctx", "32768", "--concurrency", "8")
    serving = json.loads(run_cli(*args, "--json").stdout)["serving"]
    running, queued = serving["running"], serving["queued"]
    assert serving["requested"] == 8 and 1 <= running < 8 and running + queued == 8
    text = run_cli(*args).stdout
    said = f"8 streams requested: {running} at once, {queued} queue"
    context = next(line for line in text.splitlines() if line.strip().startswith("context "))
    decode = next(line for line in text.splitlines() if line.strip().startswith("decode, 8"))
    assert context.rstrip().endswith(said) and said in decode
    assert not any(line.split("  ")[0].strip() == "decode, 8 streams" for line in text.splitlines())  # not "all 8"


def test_concurrency_that_all_fits_still_says_n_streams(run_cli):
    text = run_cli("check", "llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", "vllm", "--concurrency", "8").stdout
    assert "8 streams" in text and "queue" not in text.split("Serving")[0]
