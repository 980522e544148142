"""llama.cpp -sm tensor (PR #19378, its "meta device"): placement as llama_meta_device_get_split_state cuts the
weights and KV cache, the constraints it refuses (rules/runtimes.toml tensor_*), the command line in and out,
its speed held to public -sm layer vs -sm tensor tables (tests/data/llamacpp_sm_tensor.csv, bench/sm_tensor.py),
and the split choice (SPL002). -sm row stays a mode of its own (tests/test_row_split.py)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from advisor.engine.check import evaluate
from advisor.engine.options import Options
from advisor.engine.placement import deal_units
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags
from tests.test_launch import _answer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import sm_tensor as smt  # noqa: E402

# Reached on tests/data/llamacpp_sm_tensor.csv (11 rows, PR #19378; nothing fitted on them), bench/sm_tensor.py:
TG_TENSOR_MEDIAN_MAX = 0.31   # reached 30.2% (-sm tensor decode tokens/s, 5 rows)
TG_RATIO_MEDIAN_MAX = 0.18    # reached 17.7% (tensor/layer decode ratio)
# reached 6.5% (-sm tensor prefill tokens/s, 6 rows; the dev-branch MoE rows are 3-4x off); 2.7% before issue 26
# refitted the speed tables with a flash-attention term: the 4x RTX 4090 llama-3.2-1b pp8192 row (flash attention
# on) moved from +3.6% to +9.0% and gpt-oss-120b pp8192 from +1.7% to +4.0%; nothing here was fitted
PP_TENSOR_MEDIAN_MAX = 0.066


def _eval(catalog, model, gpus, **opts):
    rig = rig_from_flags(catalog, gpus, ram=256)
    return evaluate(catalog, rig, catalog.models[model], Options(**opts))


def test_weights_and_kv_are_cut_by_heads_and_columns_evenly_without_ts(catalog):
    """Two GPUs, no -ts: each holds half of every split matrix and of the KV cache (8 KV heads: 4 each), and
    its own copy of the mirrored norms; the input embedding stays in host RAM."""
    r = _eval(catalog, "llama-3.1-70b", ["2xrtx-3090"], quant="Q4_K_M", split="tensor")
    p = r.placement
    assert p.strategy == "tensor_parallel" and p.split_kind == "meta" and p.fits
    a, b = p.devices
    assert a.weights_bytes == b.weights_bytes and a.kv_cache_bytes == b.kv_cache_bytes
    lay = p.layout
    assert p.host.weights_bytes == lay.embed_bytes
    gpu_total = a.weights_bytes + b.weights_bytes
    assert lay.gpu_resident_total < gpu_total < lay.gpu_resident_total * 1.01  # mirrored norms: a little more
    assert a.kv_cache_bytes + b.kv_cache_bytes == pytest.approx(r.kv_cache_bytes, rel=1e-6)


def test_ts_sets_the_proportion(catalog):
    """-ts 3,1: GPU 0 gets three quarters of the heads (6 of 8 KV heads), columns and vocabulary rows."""
    r = _eval(catalog, "llama-3.1-8b", ["2xrtx-3090"], quant="Q4_K_M", split="tensor", tensor_split=(3.0, 1.0))
    a, b = r.placement.devices
    assert a.kv_cache_bytes == 3 * b.kv_cache_bytes
    assert 2.8 < a.weights_bytes / b.weights_bytes < 3.1


def test_the_rounding_rotates_over_the_layers(catalog):
    """8 KV heads over 3 GPUs: 3/3/2 in one layer, the short share moves from layer to layer, so over the
    layers each GPU holds about a third of the cache."""
    assert deal_units(8, [1 / 3] * 3, 0) == [3, 3, 2] and deal_units(8, [1 / 3] * 3, 2) == [3, 2, 3]
    r = _eval(catalog, "llama-3.1-70b", ["3xrtx-3090"], quant="Q4_K_M", split="tensor")
    kv = [d.kv_cache_bytes for d in r.placement.devices]
    assert max(kv) / min(kv) < 1.1


def test_routed_experts_are_split_too(catalog):
    """Unlike -sm row (experts stay on the layer's GPU), the meta device cuts every expert's feed-forward
    dimension: both GPUs hold half of each layer's experts."""
    r = _eval(catalog, "qwen3-30b-a3b", ["2xrtx-3090"], quant="Q4_K_M", split="tensor")
    a, b = r.placement.devices
    assert a.expert_bytes > 0 and a.expert_bytes == b.expert_bytes


@pytest.mark.parametrize("opts, words", [
    ({"flash_attn": "off"}, "requires flash_attn"),
    ({"kv_type": "q8_0"}, "KV cache quantization not implemented"),
])
def test_what_it_refuses(catalog, opts, words):
    r = _eval(catalog, "llama-3.1-8b", ["2xrtx-3090"], quant="Q4_K_M", split="tensor", **opts)
    assert not r.placement.runs and words in r.placement.problem
    assert _eval(catalog, "llama-3.1-8b", ["2xrtx-3090"], quant="Q4_K_M", split="layer", **opts).placement.runs


def test_back_ends_it_is_not_documented_for(catalog):
    """docs/multi-gpu.md: CUDA and HIP/ROCm run -sm tensor; SYCL has only none and layer."""
    r = _eval(catalog, "llama-3.1-8b", ["2xarc-a770-16gb"], quant="Q4_K_M", split="tensor")
    assert not r.placement.runs and "sycl" in r.placement.problem
    amd = _eval(catalog, "llama-3.1-8b", ["2xrx-7900-xtx"], quant="Q4_K_M", split="tensor")
    assert amd.placement.runs and amd.placement.split_kind == "meta"


def test_architectures_it_does_not_implement(catalog):
    r = _eval(catalog, "deepseek-r1", ["8xh200-sxm"], quant="Q2_K", split="tensor")
    assert not r.placement.runs and "deepseek2" in r.placement.problem
    layer = _eval(catalog, "deepseek-r1", ["8xh200-sxm"], quant="Q2_K", split="layer")
    spl = {f.code: f for f in layer.findings}["SPL002"]
    assert "does not run here" in spl.message


@pytest.mark.parametrize("split, word, kind", [("tensor", "-sm tensor", "meta"), ("row", "-sm row", "rows")])
def test_command_round_trips(catalog, split, word, kind):
    first = _answer(catalog, "llama-3.1-70b", "--gpu", "2xrtx-3090", "--quant", "Q4_K_M", "--split", split)
    assert first.placement.split_kind == kind and f" {word} " in first.launch.command
    again = _answer(catalog, "--cmd", first.launch.command, "--gpu", "2xrtx-3090")
    assert again.split == split and again.placement.split_kind == kind
    assert [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes) for d in first.placement.devices] == \
        [(d.weights_bytes, d.kv_cache_bytes, d.overhead_bytes) for d in again.placement.devices]
    assert again.launch.command == first.launch.command


