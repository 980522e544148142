"""`advisor quants` and the quant names repos use: NVFP4, W4A16, AutoRound (rules/quants.toml, with
their arithmetic checked here), EXL2/EXL3 bits, and the names a checkpoint's quantization_config
gives (read from real safetensors folders)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main

LLAMA31_8B = 8_030_261_248
EMBED_AND_HEAD = 2 * 128_256 * 4096  # Llama 3.1 8B, untied


def _json(capsys, *argv: str):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("qid, linear", [("NVFP4", 4 + 8 / 16), ("W4A16", 4 + 16 / 128), ("autoround", 4 + 20 / 128)])
def test_new_formats_bits_follow_their_layout(capsys, qid, linear) -> None:
    # a search: `advisor quants NVFP4` also lists NVIDIA's NVFP4 layouts (nvfp4-experts, nvfp4-mlp-fp8)
    (q,) = [q for q in _json(capsys, "quants", qid, "--json") if q["id"] == qid]
    assert q["linear_bits"] == pytest.approx(linear, abs=5e-4)
    whole = (EMBED_AND_HEAD * 16 + (LLAMA31_8B - EMBED_AND_HEAD) * linear) / LLAMA31_8B
    assert q["bits_per_weight"] == pytest.approx(whole, abs=5e-4)
    assert q["bpw_basis"] and q["quality_basis"] and q["runtimes"]


def test_quants_lists_every_name(capsys) -> None:
    ids = {q["id"] for q in _json(capsys, "quants", "--json")}
    assert {"Q4_K_M", "IQ4_NL", "MXFP4", "NVFP4", "W4A16", "autoround", "exl2-<bpw>", "exl3-<bpw>"} <= ids
    assert main(["quants"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the text is wrapped to the terminal
    assert "UD-Q4_K_XL" in text and "exact bytes" in text


@pytest.mark.parametrize("name, expected", [("AutoRound", "autoround"), ("auto-round", "autoround"),
                                            ("nvfp4", "NVFP4"), ("w4a16", "W4A16")])
def test_names_resolve(capsys, name, expected) -> None:
    doc = _json(capsys, "check", "llama-3.1-8b", "--gpu", "rtx-4090", "--runtime", "vllm", "--quant", name, "--json")
    assert doc["quant"] == expected


QCFGS = [
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "NVFP4"),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}}, "NVFP4"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128}, "input_activations": None}}}, "W4A16"),
    ({"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "int"}, "input_activations": {"num_bits": 8, "type": "int"}}}}, "W8A8"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "float"}}}}, "fp8"),
    ({"quant_method": "auto-round", "bits": 4, "group_size": 128}, "autoround"),
    ({"quant_method": "exl3", "bits": 4.0, "head_bits": 6}, "exl3-4"),
    ({"quant_method": "exl2", "bits": 4.65}, "exl2-4.65"),
    ({"quant_method": "gptq", "bits": 4}, "gptq"),
    ({"quant_method": "awq", "bits": 4}, "awq"),
    ({"quant_method": "mxfp4"}, "MXFP4"),
]


@pytest.mark.parametrize("qcfg, expected", QCFGS, ids=[e for _, e in QCFGS])
def test_quantization_config_names_the_repos_quant(tmp_path: Path, qcfg, expected) -> None:
    pytest.importorskip("safetensors")
    from test_modelfile import LLAMA_CFG, make_st_folder

    from advisor.modelfile import read_model

    make_st_folder(tmp_path / "m", {**LLAMA_CFG, "quantization_config": qcfg})
    assert read_model(str(tmp_path / "m")).quant.id == expected
