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
    text = run_cli(*args, env={"COLUMNS": "200"}).stdout  # one row a line: a terminal wide enough not to wrap
    said = f"8 streams requested: {running} at once, {queued} queue"
    context = next(line for line in text.splitlines() if line.strip().startswith("context "))
    decode = next(line for line in text.splitlines() if line.strip().startswith("decode, 8"))
    assert context.rstrip().endswith(said) and said in decode
    assert not any(line.split("  ")[0].strip() == "decode, 8 streams" for line in text.splitlines())  # not "all 8"


def test_concurrency_that_all_fits_still_says_n_streams(run_cli):
    text = run_cli("check", "llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", "vllm", "--concurrency", "8").stdout
    assert "8 streams" in text and "queue" not in text.split("Serving")[0]


def _quant_row(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith("quantization "))


def test_a_refused_answer_does_not_call_its_shown_quant_chosen(run_cli):
    refused = run_cli("check", "llama-3.1-70b", "--gpu", "tesla-p40", "--runtime", "vllm").stdout
    assert "DOES NOT RUN" in refused and _quant_row(refused).endswith("(no quant runs)")
    offloaded = run_cli("check", "llama-3.1-70b", "--gpu", "rtx-3090").stdout
    assert _quant_row(offloaded).endswith("(chosen)")


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


# --- AMD GPUs by gfx target: vLLM's and SGLang's ROCm builds --------------------------------------------------

def test_every_amd_gpu_has_its_gfx_target(catalog):
    import re

    amd = [g for g in catalog.gpus.values() if g.vendor == "amd"]
    assert amd and all(re.fullmatch(r"gfx[0-9a-f]{3,4}", g.gfx_target) for g in amd), \
        [(g.id, g.gfx_target) for g in amd]
    assert all(not g.gfx_target for g in catalog.gpus.values() if g.vendor != "amd")
    assert {g.id: g.gfx_target for g in amd if g.id in ("mi50-32gb", "mi300x", "rx-7900-xtx")} == \
        {"mi50-32gb": "gfx906", "mi300x": "gfx942", "rx-7900-xtx": "gfx1100"}


def _check(run_cli, gpu: str, runtime: str) -> dict:
    import json

    r = run_cli("check", "llama-3.1-8b", "--gpu", gpu, "--runtime", runtime, "--json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("gpu", ["mi50-16gb", "mi50-32gb", "mi60"])
def test_vllm_refuses_gfx906_and_names_llama_cpp(run_cli, gpu):
    d = _check(run_cli, gpu, "vllm")
    assert not d["runs"] and "CMP001" in {f["code"] for f in d["findings"]}
    why = d["refusal"]
    assert "(gfx906)" in why and "gfx942" in why and "docs.vllm.ai" in why
    assert _alternatives(why)[0] == "llama.cpp" and "vllm" not in _alternatives(why)


@pytest.mark.parametrize("gpu", ["mi250x", "mi300x", "rx-7900-xtx", "rx-9070-xt", "ryzen-ai-max-395-128gb"])
def test_vllm_runs_on_the_targets_its_docs_list(run_cli, gpu):
    d = _check(run_cli, gpu, "vllm")
    assert "refusal" not in d and d["runs"]


def test_sglang_is_offered_on_instinct_mi300x(run_cli):
    d = _check(run_cli, "mi300x", "sglang")
    assert "refusal" not in d and d["runs"] and d["serving"]["kv_cache_tokens"] > 0
    assert "sglang.launch_server" in d["launch"]["command"]


@pytest.mark.parametrize("gpu,target", [("rx-7900-xtx", "gfx1100"), ("mi250x", "gfx90a"), ("mi50-32gb", "gfx906"),
                                        ("ryzen-ai-max-395-128gb", "gfx1151")])
def test_sglang_refuses_other_amd_targets_with_the_reason(run_cli, gpu, target):
    d = _check(run_cli, gpu, "sglang")
    why = d["refusal"]
    assert f"({target})" in why and "gfx942, gfx950" in why and "setup_rocm.py" in why
    assert "sglang" not in _alternatives(why) and "llama.cpp" in _alternatives(why)


def test_gfx_targets_are_data_not_a_runtime_name(_isolated_user_dir):
    """A user runtime like vLLM that declares no AMD targets runs where vLLM is refused, and one that declares
    only gfx906 is refused where vLLM runs: the engine reads the field, never the id."""
    from advisor.catalog.load import load_catalog
    from advisor.engine.compat import refusal
    from advisor.probe.flags import rig_from_flags

    (_isolated_user_dir / "mine.toml").write_text(
        '[[runtime]]\nid = "vllm-any"\nname = "vLLM built for every target"\nlike = "vllm"\ngfx_targets = []\n\n'
        '[[runtime]]\nid = "vllm-906"\nname = "vLLM gfx906 fork"\nlike = "vllm"\ngfx_targets = ["gfx906"]\n'
        'gfx_targets_basis = "a test"\n', encoding="utf-8")
    catalog = load_catalog()
    model = catalog.models["llama-3.1-8b"]
    mi50, mi300 = rig_from_flags(catalog, ["mi50-32gb"]), rig_from_flags(catalog, ["mi300x"])
    assert refusal(catalog, catalog.runtimes["vllm"], mi50, model, None)
    assert not refusal(catalog, catalog.runtimes["vllm-any"], mi50, model, None)
    assert not refusal(catalog, catalog.runtimes["vllm-906"], mi50, model, None)
    assert "(gfx942)" in refusal(catalog, catalog.runtimes["vllm-906"], mi300, model, None)


# --- ExLlamaV2: the architectures it implements, as data ------------------------------------------------------

@pytest.mark.parametrize("model,cls", [("llama-4-scout", "Llama4ForConditionalGeneration"),
                                       ("deepseek-v3", "DeepseekV3ForCausalLM"),
                                       ("kimi-k2", "DeepseekV3ForCausalLM"),
                                       ("qwen3-next-80b-a3b", "Qwen3NextForCausalLM"),
                                       ("granite-4.0-h-small", "GraniteMoeHybridForCausalLM"),
                                       ("nemotron-h-8b", "NemotronHForCausalLM"),
                                       ("gemma-3-1b", "Gemma3ForCausalLM")])
def test_exllamav2_refuses_what_it_does_not_implement(run_cli, model, cls):
    import json

    r = run_cli("check", model, "--gpu", "8xh100-sxm", "--runtime", "exllamav2", "--json")
    assert r.returncode == 1, r.stderr
    why = json.loads(r.stdout)["refusal"]
    assert why.startswith("ExLlamaV2 / TabbyAPI does not implement") and cls in why and "architecture.py" in why
    assert "exllamav2" not in _alternatives(why)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-27b", "mixtral-8x7b", "phi-4",
                                   "deepseek-r1-distill-qwen-7b", "qwen2.5-vl-7b"])
