"""Golden outputs: the exact JSON and text of a few `advisor check` runs.

A change to the engine or the rulebook that moves any number shows up here as a diff. When the
change is intended, regenerate with `ADVISOR_UPDATE_GOLDEN=1 pytest tests/test_golden.py` and
review the diff of tests/golden/ in the commit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "check-llama-3.1-8b-rtx-3090": ["check", "llama-3.1-8b", "--gpu", "rtx-3090", "--ram", "64"],
    "check-llama-3.1-70b-2x3090-q4": ["check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--quant", "Q4_K_M", "--ram", "64"],
    "check-qwen3-32b-2x3090-vllm": ["check", "qwen3-32b", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--quant", "gptq",
                                    "--prompt-tokens", "8192", "--ram", "64"],
    "check-deepseek-v3-4090-offload": ["check", "deepseek-v3", "--gpu", "rtx-4090", "--quant", "Q2_K", "--ram", "512"],
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_golden(run_cli, name, fmt):
    r = run_cli(*CASES[name], "--format", fmt)
    assert r.returncode in (0, 1), r.stderr
    path = GOLDEN / f"{name}.{'json' if fmt == 'json' else 'txt'}"
    out = r.stdout
    if fmt == "json":
        out = json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"
    if os.environ.get("ADVISOR_UPDATE_GOLDEN"):
        path.write_text(out)
    assert path.exists(), f"missing golden file {path.name}: run with ADVISOR_UPDATE_GOLDEN=1"
    assert out == path.read_text()
