"""Every `vllm serve` / SGLang line names a checkpoint whose format matches its flags (issue 27).

tests/data/checkpoint_configs.json holds the quantization_config of the repos the answers name, copied from
their config.json as cited there. A listed checkpoint's recorded format must be its quantization; a line that
writes `--quantization Q` must give a 16-bit repo the runtime quantizes to Q at load; a quantization with no
checkpoint and none at load prints no line."""

from __future__ import annotations

import fnmatch
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
# the config.json quant_method each quantization's checkpoints may carry (what vLLM's and SGLang's loaders read):
# FP8 is written by DeepSeek / Qwen as "fp8" and by llm-compressor as "compressed-tensors" (vLLM's
# CompressedTensorsConfig), NVFP4 by ModelOpt (hf_quant_config.json) or llm-compressor
METHOD = {"fp8": {"fp8", "compressed-tensors"}, "awq": {"awq"}, "gptq": {"gptq"},
          "NVFP4": {"modelopt_fp4", "compressed-tensors"}, "fp4-experts-fp8": {"fp8"}, "mxfp4-bf16": {"mxfp4"},
          "W4A16": {"compressed-tensors"}, "nvfp4-mlp-fp8": {"modelopt"}, "nvfp4-experts": {"modelopt"}}
# compressed-tensors names its scheme in config_groups, so the method alone says nothing of the bits: each
# quantization's (num_bits, type) in a group's weights or input activations, as compressed_tensors/quantization/
# quant_scheme.py's presets write them (FP8: float 8 weights and activations; W4A16: int 4 weights and no
# activation scheme; NVFP4: float 4)
SCHEME = {"fp8": (8, "float"), "W4A16": (4, "int"), "NVFP4": (4, "float")}


def _scheme_matches(quant: str, qc: dict) -> bool:
    """A compressed-tensors quantization_config realises `quant`: some group quantizes to its bits and type, and
    a weight-only scheme (A16) quantizes no activations."""
    bits, kind = SCHEME[quant]
    for group in qc.get("config_groups", {}).values():
        args = [a for a in (group.get("weights"), group.get("input_activations")) if a]
        if any(a.get("num_bits") == bits and a.get("type") == kind for a in args):
            return not (quant.endswith("A16") and group.get("input_activations"))
    return False


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
    assert _method(repo) in METHOD[listed.quant]
    if _method(repo) == "compressed-tensors":
        assert _scheme_matches(listed.quant, _config(repo)["quantization_config"])
    if listed.quant == "fp4-experts-fp8":
        assert _config(repo).get("expert_dtype") == "fp4"


# bits per weight a ModelOpt algorithm stores: NVFP4 (and its weight-only W4A16_NVFP4) E2M1 values with one FP8 E4M3
# scale per group of 16, 4 + 8/16; FP8 one byte with a per-tensor scale
MODELOPT_BITS = {"NVFP4": 4.5, "W4A16_NVFP4": 4.5, "FP8": 8.0}
# a module of each kind the engine sizes apart, by its name in Qwen3.5 / 3.6 checkpoints (layer 0 is linear
# attention, layer 3 full attention in every one of them); a MoE model's MLP is its shared expert
PARTS = {"experts": "model.language_model.layers.0.mlp.experts",
         "linear attention": "model.language_model.layers.0.linear_attn.in_proj_qkv",
         "attention": "model.language_model.layers.3.self_attn.q_proj", "head": "lm_head"}
MLP = {True: "model.language_model.layers.0.mlp.shared_expert.gate_proj",
       False: "model.language_model.layers.0.mlp.gate_proj"}
NVIDIA = ["nvidia/Qwen3.6-35B-A3B-NVFP4", "nvidia/Qwen3.6-27B-NVFP4", "nvidia/Qwen3.5-122B-A10B-NVFP4",
          "nvidia/Qwen3.5-397B-A17B-NVFP4"]


