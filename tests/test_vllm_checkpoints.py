"""Every `vllm serve` / SGLang line names a checkpoint whose format matches its flags (issue 27).

tests/data/checkpoint_configs.json holds the quantization_config of the repos the answers name, copied from
their config.json as cited there. A listed checkpoint's recorded format must be its quantization; a line that
writes `--quantization Q` must give a 16-bit repo the runtime quantizes to Q at load; a quantization with no
checkpoint and none at load prints no line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from advisor.engine.check import evaluate
from advisor.engine.launch import launchers_for, model_reference, weights_source
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags

DATA = Path(__file__).parent / "data"
CONFIGS = {k: v for k, v in json.loads((DATA / "checkpoint_configs.json").read_text()).items() if "/" in k}
# the config.json quant_method each quantization's checkpoints carry (what vLLM's and SGLang's loaders read)
METHOD = {"fp8": "fp8", "awq": "awq", "gptq": "gptq", "NVFP4": "modelopt_fp4", "fp4-experts-fp8": "fp8", "mxfp4-bf16": "mxfp4"}


def _config(repo: str) -> dict:
    entry = CONFIGS[repo]
    return json.loads((DATA / entry["from_file"]).read_text()) if "from_file" in entry else entry


def _method(repo: str) -> str | None:
    q = _config(repo).get("quantization_config")
    return q["quant_method"] if q else None


def test_recorded_configs_are_cited():
    for repo, entry in CONFIGS.items():
        assert entry["source"], repo


@pytest.mark.parametrize("repo", sorted(CONFIGS))
def test_a_listed_checkpoint_is_in_its_quantization(catalog, repo):
    listed = catalog.rules.checkpoints.repo.get(repo)
    if listed is None:  # recorded for the models whose own repo it is (gpt-oss: see the test below)
        assert any(repo in m.aliases for m in catalog.models.values())
        return
    assert _method(repo) == METHOD[listed.quant]
    if listed.quant == "fp4-experts-fp8":
        assert _config(repo).get("expert_dtype") == "fp4"


# listed checkpoints whose config.json no recorded copy gives yet (issue 27: each printed line's repo is to be read
# from a recorded config); a checkpoint added to rules/checkpoints.toml must bring its config
UNRECORDED = {
    "Qwen/QwQ-32B-AWQ", "Qwen/Qwen2.5-32B-Instruct-AWQ", "Qwen/Qwen2.5-72B-Instruct-AWQ",
    "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
    "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
    "hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4", "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
    "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "nvidia/Llama-3.3-70B-Instruct-FP4",
}


def test_listed_checkpoints_have_a_recorded_config(catalog):
    """17 of the 27 listed checkpoints are read from a recorded config; no new one comes without its config."""
    listed = set(catalog.rules.checkpoints.repo)
    assert listed - set(CONFIGS) <= UNRECORDED
    assert UNRECORDED <= listed  # a repo taken out of the list leaves this one too
    assert len(listed & set(CONFIGS)) >= 17


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_every_model_and_quant_has_a_source_that_loads(catalog, runtime):
    """For each catalog model and each quantization the runtime loads: a listed checkpoint in that format, the
    16-bit repo (never one recorded as quantized), a quantization the runtime makes at load from a 16-bit repo,
    or none (no line printed)."""
    rules, cps = catalog.rules.launch, catalog.rules.checkpoints
    lid = launchers_for(rules, runtime)[0]
    rt = catalog.runtimes[runtime]
    seen = set()
    for m in catalog.models.values():
        for q in (q for q in catalog.quants.values() if rt.loads(q)):
            base = model_reference(m, q)
            how, repo, _ = weights_source(rules, cps, lid, m.id, q.id, base)
            seen.add(how)
            if how == "checkpoint":
                assert cps.repo[repo].model == m.id and cps.repo[repo].quant == q.id
            elif how in ("dense", "at_load"):
                assert base not in cps.repo, (m.id, q.id, base)
                assert base not in CONFIGS or _method(base) is None or how == "at_load" and _method(base) == q.id
                if how == "at_load":
                    assert q.id in rules.launcher[lid].quantize_at_load
    assert {"checkpoint", "dense", "at_load", "missing"} <= seen


def _line(catalog, model, gpus, runtime, quant):
    r = evaluate(catalog, rig_from_flags(catalog, gpus), catalog.models[model], Options(runtime=runtime, quant=quant))
    return r.launch


@pytest.mark.parametrize("model,gpus,runtime,quant,repo,flag", [
    ("qwen3-32b", ["2xrtx-3090"], "sglang", "awq", "Qwen/Qwen3-32B-AWQ", None),  # was --quantization awq on BF16
    ("qwen3-32b", ["2xrtx-3090"], "vllm", "awq", "Qwen/Qwen3-32B-AWQ", None),
    ("deepseek-v3", ["8xh200-sxm"], "vllm", "fp8", "deepseek-ai/DeepSeek-V3", None),  # its own FP8, not "16-bit"
    ("deepseek-v3", ["8xh200-sxm"], "sglang", "fp8", "deepseek-ai/DeepSeek-V3", None),
    ("llama-3.1-8b", ["h100-sxm"], "sglang", "fp8", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", None),
    ("qwen2.5-7b", ["h100-sxm"], "vllm", "fp8", "Qwen/Qwen2.5-7B", "fp8"),  # FP8 made at load
    ("llama-3.1-8b", ["h100-sxm"], "vllm", "BF16", "meta-llama/Llama-3.1-8B", None),
])
def test_printed_lines_name_a_repo_in_the_format_of_their_flags(catalog, model, gpus, runtime, quant, repo, flag):
    launch = _line(catalog, model, gpus, runtime, quant)
    words = shlex.split(launch.command)
    assert repo in words
    q = words[words.index("--quantization") + 1] if "--quantization" in words else None
    assert q == flag
    if q is not None:  # made at load: from a repo that is not itself a quantized checkpoint
        assert repo not in catalog.rules.checkpoints.repo


@pytest.mark.parametrize("model,gpus,runtime,quant", [
    ("qwen3-30b-a3b", ["rtx-4090"], "vllm", "awq"),
    ("qwen3-30b-a3b", ["rtx-4090"], "sglang", "awq"),
    ("qwen3-32b", ["2xrtx-3090"], "sglang", "gptq"),
    ("deepseek-v3", ["16xh200-sxm"], "vllm", "BF16"),  # its repo is FP8: no 16-bit files to name
])
def test_no_line_when_no_checkpoint_loads(catalog, model, gpus, runtime, quant):
    launch = _line(catalog, model, gpus, runtime, quant)
    assert launch is not None and not launch.command and "checkpoint" in launch.note