def test_ts_in_a_tensor_command_is_read(catalog):
    r = _answer(catalog, "--cmd", "llama-server -m llama-3.1-8b-Q4_K_M.gguf -ngl 99 -sm tensor -ts 3,1 -c 8192",
                "--gpu", "2xrtx-3090")
    a, b = r.placement.devices
    assert r.placement.split_kind == "meta" and a.kv_cache_bytes == 3 * b.kv_cache_bytes


def test_row_split_is_only_where_the_runtime_has_it(catalog):
    with pytest.raises(AdvisorError):
        _eval(catalog, "llama-3.1-8b", ["2xrtx-3090"], quant="Q4_K_M", split="row", runtime="ollama")
    ik = _eval(catalog, "llama-3.1-8b", ["2xrtx-3090"], quant="Q4_K_M", split="tensor", runtime="ik_llama.cpp")
    assert ik.placement.split_kind == "rows"  # ik_llama.cpp has no meta device: its tensor split is by rows


@pytest.fixture(scope="module")
def scored(catalog):
    return smt.scored(catalog)


def test_decode_against_public_tables(scored):
    t50, _, q50, _ = smt.summary(scored, "tg")
    assert t50 <= TG_TENSOR_MEDIAN_MAX and q50 <= TG_RATIO_MEDIAN_MAX