def _modelopt_bits(qc: dict, module: str) -> float:
    """Bits per weight a recorded ModelOpt quantization_config gives `module`: MIXED_PRECISION names each quantized
    module's algorithm (the rest stays BF16); a single algorithm quantizes every Linear its `ignore` list spares."""
    if qc["quant_algo"] == "MIXED_PRECISION":
        algo = qc["quantized_layers"].get(module, {}).get("quant_algo")
        return MODELOPT_BITS[algo] if algo else 16.0
    if any(fnmatch.fnmatchcase(module, pattern) for pattern in qc["ignore"]):
        return 16.0
    weights = qc["config_groups"]["group_0"]["weights"]
    assert weights["type"] == "float" and weights["num_bits"] == 4 and weights["group_size"] == 16
    return MODELOPT_BITS[qc["quant_algo"]]


@pytest.mark.parametrize("repo", NVIDIA)
def test_a_modelopt_checkpoint_is_sized_as_its_config_quantizes_it(catalog, repo):
    """NVIDIA's NVFP4 releases of Qwen3.5 / 3.6 are not the uniform NVFP4 the label says: the Qwen3.6 ones keep
    attention and linear attention in FP8 and quantize the MLPs and lm_head, the Qwen3.5 ones quantize only the
    routed experts. The recorded quantization's widths per part are the recorded config's."""
    listed = catalog.rules.checkpoints.repo[repo]
    quant, moe = catalog.quants[listed.quant], catalog.models[listed.model].is_moe
    qc = _config(repo)["quantization_config"]
    bits = {part: _modelopt_bits(qc, module) for part, module in {**PARTS, "mlp": MLP[moe]}.items()}
    assert bits["linear attention"] == bits["attention"]  # the engine gives a layer's mixer one width
    width = {"experts": quant.expert_bits, "attention": quant.linear_bits, "head": quant.head_bits or quant.embed_bits,
             "mlp": quant.mlp_bits or quant.linear_bits}
    assert {k: width[k] for k in bits if k != "linear attention" and (moe or k != "experts")} == \
        {k: bits[k] for k in bits if k != "linear attention" and (moe or k != "experts")}, repo
    assert quant.embed_bits == 16.0  # no config quantizes embed_tokens


@pytest.mark.parametrize("repo,files_gib", [
    # vLLM's "Checkpoint size: 21.82 GiB" (DGX Spark, 0.22.1rc1: search-index file id 56753445407)
    ("nvidia/Qwen3.6-35B-A3B-NVFP4", 21.82),
    # "21.9 GB across 3 safetensors shards" (noonghunna/club-3090 scripts/lib/profiles/models/qwen3.6-27b.yml @4a29ab5)
    ("nvidia/Qwen3.6-27B-NVFP4", 21.9e9 / 2**30),
])
def test_nvidias_qwen3_6_checkpoints_weigh_what_their_files_hold(catalog, repo, files_gib):
    """The recorded layout plus the BF16 vision tower and the BF16 MTP layer the files also hold (ignore mtp*: one
    gated full-attention layer and one MLP or MoE block of the model's shapes, the 2H -> H projection fc and five
    norms) comes within 1% of the checkpoint's files (35B-A3B -0.2%, 27B -0.0%); nothing is fitted on them. vLLM
    leaves the MTP layer unloaded without speculative decoding."""
    from advisor.engine.memory import weights_layout

    listed = catalog.rules.checkpoints.repo[repo]
    m, quant = catalog.models[listed.model], catalog.quants[listed.quant]
    h, q, kv = m.hidden_size, m.attention_heads * m.head_dim, m.kv_heads * m.head_dim
    attention = h * 2 * q + q * h + 2 * h * kv + 2 * m.head_dim  # q_proj carries the output gate; q/k norms
    mlp = 3 * h * m.intermediate_size if not m.is_moe else \
        m.experts * 3 * h * m.moe_intermediate_size + h * m.experts + 3 * h * m.moe_intermediate_size + h
    mtp = attention + mlp + 2 * h * h + 5 * h
    files = weights_layout(m, quant).total_bytes + 2 * (m.vision_params + mtp)
    assert abs(files / (files_gib * 2**30) - 1) <= 0.01


