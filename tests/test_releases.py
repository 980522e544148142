"""`--runtime-version`: a runtime as one of its older releases started (rules/runtimes.toml [[runtime.releases]],
advisor/engine/releases.py). vLLM 0.8.0-0.8.3 planned 1,024 requests per step on every GPU and until 0.17 its
sampler's warm-up sorted the logits with PyTorch (9.5 f32 copies live); the public OOM report that ran into
it (vllm-project/vllm#17238, tests/data/oom_reports.csv) is a plain fit for today's vLLM and does not start at
0.8.1."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.engine.check import evaluate
from advisor.engine.memory import cuda_graph_bytes
from advisor.engine.options import Options
from advisor.engine.releases import at_release, parse_version
from advisor.probe.flags import rig_from_flags
from advisor.errors import AdvisorError

HYBRID = list(csv.DictReader((Path(__file__).parent / "data" / "vllm_hybrid_pool_logs.csv").open(encoding="utf-8")))
QWEN_32B_INT8_2X3090 = ("check", "qwen2.5-32b", "--quant", "int8", "--runtime", "vllm", "--gpu", "2xrtx-3090",
                        "--ctx", "4096", "--gpu-memory-utilization", "0.9", "--enforce-eager",
                        "--tensor-parallel-size", "2", "--json")


@pytest.mark.parametrize(("text", "parsed"), [("0.8.1", (0, 8, 1)), ("v0.8.5.post1", (0, 8, 5)), ("0.10", (0, 10)),
                                                   ("4567", (4567,)), ("0.11.0rc2.dev98", (0, 11, 0))])
def test_release_numbers_are_read_as_printed(text, parsed):
    assert parse_version(text) == parsed


@pytest.mark.parametrize("text", ["banana", "", "latest", ".8", "0.x", "1.x"])
def test_anything_else_is_refused(text):
    with pytest.raises(AdvisorError):
        parse_version(text)


def test_each_range_applies_only_inside_its_releases(catalog):
    vllm = catalog.runtimes["vllm"]
    assert at_release(vllm, None) is vllm and at_release(vllm, "0.26.0") == vllm and at_release(vllm, "0.28.1") == vllm
    one_step = replace(vllm, in_flight_batches=1)  # before PR #47728 (0.26.0)
    assert at_release(vllm, "0.20.0") == one_step and at_release(vllm, "0.25.1") == one_step
    graphs_after_the_pool = replace(one_step, cuda_graph_mib=0, gpu_memory_utilization=0.9)
    assert at_release(vllm, "0.19.1") == graphs_after_the_pool
    assert at_release(vllm, "0.7.3") == replace(graphs_after_the_pool, sampler_copies=0.0)  # V0: no sampler warm-up
    assert at_release(vllm, "0.8.4") == replace(graphs_after_the_pool, sampler_copies=9.5)
    old = at_release(vllm, "0.8.1")
    assert (old.max_num_seqs, old.sampler_copies, old.cuda_graph_mib) == (1024, 9.5, 0)
    mid = at_release(vllm, "0.16.1")
    assert (mid.max_num_seqs, mid.sampler_copies) == (vllm.max_num_seqs, 9.5)
    assert at_release(vllm, "0.17.0").sampler_copies == vllm.sampler_copies
    assert at_release(catalog.runtimes["llama.cpp"], "0.8.1") == catalog.runtimes["llama.cpp"]
    assert all(r.basis for r in vllm.releases)


def test_before_0_20_the_graphs_do_not_come_out_of_the_pool_and_the_share_is_0_9(catalog):
    """The Gemma 3 start-up log of vLLM 0.11 (tests/data/vllm_hybrid_pool_logs.csv) sized its pool and then logged
    "Graph capturing finished in 22 secs, took 1.02 GiB", and its non-default arguments name no share: asked for a
    release before 0.20 (0.19.1, whose sampler is today's, unlike 0.11's), the pool keeps what today's vLLM gives
    its graph profile (102 graphs on this card: 1,024 requests, sizes up to 512, each a piecewise and a full one)
    and loses the 0.02 of the card that PR #38284 added to the default share."""
    r = next(r for r in HYBRID if r["model"] == "gemma-3-27b")
    rig = rig_from_flags(catalog, [r["gpu"]])
    pools = [evaluate(catalog, rig, catalog.models[r["model"]],
                      Options(runtime="vllm", ctx=int(r["max_model_len"]), max_num_batched_tokens=8192,
                              runtime_version=version)).serving.devices[0].pool_bytes
             for version in ("0.19.1", None)]
    vllm = catalog.runtimes["vllm"]
    share = (vllm.gpu_memory_utilization - 0.9) * rig.gpus[0].capacity_bytes
    graphs = cuda_graph_bytes(vllm, 1024, 8192)
    assert vllm.gpu_memory_utilization == 0.92 and at_release(vllm, "0.19.1").cuda_graph_mib == 0
    assert graphs == (vllm.cuda_graph_mib + 100 * vllm.cuda_graph_each_mib) * 2**20
    assert pools[0] - pools[1] == pytest.approx(graphs - share, abs=2**20)


def test_the_sampler_copies_are_the_tensors_counted_in_the_toml(catalog):
    """0.5 (16-bit logits) + 1 (f32) + 1 (sorted values) + 2 (int64 indices) + 2 (Sort.cu's int64 reverse_indices)
    + 1 + 2 (cub's third keys and values buffers): the live tensors while apply_top_k_top_p sorts the logits."""
    rel = next(r for r in catalog.runtimes["vllm"].releases if r.sampler_copies)
    assert rel.sampler_copies == 0.5 + 1 + 1 + 2 + 2 + 1 + 2


def test_the_0_8_1_report_does_not_start_and_today_s_vllm_would(run_cli):
    import json

    today = json.loads(run_cli(*QWEN_32B_INT8_2X3090).stdout)
    then = json.loads(run_cli(*QWEN_32B_INT8_2X3090, "--runtime-version", "0.8.1").stdout)
    assert today["serving"]["starts"] and today["serving"]["max_num_seqs"] == 256
    assert not then["serving"]["starts"] and not then["fits"]
    fewer = [m for m in then["serving"]["remedies"] if m["option"] == "--max-num-seqs 1"]
    assert len(fewer) == 1 and fewer[0]["starts"]  # the remedy names the sampler's request count
    fixed = json.loads(run_cli(*QWEN_32B_INT8_2X3090, "--runtime-version", "0.8.1", "--max-num-seqs", "8").stdout)
    assert fixed["serving"]["starts"]  # the thread's own fix: "max_num_seqs = 4 or 8 ... started normally"


def test_a_bad_release_is_one_line_and_exit_2(run_cli):
    r = run_cli(*QWEN_32B_INT8_2X3090, "--runtime-version", "banana")
    assert r.returncode == 2 and "is not a release number" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_every_default_a_release_changes_is_a_runtime_field():
    """advisor/engine/releases.py applies each field of RuntimeRelease but its range to the runtime by name."""
    from dataclasses import fields

    from advisor.catalog.types import RuntimeRelease, RuntimeSpec

    spec = {f.name for f in fields(RuntimeSpec)}
    assert {f.name for f in fields(RuntimeRelease)} - {"since", "before", "basis"} <= spec
