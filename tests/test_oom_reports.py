"""Public out-of-memory reports (tests/data/oom_reports.csv, described in oom_reports.md), evaluated with
`advisor check --json` at each source's own settings (issue 26): "fits" is never said of a run that went out
of memory, where a `tight` answer (less free than the runtime's fit margin on some GPU) is not "fits"; and a run
the source says ran is never called tight or out of the question."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import sys
from pathlib import Path

import pytest

from advisor.catalog.types import GIB
from advisor.cli import main
from advisor.engine import memory as mem
from advisor.engine.result import tight_device

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from measurements import load_cases, placer_for  # noqa: E402

DATA = Path(__file__).parent / "data"
RELEASE = re.compile(r"\d+(?:\.\d+)+(?:\.post\d+)?")
"""A `runtime_version` that is a release number (`0.8.1`, `0.8.5.post1`), passed as --runtime-version."""
ROWS = list(csv.DictReader((DATA / "oom_reports.csv").open()))
FLAGS = (("kv_type", "--kv-cache"), ("flash_attn", "--flash-attn"), ("ubatch", "--ubatch"),
         ("concurrency", "--concurrency"), ("gpu_memory_utilization", "--gpu-memory-utilization"),
         ("max_num_seqs", "--max-num-seqs"), ("tensor_parallel_size", "--tensor-parallel-size"))

# OOM rows the engine still calls a plain fit, and what it does not model (issue 26, what is left). Strict: a
# change that fixes one must move it out of here.
KNOWN_MISSES = {
    "vllm-16570": "the 2.51 GiB of activations and 0.04 GiB of KV cache were logged by vLLM's V0 engine (0.8.3, "
                  "VLLM_USE_V1=0), which the advisor does not model: it answers V1, whose pool keeps 2.47 GiB a GPU "
                  "(32,320 tokens; 1.89 GiB with the tower read from the checkpoint's config, weights split four ways and "
                  "the profile of one 16,384-token image). V0 profiles one sequence of 16,386 tokens (its multimodal 5,120 "
                  "batched tokens, logged as such in vllm-project/vllm #20123, // 16,384 image tokens gives max_num_seqs 1 "
                  "in vllm/worker/model_runner.py profile_run; profiling.py get_decoder_dummy_data keeps the image, as a "
                  "peak far above a 5,120-token text pass shows): the advisor's activation formula gives 1.68 GiB for it, "
                  "and two f32 copies of the image's pixel_values (65,536 patches x 1,176 values x 4 B = 0.29 GiB each: "
                  "the runner's batched [1, N, 1176] tensor stays in forward's kwargs while qwen2_5_vl.py "
                  "_validate_and_reshape_mm_tensor keeps its torch.concat copy) live through the language model's pass, "
                  "2.25 of the 2.51 GiB logged; the other 0.26 GiB is not explained by a source read, and with 2.25 the "
                  "advisor's own budget (39.61 GiB a card against the 39.38 logged, 34.30 GiB of weights against 34.43) "
                  "would still leave ~0.8 GiB a GPU (~10,000 tokens). The 0.8.4 V1 runs of the thread set "
                  "--mm_processor_kwargs max_pixels, which the advisor cannot express",
    "ollama-10873": "no GPU-memory cause found: at Ollama 0.7.1's own 2 slots (OLLAMA_NUM_PARALLEL unset, 8,192 cells) "
                    "the model takes 10.0 of the 16 GB card's 15.6 GiB (5.6 GiB free); the next run's "
                    "GGML_ASSERT(ctx->mem_buffer != NULL) is a host allocation failing; the thread's text names an "
                    "'RTX 5060 16GB' and states neither the RAM nor the card's reported total (those are in screenshots "
                    "and log lines not read here), so the row cannot be asked at another card or RAM without inventing it",
}


def _rig_file(row: dict, tmp_path: Path) -> Path:
    lines = ["[rig]", f"ram_gib = {row['ram_gib'] or 64}"] + ([f'os = "{row["os"]}"'] if row["os"] else [])
    for spec in row["gpus"].split(";"):
        count, _, gpu = spec.partition("x") if spec[0].isdigit() else ("1", "", spec)
        lines += ["[[gpu]]", f'id = "{gpu}"', f"count = {count}"]
        lines += [f"used_gib = {row['used_gib']}"] if row["used_gib"] else []
    path = tmp_path / f"{row['id']}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def check_args(row: dict, tmp_path: Path) -> list[str]:
    """`advisor check` at the row's settings (the runtime's release where the source gives its number)."""
    args = ["check", row["model"], "--quant", row["quant"], "--runtime", row["runtime"],
            "--rig", str(_rig_file(row, tmp_path)), "--ctx", row["ctx"]]
    args += ["--runtime-version", row["runtime_version"]] if RELEASE.fullmatch(row["runtime_version"]) else []
    for column, flag in FLAGS:
        args += [flag, row[column]] if row[column] else []
    args += ["--enforce-eager"] if row["enforce_eager"] == "1" else []
    if row["images_per_prompt"]:
        args += ["--limit-mm-per-prompt", json.dumps({"image": int(row["images_per_prompt"])})]
    return args


def answer(row: dict, tmp_path: Path) -> dict:
    """`advisor check --json` at the row's settings."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*check_args(row, tmp_path), "--json"])
    assert code in (0, 1), (row["id"], code)
    return json.loads(out.getvalue())


def verdict(d: dict) -> str:
    return "tight" if d["tight"] else "fits" if d["fits"] else "runs" if d["runs"] else "no"


def _ids(outcome: str) -> list:
    return [pytest.param(r, id=r["id"], marks=[pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[r["id"]])]
                         if r["id"] in KNOWN_MISSES else []) for r in ROWS if r["outcome"] == outcome]