@pytest.mark.parametrize("repo,model", [("nvidia/Qwen3.6-35B-A3B-NVFP4", "qwen3.6-35b-a3b"),
                                        ("nvidia/Qwen3.6-27B-NVFP4", "qwen3.6-27b")])
def test_naming_a_recorded_checkpoint_as_the_model_asks_its_format(catalog, repo, model):
    """`advisor check nvidia/Qwen3.6-35B-A3B-NVFP4` (an alias of the catalog model) was answered in the ladder's
    awq with no checkpoint to run, and `vllm serve nvidia/Qwen3.6-35B-A3B-NVFP4` as BF16 that does not fit a 5090:
    both are the recorded checkpoint, whose line names it; --quant still asks another."""
    for argv in ((repo, "--runtime", "vllm"), ("--cmd", f"vllm serve {repo} --max-model-len 65536")):
        r = _cmd(catalog, *argv, "--gpu", "rtx-5090")
        assert (r.model.id, r.quant.id) == (model, "nvfp4-mlp-fp8"), argv
        assert r.fits and shlex.split(r.launch.command)[2] == repo
    assert _cmd(catalog, repo, "--runtime", "vllm", "--quant", "NVFP4", "--gpu", "rtx-5090").quant.id == "NVFP4"


@pytest.mark.parametrize("quant,group,ok", [
    ("fp8", {"weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float"}}, True),
    ("fp8", {"weights": {"num_bits": 8, "type": "int"}, "input_activations": {"num_bits": 8, "type": "int"}}, False),
    ("W4A16", {"weights": {"num_bits": 4, "type": "int"}, "input_activations": None}, True),
    ("W4A16", {"weights": {"num_bits": 8, "type": "int"}, "input_activations": None}, False),
    ("W4A16", {"weights": {"num_bits": 4, "type": "int"}, "input_activations": {"num_bits": 8, "type": "int"}}, False),
    ("NVFP4", {"weights": {"num_bits": 4, "type": "float"}, "input_activations": {"num_bits": 4, "type": "float"}},
     True),
])
def test_compressed_tensors_must_name_the_quantizations_bits(quant, group, ok):
    """The method "compressed-tensors" is no free pass: an INT8 W8A8 or an 8-bit weight-only checkpoint listed as
    FP8 or W4A16 fails."""
    assert _scheme_matches(quant, {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}) is ok


# what a record may rest on (tests/data/checkpoint_configs.json `_about`): a copy of the repo's config file, the tags
# the Hub derives from its quantization_config, vLLM's own log, error or test naming the method it read, the bits the
# model card states
EVIDENCE = {"config.json", "hub-tags", "vllm-log", "vllm-test", "model-card"}


@pytest.mark.parametrize("repo", sorted(CONFIGS))
def test_each_record_says_what_it_rests_on(repo):
    """A record not copied from config.json holds no scheme its evidence does not show: config_groups only where a
    config.json copy or the model card states the bits and type, a group size only from a config.json copy."""
    entry = CONFIGS[repo]
    kinds = set(entry["evidence"])
    assert kinds and kinds <= EVIDENCE, repo
    if "config.json" not in kinds:
        qc = entry["quantization_config"]
        assert "config_groups" not in qc or "model-card" in kinds, repo
        assert "group_size" not in qc, repo


def test_listed_checkpoints_have_a_recorded_config(catalog):
    """Every recorded repo (31: 30 offered and RedHatAI's GPTQ "w4a16") is read from a recorded config; no new one
    comes without its config (issue 27)."""
    listed = set(catalog.rules.checkpoints.repo)
    assert listed <= set(CONFIGS), sorted(listed - set(CONFIGS))
    assert len(listed & set(CONFIGS)) >= 31


