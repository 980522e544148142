"""ExLlamaV3 / TabbyAPI as a runtime (rules/runtimes.toml id "exllamav3", rules/launch.toml [launcher.tabbyapi]):
what it refuses (architectures, pre-Ampere GPUs, ROCm), its EXL3 weights and quantized cache, tensor parallel
split by memory, plans that never propose it where it cannot run, and the `python main.py` launch read back."""

from __future__ import annotations

import json

import pytest

from advisor.engine.check import evaluate, resolve_quant
from advisor.engine.memory import weights_layout
from advisor.engine.options import Options
from advisor.engine.plan import make_plan
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags
from tests.test_launch import _answer


def _check(catalog, model, gpus, **kw):
    return evaluate(catalog, rig_from_flags(catalog, gpus), catalog.models[model], Options(runtime="exllamav3", **kw))


def _cmp(report):
    found = [f for f in report.findings if f.code == "CMP001"]
    assert len(found) == 1 and found[0].severity == "error"
    return found[0].message


@pytest.mark.parametrize("model,gpus,why", [
    ("llama-4-scout", ["4xrtx-3090"], "Llama4ForConditionalGeneration"),
    ("deepseek-r1", ["8xh100-sxm"], "n_group 8"),
    ("deepseek-v3.2", ["8xh200"], "DeepseekV32ForCausalLM"),
    ("glm-5", ["8xh200"], "GlmMoeDsaForCausalLM"),
])
def test_refuses_models_it_has_no_code_for_and_names_who_has(catalog, model, gpus, why):
    r = _check(catalog, model, gpus)
    assert not r.runs and why in r.refusal
    message = _cmp(r)
    assert "does not implement" in message and "llama.cpp" in message and "exllamav3" not in message.split(":")[-1]
    assert not any(f.code in ("FIT002", "QNT001") for f in r.findings)


def test_runs_the_architectures_it_has(catalog):
    """Kimi K2 is DeepseekV3ForCausalLM with n_group 1 (which deepseek_v3.py accepts); gpt-oss, Gemma 3, Qwen3.5
    and Nemotron-H are in its architecture list (ExLlamaV2 has no gpt-oss)."""
    for model, gpus in (("kimi-k2", ["8xh200"]), ("gpt-oss-20b", ["rtx-3090"]), ("gemma-3-27b", ["rtx-4090"]),
                        ("qwen3.5-27b", ["rtx-4090"]), ("nemotron-3-nano-30b-a3b", ["rtx-4090"])):
        r = _check(catalog, model, gpus)
        assert not r.refusal and r.runs, (model, r.refusal, r.placement.problem)


@pytest.mark.parametrize("gpus,has", [(["t4"], "7.5"), (["rtx-2080-ti"], "7.5"), (["v100-sxm2-32gb"], "7"),
                                      (["4xtesla-p40"], "6.1"), (["rtx-3090", "t4"], "7.5")])
def test_refuses_gpus_below_ampere(catalog, gpus, has):
    """TabbyAPI's hardware_supports_exllamav3: compute capability 8.0 or higher on every GPU."""
    r = _check(catalog, "llama-3.1-8b", gpus)
    assert not r.runs
    message = _cmp(r)
    assert "compute capability 8" in message and f"has {has}" in message and "llama.cpp" in message
    assert _check(catalog, "llama-3.1-8b", ["rtx-3090"]).runs  # 8.6


def test_rocm_is_refused_on_input(catalog):
    with pytest.raises(AdvisorError, match="does not run on amd"):
        _check(catalog, "llama-3.1-8b", ["rx-7900-xtx"])


@pytest.mark.parametrize("kv,bits", [("f16", 16), ("q8_0", 8 + 16 / 32), ("q4_0", 4 + 16 / 32)])
def test_cache_bytes_per_token(catalog, kv, bits):
    """A k,v-bit layer keeps token_dim/32 x bits int32 words plus one f16 scale per 32 values of K and of V
    (exllamav3/cache/quant.py): Q4 is 4.5 bits a value. Llama 3.1 8B: 32 layers x 8 KV heads x 128."""
    r = _check(catalog, "llama-3.1-8b", ["rtx-3090"], quant="exl3-4.0", kv_type=kv, ctx=8192)
    per_token = 32 * 2 * 8 * 128 * bits / 8
    assert r.kv_cache_bytes == pytest.approx(per_token * 8192, abs=32)
    assert r.placement.devices[0].kv_cache_bytes == r.kv_cache_bytes
    if kv == "q4_0":
        assert per_token == 36864  # bytes per token with a 4-bit cache