def test_the_data_is_what_the_md_describes():
    """15+ rows over three runtimes, every column documented, every row sourced and dated."""
    described = (DATA / "oom_reports.md").read_text()
    assert all(f"| `{c}` |" in described for c in ROWS[0]), "a column missing from oom_reports.md"
    assert len(ROWS) >= 15 and {r["runtime"] for r in ROWS} >= {"llama.cpp", "ollama", "vllm"}
    assert all(r["source_url"].startswith("https://github.com/") and len(r["date"]) == 10 for r in ROWS)
    assert {r["outcome"] for r in ROWS} == {"oom", "ran"} and len({r["id"] for r in ROWS}) == len(ROWS)
    assert set(KNOWN_MISSES) <= {r["id"] for r in ROWS if r["outcome"] == "oom"}


@pytest.mark.parametrize("row", _ids("oom"))
def test_an_out_of_memory_run_is_never_a_plain_fit(row, tmp_path):
    assert verdict(answer(row, tmp_path)) != "fits"


@pytest.mark.parametrize("row", _ids("ran"))
def test_a_run_that_ran_is_neither_tight_nor_refused(row, tmp_path):
    """Counter-examples: the margin must not turn a run that worked into "tight" or "does not run"."""
    assert verdict(answer(row, tmp_path)) in ("fits", "runs")


def test_tight_says_the_margin_that_decides_it(tmp_path, run_cli):
    """Llama 3.3 70B Q5_K_M on a 64 GB M4 Pro under Ollama leaves 0.9 GiB of the 48 GiB Metal working set:
    it fits, but under llama.cpp's 1 GiB --fit margin, so the answer is tight, in JSON and in words."""
    row = next(r for r in ROWS if r["id"] == "ollama-8331-q5")
    d = answer(row, tmp_path)
    assert d["fits"] and d["tight"]
    m = d["fit_margin"]
    assert m["margin_bytes"] == 1024 * 2**20 and 0 < m["free_bytes"] < m["margin_bytes"]
    assert "fit_params_target" in m["basis"]
    assert any(f["code"] == "FIT005" for f in d["findings"])
    text = run_cli(*check_args(row, tmp_path)).stdout
    words = " ".join(text.split())  # the text is wrapped at 80 columns
    assert "FITS, TIGHT" in words and "tight: 0.9 GiB free on gpu0, under the 1.0 GiB fit margin" in words


def test_a_plain_fit_keeps_the_margin_and_says_it_is_not_tight(tmp_path):
    row = next(r for r in ROWS if r["id"] == "ollama-8331-q4")
    d = answer(row, tmp_path)
    assert d["fits"] and not d["tight"] and d["fit_margin"]["free_bytes"] > d["fit_margin"]["margin_bytes"]
    assert not any(f["code"] == "FIT005" for f in d["findings"])


def test_runtimes_without_a_margin_report_none(tmp_path):
    d = answer(next(r for r in ROWS if r["id"] == "vllm-188-awq"), tmp_path)
    assert d["fit_margin"] is None and d["tight"] is False


def test_the_hip_pool_copy_of_the_scores(catalog):
    """Without flash attention the HIP back-end keeps one f16 copy of (cells x micro-batch x heads) in its legacy
    pool, 1.05 x: Qwen2.5-72B (64 heads) at 32,000 cells and ub 512 is 2.05 GiB; none with flash attention, on
    CUDA (its VMM pool is not counted yet) or on Metal."""
    m, rt = catalog.models["qwen2.5-72b"], catalog.runtimes["llama.cpp"]
    shape = mem.GraphShape(32000, holds_output=False, flash_attention=False, ubatch=512)
    pool = mem.attention_pool_bytes(m, rt, shape, "rocm")
    assert pool == 256 * -(-int(1.05 * 32000 * 512 * 64 * 2) // 256)
    assert abs(pool / GIB - 2.05) < 0.01
    assert mem.attention_pool_bytes(m, rt, shape._replace(flash_attention=True), "rocm") == 0
    assert mem.attention_pool_bytes(m, rt, shape, "cuda") == 0 == mem.attention_pool_bytes(m, rt, shape, "metal")
    assert mem.attention_pool_bytes(m, catalog.runtimes["vllm"], shape, "rocm") == 0


# XiongjieDai's llama-bench tables (bench/measurements.py): 1,108 full-offload runs labelled ran / out of memory.
# Reached with the 1 GiB margin: no OOM run is a plain fit (2 were before the margin, both now tight), and 22 of
# the 972 runs that ran are called tight (the cost of the margin on runs that fit with less than 1 GiB free). 23
# since each card's driver reserve comes from its nvidia-smi captures (rules/memory.toml gpu_reserved_mib): 70B
# Q4_K_M on one A40 (665 MiB reserved, not 400) and one L40S (the data-centre median, 536) now leave under 1 GiB
# (4 runs), while three 4090 runs (346 MiB) leave more.
XIONGJIEDAI_TIGHT_RAN_MAX = 23


def test_llama_bench_oom_runs_are_never_a_plain_fit(catalog):
    verdicts = {"oom": [], "ran": []}
    for case in load_cases():
        if not case.dataset.startswith("xiongjiedai"):
            continue
        placer = placer_for(catalog, case)
        p = placer.at(case.ctx)
        v = "tight" if tight_device(p, int(placer.runtime.fit_margin_mib * 2**20)) else "fits" if p.fits else "no"
        verdicts["ran" if case.measured is not None else "oom"].append(v)
    assert len(verdicts["oom"]) > 100 and len(verdicts["ran"]) > 900
    assert verdicts["oom"].count("fits") == 0
    assert verdicts["ran"].count("tight") <= XIONGJIEDAI_TIGHT_RAN_MAX
