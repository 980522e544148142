"""Golden outputs: the exact JSON and text of a few `advisor check` runs.

A change to the engine or the rulebook that moves any number shows up here as a diff. When the
change is intended, regenerate with `ADVISOR_UPDATE_GOLDEN=1 pytest tests/test_golden.py` and
review the diff of tests/golden/ in the commit. Text is wrapped to 80 columns (`COLUMNS=80`, what a pipe
gets anyway); `test_text_fits_80_columns` holds every text command to that."""

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
    r = run_cli(*CASES[name], "--format", fmt, env={"COLUMNS": "80"})
    assert r.returncode in (0, 1), r.stderr
    path = GOLDEN / f"{name}.{'json' if fmt == 'json' else 'txt'}"
    out = r.stdout
    if fmt == "json":
        out = json.dumps(json.loads(out), indent=2, sort_keys=True) + "\n"
    if os.environ.get("ADVISOR_UPDATE_GOLDEN"):
        path.write_text(out)
    assert path.exists(), f"missing golden file {path.name}: run with ADVISOR_UPDATE_GOLDEN=1"
    assert out == path.read_text()


WIDE = {  # the other text commands, each at its widest: long names, notes, tables, a long launch line
    "fit": ["fit", "--gpu", "2xrtx-3090", "--ram", "64", "--all"],
    "plan": ["plan", "llama-3.1-70b", "--quant", "Q4_K_M", "--min-tps", "10", "--have", "rtx-3090"],
    "quants": ["quants"], "models": ["models"], "gpus": ["gpus"], "runtimes": ["runtimes"], "rules": ["rules"],
    "detect": ["detect"],
    "check-offload-vllm": ["check", "qwen3-235b-a22b", "--gpu", "2xrtx-3090", "--runtime", "vllm", "--quant", "awq",
                           "--concurrency", "8", "--cpu-offload-gb", "40", "--ram", "256"],
    "check-moe-offload": ["check", "deepseek-v3", "--gpu", "rtx-4090", "--ctx", "32768", "--ram", "512"],
    "check-training": ["check", "llama-3.1-8b", "--gpu", "2xrtx-3090", "--workload", "full-finetune"],
}


@pytest.mark.parametrize("args", [*CASES.values(), *WIDE.values()], ids=[*CASES, *WIDE])
def test_text_fits_80_columns(run_cli, args):
    """Every line of every text command fits an 80-column terminal (COLUMNS=80), and wrapping never
    touches JSON (the golden JSON files above are byte-for-byte what they were)."""
    r = run_cli(*args, env={"COLUMNS": "80"})
    assert r.returncode in (0, 1), r.stderr
    long = [line for line in r.stdout.splitlines() if len(line) > 80]
    assert not long, "\n".join(long)
    wider = run_cli(*args, env={"COLUMNS": "200"})
    assert max(map(len, wider.stdout.splitlines())) > 80  # COLUMNS is honoured: wider terminals use their width