def test_sliding_window_layers_keep_the_whole_cache(catalog):
    """Every attention layer gets max_num_tokens of cache (exllamav3 cache/cache.py): Gemma 3's local layers
    save nothing, unlike llama.cpp's window-sized cache."""
    m = catalog.models["gemma-3-27b"]
    ex = _check(catalog, "gemma-3-27b", ["rtx-4090"], quant="exl3-4.0", kv_type="q4_0", ctx=32768)
    assert ex.kv_cache_bytes == m.layers * m.kv_heads * m.head_dim * 2 * 0.5625 * 32768
    cpp = evaluate(catalog, rig_from_flags(catalog, ["rtx-4090"]), m,
                   Options(runtime="llama.cpp", quant="Q4_K_M", kv_type="q4_0", ctx=32768))
    assert cpp.kv_cache_bytes < ex.kv_cache_bytes / 2


def test_exl3_weights_linear_bits_head_bits_and_a_16_bit_embedding(catalog):
    q = resolve_quant(catalog, "exl3-4.0")
    assert (q.format, q.linear_bits, q.head_bits, q.embed_bits) == ("exl3", 4.0, 6.0, 16.0)
    assert q.runtimes == ("exllamav3",)
    m = catalog.models["llama-3.1-8b"]
    lay = weights_layout(m, q)
    embed = m.vocab_size * m.hidden_size
    assert lay.embed_bytes == embed * 2 and lay.output_bytes == embed * 6 // 8
    assert lay.total_bytes == pytest.approx((m.params_total - 2 * embed) * 4 / 8 + embed * 2 + embed * 6 / 8, abs=64)
    with pytest.raises(AdvisorError):
        resolve_quant(catalog, "exl3-8.5")  # convert.py takes 1 to 8 bits
    assert resolve_quant(catalog, "exl2-8.5").head_bits is None  # EXL2 keeps the 16-bit safe side


def test_tensor_parallel_splits_by_memory_without_a_head_constraint(catalog):
    """Qwen2.5 32B has 40 heads and 8 KV heads: vLLM refuses 3-way tensor parallel, ExLlamaV3's TPAllocator
    deals channels out by memory."""
    r = _check(catalog, "qwen2.5-32b", ["3xrtx-3090"], quant="exl3-4.0", split="tensor")
    assert r.runs and r.placement.strategy == "tensor_parallel"
    w = [d.weights_bytes for d in r.placement.devices]
    assert max(w) - min(w) <= 2
    mixed = _check(catalog, "qwen2.5-32b", ["rtx-3090", "rtx-3060-12gb"], quant="exl3-4.0", split="tensor")
    a, b = mixed.placement.devices
    assert a.weights_bytes > b.weights_bytes and a.kv_cache_bytes > b.kv_cache_bytes
    assert a.weights_bytes / b.weights_bytes == pytest.approx(a.capacity_bytes / b.capacity_bytes, rel=1e-6)
    vllm = evaluate(catalog, rig_from_flags(catalog, ["3xrtx-3090"]), catalog.models["qwen2.5-32b"],
                    Options(runtime="vllm", quant="awq", split="tensor"))
    assert not vllm.runs


def test_the_loader_reserve_on_gpus_after_the_first(catalog):
    """TabbyAPI reserves 96 MB on GPU 0 and ExLlamaV3 pads the list with 0.5 GB for the others."""
    r = _check(catalog, "llama-3.1-70b", ["2xrtx-3090"], quant="exl3-4.0", ctx=4096)
    a, b = r.placement.devices
    assert not a.holds_output and b.holds_output
    rt = catalog.runtimes["exllamav3"]
    assert rt.context_mib == 300 + 16 + 96 and rt.reserve_mib_other_gpus == 512
    assert b.overhead_bytes - a.overhead_bytes >= 512 * 1024**2


def test_plan_never_proposes_what_it_cannot_run(catalog):
    p = make_plan(catalog, catalog.models["llama-3.1-70b"], Options(runtime="exllamav3"), min_tps=10, used=True,
                  top=50)
    assert p.options
    cc = {g.id: g.compute_capability for g in catalog.gpus.values()}
    assert all((cc.get(g[1]) or 0) >= 8.0 for o in p.options for g in o.gpus)
    assert all(catalog.gpus[g[1]].vendor == "nvidia" for o in p.options for g in o.gpus)
    none = make_plan(catalog, catalog.models["llama-4-scout"], Options(runtime="exllamav3"), min_tps=10, used=True)
    assert not none.options