def test_exllamav2_still_runs_what_it_implements(catalog, model):
    from advisor.engine.compat import implements

    assert implements(catalog.runtimes["exllamav2"], catalog.models[model])


def test_exllamav2_reasons_name_a_class_it_lacks(catalog):
    import re
    from fnmatch import fnmatchcase

    rt = catalog.runtimes["exllamav2"]
    assert "LlamaForCausalLM" in rt.architectures and "architecture.py" in rt.architectures_basis
    assert rt.min_compute_capability == 6.0 and "cudaarch" in rt.hardware_basis
    for pattern, why in rt.unsupported_models.items():
        named = re.findall(r"\b\w+For(?:CausalLM|ConditionalGeneration)\b", why.split("(it has")[0])
        assert named and not set(named) & set(rt.architectures), (pattern, why)
        assert any(fnmatchcase(m, pattern) for m in catalog.models), pattern  # each pattern matches a catalog model


@pytest.mark.parametrize("cls,runtime,refused", [("SeedOssForCausalLM", "exllamav2", True),
                                                 ("LlamaForCausalLM", "exllamav2", False),
                                                 ("Llama4ForConditionalGeneration", "exllamav3", True),
                                                 ("SeedOssForCausalLM", "exllamav3", False),
                                                 ("SeedOssForCausalLM", "vllm", False)])
def test_a_config_json_model_is_held_to_the_runtime_architectures(catalog, tmp_path, cls, runtime, refused):
    import json

    from advisor.engine.compat import refusal
    from advisor.modelfile import read_model
    from advisor.probe.flags import rig_from_flags

    cfg = {"model_type": "llama", "architectures": [cls], "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "vocab_size": 96, "max_position_embeddings": 8192}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = read_model(str(tmp_path / "config.json")).spec
    assert spec.architecture == cls
    why = refusal(catalog, catalog.runtimes[runtime], rig_from_flags(catalog, ["rtx-4090"]), spec, None)
    assert bool(why) is refused and (not refused or f"{cls} is not among the architectures it implements" in why)


@pytest.mark.parametrize("gpu", ["tesla-p40", "mi50-32gb", "mi300x", "radeon-780m-32gb", "rtx-3090"])
def test_alternatives_to_an_asked_quantization_load_it_and_run_it(catalog, gpu):
    from advisor.engine.compat import refusal
    from advisor.probe.flags import rig_from_flags

    rig = rig_from_flags(catalog, [gpu])
    vendors = {g.spec.vendor for g in rig.gpus}
    for model_id in ("llama-3.1-8b", "llama-4-scout", "gpt-oss-20b"):
        model = catalog.models[model_id]
        for runtime in catalog.runtimes.values():
            if not vendors <= set(runtime.vendors):
                continue
            for q in (catalog.quants[k] for k in ("awq", "gptq", "fp8", "nf4", "int8")):
                if not runtime.loads(q):
                    continue
                why = refusal(catalog, runtime, rig, model, q, asked=True)
                if not why:
                    continue
                alts = _alternatives(why)
                if f"no other runtime runs {q.id} here" in why:  # then: runtimes at another quantization
                    assert all(not refusal(catalog, catalog.runtimes[a], rig, model, None) for a in alts), why
                    continue
                for alt in alts:
                    other = catalog.runtimes[alt]
                    assert other.loads(q) and not refusal(catalog, other, rig, model, q, asked=True), (why, alt)


def test_an_asked_quantization_narrows_what_runs_instead(run_cli):
    import json

    d = json.loads(run_cli("check", "llama-3.1-8b", "--gpu", "tesla-p40", "--runtime", "vllm", "--quant", "awq",
                           "--json").stdout)
    assert _alternatives(d["refusal"]) == ["transformers"]  # llama.cpp and ExLlamaV2 do not load AWQ
    d = json.loads(run_cli("check", "llama-3.1-8b", "--gpu", "tesla-p40", "--runtime", "vllm", "--json").stdout)
    assert _alternatives(d["refusal"])[:2] == ["llama.cpp", "ollama"]  # its own choice of quantization: any runtime