REDHAT_W4A16 = "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"


def test_no_checkpoint_is_listed_in_a_format_its_config_does_not_have(catalog):
    """RedHatAI's Llama 3.1 8B "w4a16" repo was listed as W4A16 (compressed-tensors) but is a GPTQ checkpoint
    (Hub tags gptq, an AutoGPTQ quantize_config.json: rules/checkpoints.toml); it is recorded as what it is, gptq,
    offered by no answer (only so that a command line naming it is read as gptq): no W4A16 checkpoint of the model
    is recorded, a W4A16 answer names none, and the gptq answer names the hugging-quants repo."""
    redhat = catalog.rules.checkpoints.repo[REDHAT_W4A16]
    assert (redhat.model, redhat.quant, redhat.offered) == ("llama-3.1-8b", "gptq", False)
    assert _method(REDHAT_W4A16) == "gptq"
    assert not [r for r, c in catalog.rules.checkpoints.repo.items() if (c.model, c.quant) == ("llama-3.1-8b", "W4A16")]
    w4 = evaluate(catalog, rig_from_flags(catalog, ["rtx-4090"]), catalog.models["llama-3.1-8b"],
                  Options(runtime="vllm", quant="W4A16"))
    said = [w4.launch.command, w4.launch.note, *(f.message for f in w4.findings)]
    assert not w4.launch.command and not [t for t in said if "RedHatAI" in t]
    gptq = shlex.split(_line(catalog, "llama-3.1-8b", ["rtx-4090"], "vllm", "gptq").command)
    assert gptq[2] == "hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4" and "--quantization" not in gptq
    assert _method(gptq[2]) == "gptq"


def _cmd(catalog, *argv: str):
    from tests.test_launch import _answer

    return _answer(catalog, *argv)


@pytest.mark.parametrize("argv", [
    ("--cmd", f"vllm serve {REDHAT_W4A16} --max-model-len 8192"),
    ("llama-3.1-8b", "--runtime", "vllm", "--cmd", f"vllm serve {REDHAT_W4A16} --max-model-len 8192"),
    ("--cmd", f"python -m sglang.launch_server --model-path {REDHAT_W4A16} --context-length 8192"),
    ("--cmd", f"vllm serve {REDHAT_W4A16} --quantization gptq_marlin --max-model-len 8192"),  # agrees: no note
], ids=["vllm", "vllm with MODEL", "sglang", "vllm -q gptq_marlin"])
def test_a_command_naming_a_recorded_repo_is_read_in_its_recorded_format(catalog, argv):
    """`--cmd "vllm serve REPO"` with a repo rules/checkpoints.toml records runs the record's format, not the
    words of its name (RedHatAI's "w4a16" was read as W4A16, or as BF16 with MODEL given), and says so."""
    r = _cmd(catalog, *argv, "--gpu", "rtx-4090")
    assert (r.model.id, r.quant.id) == ("llama-3.1-8b", "gptq")
    assert r.choice_why == f"{REDHAT_W4A16} is recorded as a checkpoint in gptq (rules/checkpoints.toml)"
    assert not r.options.command_notes
    assert REDHAT_W4A16 not in r.launch.command  # the answer's own line names the offered gptq repo


def test_every_recorded_repo_reads_back_as_its_record(catalog):
    """Each repo rules/checkpoints.toml records, named by `vllm serve`, is its record's model and quant."""
    from advisor.commands.args import command_inputs
    from tests.test_launch import _args

    rig = rig_from_flags(catalog, ["8xh200-sxm"])
    for repo, c in catalog.rules.checkpoints.repo.items():
        model, options = command_inputs(catalog, _args("--cmd", f"vllm serve {repo}"), rig)
        assert (model.id, options.quant) == (c.model, c.quant), repo