def test_check_with_runtime_exllamav3_on_the_cli(run_cli):
    out = run_cli("check", "llama-3.1-8b", "--gpu", "rtx-3090", "--runtime", "exllamav3", "--kv-cache", "q4_0",
                  "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["runtime"] == "exllamav3" and d["quant"].startswith("exl3-") and d["runs"]
    assert d["launch"]["command"].startswith("python main.py --model-name ")
    assert "--cache-mode Q4" in d["launch"]["command"]
    assert "fitted on llama.cpp" in d["speed"]["basis"]
    text = run_cli("check", "llama-3.1-8b", "--gpu", "rtx-3090", "--runtime", "exllamav3")
    assert text.returncode == 0 and "Run it" in text.stdout and "python main.py" in text.stdout
    listed = run_cli("runtimes")
    assert listed.returncode == 0 and "exllamav3" in listed.stdout and "ExLlamaV3" in listed.stdout


ROUND_TRIPS = [
    ("llama-3.1-8b", "--quant", "exl3-4.0", "--gpu", "rtx-3090", "--runtime", "exllamav3"),
    ("qwen2.5-32b", "--quant", "exl3-4.0", "--gpu", "3xrtx-3090", "--runtime", "exllamav3", "--split", "tensor",
     "--kv-cache", "q4_0", "--ctx", "10000", "--concurrency", "2"),
    ("llama-3.1-70b", "--quant", "exl3-3.0", "--gpu", "2xrtx-3090", "--runtime", "exllamav3", "--kv-cache", "q8_0",
     "--ctx", "16384"),
]


@pytest.mark.parametrize("argv", ROUND_TRIPS, ids=[" ".join(a) for a in ROUND_TRIPS])
def test_emitted_tabbyapi_command_round_trips(catalog, argv):
    first = _answer(catalog, *argv)
    launch = first.launch
    assert launch is not None and launch.launcher == "tabbyapi" and launch.runtime == "exllamav3"
    words = launch.command.split()
    assert words[:2] == ["python", "main.py"]
    cache = int(words[words.index("--cache-size") + 1])
    assert cache % 256 == 0 and cache >= first.context_tokens * first.options.concurrency
    assert ("--tensor-parallel" in words) == (first.placement.strategy == "tensor_parallel")
    passed = [w for i, w in enumerate(argv) if w in ("--gpu", "--quant", "--concurrency")
              or (i and argv[i - 1] in ("--gpu", "--quant", "--concurrency"))]
    again = _answer(catalog, "--cmd", launch.command, *passed)
    assert again.runtime.id == "exllamav3" and again.model.id == first.model.id
    assert (again.quant.id, again.context_tokens, again.options.kv_type) == \
        (first.quant.id, first.context_tokens, first.options.kv_type)
    a, b = first.placement, again.placement
    assert (a.strategy, a.runs) == (b.strategy, b.runs)
    assert [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes) for d in a.devices] == \
        [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes) for d in b.devices]


def test_a_cache_mode_it_does_not_model_is_named(catalog):
    r = _answer(catalog, "--gpu", "rtx-3090", "--quant", "exl3-4.0",
                "--cmd", "python main.py --model-name Llama-3.1-8B --max-seq-len 4096 --cache-mode 6,6 --chunk-size 512")
    assert r.runtime.id == "exllamav3" and r.model.id == "llama-3.1-8b" and r.context_tokens == 4096
    notes = " ".join(r.options.command_notes)
    assert "--cache-mode 6,6" in notes and "--chunk-size 512" in notes


def test_list_flags_take_every_value(catalog):
    """TabbyAPI's list keys are argparse nargs="+": --gpu-split 20 20 20 is one flag with three values."""
    r = _answer(catalog, "--gpu", "3xrtx-3090", "--quant", "exl3-4.0",
                "--cmd", "python main.py --model-name Qwen2.5-32B --gpu-split 20 20 20 --api-servers OAI Kobold "
                         "--max-seq-len 8192")
    notes = r.options.command_notes
    assert any("--gpu-split 20 20 20" in n for n in notes)
    assert not any("unknown" in n for n in notes) and r.context_tokens == 8192


def test_fit_says_when_the_runtime_cannot_run_on_the_rig(run_cli):
    """A T4 is compute capability 7.5: fit lists nothing, and says it is the runtime, not the memory."""
    out = run_cli("fit", "--gpu", "t4", "--runtime", "exllamav3")
    assert out.returncode in (0, 1), out.stderr
    assert "exllamav3 does not run on this rig" in out.stdout and "compute capability 8" in out.stdout
    fine = run_cli("fit", "--gpu", "t4")
    assert "does not run on this rig" not in fine.stdout
