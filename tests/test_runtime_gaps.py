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


# --- "try instead" names only runtimes that would run -----------------------------------------------------

ALT_RIGS = ["radeon-780m-32gb", "mi50-32gb", "mi60", "mi300x", "rx-7900-xtx", "tesla-p40", "rtx-3090", "h100-sxm",
            "arc-b580", "m4-max-128gb"]
ALT_MODELS = ["llama-3.1-8b", "llama-4-scout", "deepseek-v3", "kimi-k2", "glm-4.5-air", "gpt-oss-20b",
              "qwen3-next-80b-a3b", "granite-4.0-h-small", "gemma-3-1b", "gemma-3n-e4b", "qwen3-30b-a3b"]


def _alternatives(why: str) -> list[str]:
    import re

    m = re.search(r"(?:use --runtime |runtimes that do: |other runtimes: )([^;()]*)$", why)
    assert m, why  # every refusal ends by naming what runs instead
    return [a for a in re.split(r" or |, ", m.group(1).strip()) if a]


@pytest.mark.parametrize("gpu", ALT_RIGS)
def test_refusal_alternatives_would_run(catalog, gpu):
    from advisor.engine.compat import refusal
    from advisor.probe.flags import rig_from_flags

    rig = rig_from_flags(catalog, [gpu])
    vendors = {g.spec.vendor for g in rig.gpus}
    named = 0
    for model_id in ALT_MODELS:
        model = catalog.models[model_id]
        for runtime in catalog.runtimes.values():
            if not vendors <= set(runtime.vendors):
                continue  # a vendor it lacks is bad input (exit 2), not a refusal
            why = refusal(catalog, runtime, rig, model, None)
            if not why:
                continue
            for alt in _alternatives(why):
                named += 1
                other = catalog.runtimes[alt]
                assert vendors <= set(other.vendors), (runtime.id, model_id, alt)
                assert not refusal(catalog, other, rig, model, None), (runtime.id, model_id, why, alt,
                                                                       refusal(catalog, other, rig, model, None))
    assert named or gpu in ("arc-b580", "m4-max-128gb")  # where nothing is refused there is nothing to name


def test_a_vulkan_igpu_is_offered_no_pytorch_runtime(catalog):
    from advisor.engine.compat import refusal
    from advisor.probe.flags import rig_from_flags

    rig = rig_from_flags(catalog, ["radeon-780m-32gb"])
    model = catalog.models["llama-3.1-8b"]
    why = refusal(catalog, catalog.runtimes["vllm"], rig, model, None)
    assert _alternatives(why) == ["llama.cpp", "ollama"]
    for pytorch in ("transformers", "exllamav2"):
        assert "no vulkan back-end" in refusal(catalog, catalog.runtimes[pytorch], rig, model, None)