def test_the_quoted_score_is_what_the_data_gives(catalog, scored):
    """rules/interconnect.toml [sm_tensor], which SPL002 quotes, is what bench/sm_tensor.py gives."""
    import statistics

    q = catalog.rules.interconnect.sm_tensor
    tg = [s for s in scored if s.test == "tg"]
    assert q.decode_rows == len(tg)
    assert q.decode_ratio_median_pct == round(100 * statistics.median(abs(s.ratio_error) for s in tg), 1)
    assert q.decode_ratio_bias_pct == round(100 * statistics.median(s.ratio_error for s in tg), 1)


def test_prefill_against_public_tables(scored):
    t50, _, _, _ = smt.summary(scored, "pp")
    assert t50 <= PP_TENSOR_MEDIAN_MAX


def test_where_tensor_pays_the_direction_holds(scored):
    """A dense model on four GPUs decodes faster with -sm tensor (measured 1.30x) and prefills slower (0.42x):
    the engine says the same of both."""
    by = {s.label: s for s in scored}
    tg = by["4x rtx-4090 llama-3.2-1b F16 tg128"]
    pp = by["4x rtx-4090 llama-3.2-1b F16 pp512"]
    assert tg.measured_ratio > 1 and tg.predicted_ratio > 1
    assert pp.measured_ratio < 1 and pp.predicted_ratio < 1


def test_the_link_matters_for_tensor_not_for_layer(catalog):
    """Tensor parallel waits on two all-reduces a layer: host-staged PCIe (GeForce without P2P) costs more of the
    step than peer-to-peer, and NVLink helps it more than it helps a layer split."""
    rig = rig_from_flags(catalog, ["2xrtx-3090"], ram=256)
    m = catalog.models["llama-3.1-70b"]

    def ans(split, p2p):
        return evaluate(catalog, dataclasses.replace(rig, p2p=p2p), m, Options(quant="Q4_K_M", split=split))

    staged, peer = ans("tensor", False), ans("tensor", True)
    assert staged.interconnect.link_time_share > peer.interconnect.link_time_share
    assert peer.speed.decode_tokens_per_s > staged.speed.decode_tokens_per_s
    assert staged.interconnect.nvlink_speedup > ans("layer", False).interconnect.nvlink_speedup


def test_split_choice_is_stated(catalog):
    r = _eval(catalog, "llama-3.1-70b", ["2xrtx-3090"], quant="Q4_K_M")
    assert r.placement.strategy == "layer_split"
    layer, tensor = r.split_choices
    assert (layer.split, tensor.split) == ("layer", "tensor")
    assert tensor.decode_tokens_per_s > layer.decode_tokens_per_s
    spl = {f.code: f for f in r.findings}["SPL002"]
    assert "-sm tensor" in spl.message and "pays" in spl.message
    one = _eval(catalog, "llama-3.1-8b", ["rtx-3090"], quant="Q4_K_M")
    assert "SPL002" not in {f.code for f in one.findings} and one.split_choices == ()


def test_split_choices_in_json(catalog):
    from advisor.report.jsonout import check_json

    out = check_json(_eval(catalog, "llama-3.1-70b", ["2xrtx-3090"], quant="Q4_K_M"))
    assert [c["split"] for c in out["split_choices"]] == ["layer", "tensor"]
    assert out["split_choices"][1]["decode_tokens_per_s"] > out["split_choices"][0]["decode_tokens_per_s"]
