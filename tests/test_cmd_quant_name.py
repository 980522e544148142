"""`--cmd` with a model file named like `qwen2.5-72b-Q4_K_M.gguf` runs that quantization whether or not MODEL is
also given: with MODEL, the quant in the file name was ignored and the answer was 'chosen: best that fits' (found
while working on issue 26)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("model", [[], ["qwen2.5-72b"]], ids=["cmd only", "with MODEL"])
def test_the_quant_in_the_file_name_is_the_answers(run_cli, model):
    r = run_cli("check", *model, "--cmd", "llama-server -m qwen2.5-72b-Q3_K_M.gguf -c 8192", "--gpu", "2xrtx-3090",
                "--json")
    assert r.returncode in (0, 1), r.stderr
    d = json.loads(r.stdout)
    assert d["quant"] == "Q3_K_M"
