"""Runtimes are data: the engine reads their declared behaviour, never their id.

A runtime that behaves like llama.cpp is a few lines of TOML (`like = "llama.cpp"`) in the user's
catalog folder, and it gets llama.cpp's answers; changing one declared field changes only that
behaviour."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from advisor.catalog.load import load_catalog, validate_all
from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.probe.flags import rig_from_flags

ENGINE = Path(__file__).resolve().parents[1] / "advisor" / "engine"

CASES = [  # (model, gpus, options): one GPU, layer split, row split, -sm tensor, offload, MoE offload, CPU only
    ("llama-3.1-8b", ["rtx-3090"], {}),
    ("llama-3.1-70b", ["2xrtx-3090"], {"quant": "Q4_K_M"}),
    ("llama-3.1-70b", ["2xrtx-3090"], {"quant": "Q4_K_M", "split": "row", "prompt_tokens": 4096}),
    ("llama-3.1-70b", ["2xrtx-3090"], {"quant": "Q4_K_M", "split": "tensor", "prompt_tokens": 4096}),
    ("qwen3-32b", ["rtx-4060-ti-16gb"], {"ctx": 32768}),
    ("deepseek-v3", ["rtx-4090"], {}),
    ("llama-3.1-8b", [], {"kv_type": "q8_0"}),
]


def _user_runtime(folder: Path, body: str) -> None:
    (folder / "my-runtime.toml").write_text(body, encoding="utf-8")


def _answer(report) -> tuple:
    s = report.speed
    return (report.quant.id, report.fits, report.runs, report.placement.strategy,
            tuple(d.total_bytes for d in report.placement.devices), report.placement.host.total_bytes,
            report.max_context_tokens, s.decode_tokens_per_s, s.prefill_tokens_per_s,
            report.interconnect.nvlink, report.interconnect.nvlink_speedup)


@pytest.mark.parametrize("model,gpus,opts", CASES, ids=[f"{m}-{'+'.join(g) or 'cpu'}" for m, g, _ in CASES])
def test_a_user_runtime_like_llama_cpp_answers_like_llama_cpp(_isolated_user_dir, model, gpus, opts):
    _user_runtime(_isolated_user_dir, '[[runtime]]\nid = "my-llama"\nname = "My llama.cpp build"\nlike = "llama.cpp"\n')
    catalog = load_catalog()
    assert validate_all() == []
    mine = catalog.runtimes["my-llama"]
    assert mine.name == "My llama.cpp build" and mine.kv_pad_cells == catalog.runtimes["llama.cpp"].kv_pad_cells
    rig = rig_from_flags(catalog, gpus) if gpus else rig_from_flags(catalog, [])
    ref = evaluate(catalog, rig, catalog.models[model], Options(runtime="llama.cpp", **opts))
    got = evaluate(catalog, rig, catalog.models[model], Options(runtime="my-llama", **opts))
    assert got.runtime.id == "my-llama"
    assert _answer(got) == _answer(ref)


def test_a_declared_field_changes_that_behaviour_only(_isolated_user_dir, catalog):
    """The same runtime without KV padding allocates exactly the context asked for."""
    _user_runtime(_isolated_user_dir, '[[runtime]]\nid = "unpadded"\nname = "No padding"\nlike = "llama.cpp"\n'
                                      'kv_pad_cells = 0\n')
    user = load_catalog()
    rig = rig_from_flags(user, ["rtx-3090"])
    opts = dict(quant="Q4_K_M", ctx=1000)
    padded = evaluate(user, rig, user.models["llama-3.1-8b"], Options(runtime="llama.cpp", **opts))
    plain = evaluate(user, rig, user.models["llama-3.1-8b"], Options(runtime="unpadded", **opts))
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 128 KiB per token
    assert padded.kv_cache_bytes == 1024 * 128 * 1024
    assert plain.kv_cache_bytes == 1000 * 128 * 1024
    assert padded.placement.devices[0].weights_bytes == plain.placement.devices[0].weights_bytes


def test_like_must_name_a_known_runtime(_isolated_user_dir):
    _user_runtime(_isolated_user_dir, '[[runtime]]\nid = "x"\nname = "X"\nlike = "nonesuch"\n')
    problems = validate_all()
    assert len(problems) == 1 and "nonesuch" in problems[0]


def test_a_bad_declared_value_is_named(_isolated_user_dir):
    _user_runtime(_isolated_user_dir, '[[runtime]]\nid = "x"\nname = "X"\nlike = "llama.cpp"\ntensor_split = "diagonal"\n')
    problems = validate_all()
    assert any("tensor_split = 'diagonal'" in p for p in problems)


def test_ollama_is_llama_cpp_plus_what_differs(catalog):
    llama, ollama = catalog.runtimes["llama.cpp"], catalog.runtimes["ollama"]
    differs = {f.name for f in dataclasses.fields(llama) if getattr(llama, f.name) != getattr(ollama, f.name)}
    # vision_terms: Ollama takes a model's projector from its own manifest, not llama-server's --mmproj
    # row_split: Ollama splits by layer only, so it has no -sm row either
    # offloads_experts: a MoE model that does not fit goes to RAM by whole layers (ollama/ollama PR #16688)
    # multinode: Ollama has no RPC back-end, so it runs on one machine
    assert differs == {"id", "name", "like", "context_mib", "context_basis", "compute_basis",
                       "supports_tensor_parallel", "row_split", "notes", "vision_terms", "offloads_experts",
                       "offload_basis", "multinode"}


def test_no_engine_module_branches_on_a_runtime_name():
    # A comparison with a runtime's id is a branch; the id as a key (calibration.key_of) is not.
    pattern = re.compile(r'runtime\.id\s*(==|!=|in\b|not in\b)|runtime_id in|"(llama\.cpp|ollama|vllm|exllamav2|mlx|transformers)"')
    hits = [f"{p.name}: {line.strip()}" for p in sorted(ENGINE.rglob("*.py"))
            for line in p.read_text(encoding="utf-8").splitlines() if pattern.search(line)]
    # The one mention allowed is the contract's default value of --runtime.
    assert hits == ['options.py: runtime: str = "llama.cpp"'], hits