def test_a_repo_with_no_record_keeps_the_guess_from_its_name_and_says_so(catalog):
    """Qwen/Qwen3-4B-AWQ is recorded nowhere: the catalog's Qwen/Qwen3-4B in awq, read from the name."""
    assert "Qwen/Qwen3-4B-AWQ" not in catalog.rules.checkpoints.repo
    r = _cmd(catalog, "--cmd", "vllm serve Qwen/Qwen3-4B-AWQ", "--gpu", "rtx-4090")
    assert (r.model.id, r.quant.id) == ("qwen3-4b", "awq")
    assert r.choice_why == "read from the repo's name Qwen/Qwen3-4B-AWQ (rules/checkpoints.toml has no record of it)"


@pytest.mark.parametrize("cmd,flag,recorded", [
    (f"vllm serve {REDHAT_W4A16} --quantization awq --max-model-len 8192", "awq", "gptq"),
    (f"python -m sglang.launch_server --model-path {REDHAT_W4A16} --quantization awq --context-length 8192", "awq",
     "gptq"),
    ("vllm serve Qwen/Qwen3-8B-AWQ --quantization gptq --max-model-len 8192", "gptq", "awq"),
])
def test_a_quantization_flag_that_disagrees_with_the_record_is_a_line_that_does_not_load(catalog, cmd, flag, recorded):
    """vLLM and SGLang stop when --quantization names another method than the checkpoint's config: the answer
    is for the checkpoint's own weights and says the line does not load (it was answered as the flag's)."""
    r = _cmd(catalog, "--cmd", cmd, "--gpu", "rtx-4090")
    assert r.quant.id == recorded
    said = [f for f in r.findings if f.code == "CMD001" and f"--quantization {flag}:" in f.message]
    assert len(said) == 1 and "does not load" in said[0].message and f"checkpoint in {recorded}" in said[0].message


@pytest.mark.parametrize("cmd,flag,instead", [
    ("vllm serve Qwen/Qwen3-32B --quantization awq --max-model-len 8192", "awq", "Qwen/Qwen3-32B-AWQ"),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --quantization awq --context-length 8192", "awq",
     "Qwen/Qwen3-32B-AWQ"),
    ("vllm serve Qwen/Qwen3-4B --quantization gptq --max-model-len 8192", "gptq", "a checkpoint of this model"),
])
def test_a_quantization_the_runtime_cannot_make_from_a_16_bit_repo_is_a_line_that_does_not_load(catalog, cmd, flag,
                                                                                                instead):
    """`--quantization awq` on a model's own 16-bit repo: vLLM reads AWQ only from an AWQ checkpoint ("Cannot find the
    config file for awq"); the note names the recorded checkpoint to use, if any."""
    r = _cmd(catalog, "--cmd", cmd, "--gpu", "2xrtx-3090")
    said = [f for f in r.findings if f.code == "CMD001" and f"--quantization {flag}:" in f.message]
    assert len(said) == 1 and "does not load" in said[0].message and instead in said[0].message


@pytest.mark.parametrize("cmd", ["vllm serve Qwen/Qwen3-4B --quantization fp8", "vllm serve Qwen/Qwen3-32B-AWQ",
                                 "vllm serve Qwen/Qwen3-32B-AWQ --quantization awq_marlin"])
def test_a_line_that_loads_gets_no_note(catalog, cmd):
    """FP8 is made at load from the 16-bit repo; a recorded checkpoint with no flag or its own method loads."""
    r = _cmd(catalog, "--cmd", cmd, "--gpu", "h100-sxm")
    assert not r.options.command_notes


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
    ("llama-3.1-8b", ["rtx-4090"], "vllm", "W4A16"),  # the repo once listed as W4A16 is GPTQ
])
def test_no_line_when_no_checkpoint_loads(catalog, model, gpus, runtime, quant):
    launch = _line(catalog, model, gpus, runtime, quant)
    assert launch is not None and not launch.command and "checkpoint" in launch.note
