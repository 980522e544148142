"""Issue 17, items 1 and 2: the quality floor, targets first, and the trade-off table."""

from __future__ import annotations

import json

import pytest

from advisor.engine.check import evaluate, resolve_quant
from advisor.engine.choice import quality_floor
from advisor.engine.options import Options
from advisor.engine.rank import rank_models
from advisor.probe.flags import rig_from_flags

LOW_BIT = ("IQ1", "IQ2", "Q2_K")


def _check(catalog, model, gpus, ram=64, **kw):
    return evaluate(catalog, rig_from_flags(catalog, gpus, ram=ram), catalog.models[model], Options(**kw))


@pytest.mark.parametrize("gpus", [["rtx-5090"], ["rtx-3060-12gb"], ["m1-8gb"], [], ["2xrtx-3090"]],
                         ids=lambda g: "+".join(g) or "cpu-only")
def test_no_answer_without_flags_is_under_the_floor(catalog, gpus):
    rig = rig_from_flags(catalog, gpus, ram=64)
    for ranked in rank_models(catalog, rig, Options()):
        r = ranked.report
        floor = quality_floor(catalog, r.model, r.options)
        assert floor.admits(r.quant), (r.model.id, r.quant.id)
        assert not r.quant.id.startswith(LOW_BIT), (r.model.id, r.quant.id)


def test_the_floor_is_the_published_knee(catalog):
    floor = quality_floor(catalog, catalog.models["llama-3.1-70b"], Options())
    admitted = {q for q in ("Q4_K_M", "IQ4_XS", "Q3_K_M", "IQ3_M") if floor.admits(catalog.quants[q])}
    refused = {q for q in ("IQ3_XXS", "Q3_K_S", "Q2_K", "IQ2_M", "IQ2_XXS", "IQ1_S") if not floor.admits(catalog.quants[q])}
    assert admitted == {"Q4_K_M", "IQ4_XS", "Q3_K_M", "IQ3_M"}
    assert refused == {"IQ3_XXS", "Q3_K_S", "Q2_K", "IQ2_M", "IQ2_XXS", "IQ1_S"}
    # without a published KLD the bits per weight decide (exl2 at 3.0 bpw is under 3.5)
    assert not floor.admits(resolve_quant(catalog, "exl2-3.0")) and floor.admits(resolve_quant(catalog, "exl2-4.0"))


def test_gpt_oss_120b_on_a_5090_is_mxfp4_with_experts_in_ram(catalog):
    r = _check(catalog, "gpt-oss-120b", ["rtx-5090"])
    assert r.quant.id == "MXFP4" and r.placement.strategy == "moe_offload" and r.runs and not r.fits
    assert r.speed.decode_tokens_per_s >= 5
    assert "experts in RAM" in next(c for c in r.choices if c.picked).where


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_a_published_checkpoint_is_its_own_floor_on_a_paged_server(catalog, runtime):
    """gpt-oss on vLLM/SGLang loads OpenAI's mxfp4-bf16 checkpoint (4.25 bits a weight: the experts' figure), under
    the MXFP4 GGUF's whole-file 4.63: the floor is the published format as the runtime loads it, so the pick is
    the fitting checkpoint with its reason, not a fallback that claims nothing fits."""
    r = _check(catalog, "gpt-oss-120b", ["a100-sxm4-80gb"], runtime=runtime)
    assert r.quant.id == "mxfp4-bf16" and r.fits
    assert quality_floor(catalog, r.model, r.options).admits(r.quant)
    assert r.choice_why.startswith("the best quality above the floor that fits")
    assert not any("no quantization fits fully" in f.message for f in r.findings)


def test_70b_at_24k_on_two_3090s_takes_q8_0_kv_over_fewer_bits(catalog):
    # 24,576 tokens: Q4_K_M with a q8_0 cache fits with llama.cpp's 1 GiB fit margin left (at 32k it is only
    # tight, FIT005, and no longer the pick: tests/test_tight_consistency.py)
    r = _check(catalog, "llama-3.1-70b", ["2xrtx-3090"], ctx=24576)
    assert (r.quant.id, r.options.kv_type, r.fits, r.tight) == ("Q4_K_M", "q8_0", True, False)
    assert "q8_0 KV cache rather than fewer weight bits" in r.choice_why
    # the same quant with an f16 cache does not fit at 24k
    assert not _check(catalog, "llama-3.1-70b", ["2xrtx-3090"], ctx=24576, quant="Q4_K_M", kv_fixed=True).fits
    assert not any(c.quant.id == "Q4_K_M" and c.kv_type == "f16" and c.fits for c in r.choices)


def test_kv_cache_given_is_kept(catalog):
    r = _check(catalog, "llama-3.1-70b", ["2xrtx-3090"], ctx=32768, kv_type="f16", kv_fixed=True)
    assert r.options.kv_type == "f16" and r.quant.id != "Q4_K_M"
    assert not r.quant.id.startswith(LOW_BIT)


def test_speed_target_before_bits(catalog):
    # 4x P40: Q8_0 fits but decodes under reading speed; the pick is the best quality that reaches it
    r = _check(catalog, "llama-3.1-70b", ["4xtesla-p40"])
    q8 = next(c for c in r.choices if c.quant.id == "Q8_0" and c.kv_type == "f16")
    assert q8.fits and q8.decode_tokens_per_s < 5
    assert r.fits and r.speed.decode_tokens_per_s >= 5 and r.quant.bits_per_weight < q8.quant.bits_per_weight
    # a higher speed target goes further down, never under the floor
    fast = _check(catalog, "llama-3.1-70b", ["4xtesla-p40"], min_tps=8)
    assert fast.speed.decode_tokens_per_s >= 8 and fast.quant.bits_per_weight < r.quant.bits_per_weight
    assert "--min-tps" in fast.policy.text


def test_allow_low_bit_and_min_quality_lower_the_floor(catalog):
    r = _check(catalog, "llama-3.1-70b", ["rtx-4090"])
    assert not r.fits and not r.quant.id.startswith(LOW_BIT)
    assert any(f.code == "QNT003" for f in r.findings)
    low = _check(catalog, "llama-3.1-70b", ["rtx-4090"], allow_low_bit=True)
    assert low.fits and low.quant.id.startswith(LOW_BIT[:2])
    assert not any(f.code == "QNT003" for f in low.findings)
    mq = _check(catalog, "llama-3.1-8b", ["m1-8gb"], ctx=32768, min_quality="Q2_K")
    assert mq.quant.bits_per_weight >= catalog.quants["Q2_K"].bits_per_weight


def test_choices_json_contract(run_cli):
    r = run_cli("check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--ctx", "24576", "--ram", "64", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    keys = {"quant", "kv_cache_type", "max_context_tokens", "decode_tokens_per_s", "prefill_tokens_per_s",
            "quality_loss", "where", "picked", "why"}
    assert d["choices"] and all(keys <= set(c) for c in d["choices"])
    picked = [c for c in d["choices"] if c["picked"]]
    assert len(picked) == 1 and picked[0]["quant"] == d["quant"] == "Q4_K_M"
    assert picked[0]["kv_cache_type"] == d["kv_cache_type"] == "q8_0"
    assert all(not c["quant"].startswith(LOW_BIT) for c in d["choices"])
    assert "8,192" not in d["choice"]["policy"] and "24,576 context" in d["choice"]["policy"]
    assert "reading speed" in d["choice"]["policy"]


def test_choices_text_and_flags(run_cli):
    r = run_cli("check", "gpt-oss-120b", "--gpu", "rtx-5090", "--ram", "64")
    assert r.returncode == 1
    assert "Choices" in r.stdout and "experts in RAM" in r.stdout and "reading speed" in r.stdout
    assert " · MXFP4 · " in r.stdout.splitlines()[0]
    r = run_cli("check", "llama-3.1-70b", "--gpu", "rtx-4090", "--allow-low-bit", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["quant"].startswith(LOW_BIT[:2])
    r = run_cli("check", "llama-3.1-70b", "--gpu", "rtx-4090", "--min-quality", "nonsense")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_fit_on_a_5090_has_no_low_bit_rows(run_cli):
    r = run_cli("fit", "--gpu", "rtx-5090", "--all", "--json")
    rows = json.loads(r.stdout)
    assert rows and all(not (x["quant"] or "").startswith(LOW_BIT) for x in rows)


# Issue 26 (choosing): "best quality that reaches N tok/s" over-bought bits. Reading speed (or --min-tps)
# is the floor; while the pick decodes under comfort_factor x that, the next faster quantization is taken
# when the step adds at most Q4_K_M's own KLD (rules/quality.toml [targets]).

def _picked(r):
    return next(c for c in r.choices if c.picked)


def test_cpu_only_8b_does_not_buy_bits_at_reading_speed(catalog):
    # before: Q6_K at 5.6 tok/s, just over reading speed (F16 and Q8_0 under it)
    r = _check(catalog, "llama-3.1-8b", [])
    pol = r.policy
    assert pol.comfort_tokens_per_s == 2 * pol.target_tokens_per_s == 10
    q6 = next(c for c in r.choices if c.quant.id == "Q6_K" and c.kv_type == "f16")
    assert q6.meets_speed and q6.decode_tokens_per_s < pol.comfort_tokens_per_s
    pick = _picked(r)
    assert pick.decode_tokens_per_s > q6.decode_tokens_per_s
    assert pick.quality_loss - q6.quality_loss <= 2 * pol.step_kld  # two cheap steps at most from Q6_K
    assert not pick.below_floor and pick.quality_loss <= catalog.quants["IQ4_XS"].kld + 1e-6  # never 3-bit for speed
    assert f"{q6.decode_tokens_per_s:.1f} tok/s, under the comfortable 10" in r.choice_why
    assert "under the comfortable" in next(c for c in r.choices if c.quant.id == "Q6_K" and c.kv_type == "f16").why


def test_two_3090s_with_a_speed_target_take_the_cheap_step_to_comfort(catalog):
    # Qwen3 32B with --min-tps 12: Q8_0 reaches 12 but not twice it; Q6_K does for KLD +0.004
    r = _check(catalog, "qwen3-32b", ["2xrtx-3090"], min_tps=12)
    q8 = next(c for c in r.choices if c.quant.id == "Q8_0" and c.kv_type == "f16")
    assert q8.fits and 12 <= q8.decode_tokens_per_s < 24
    pick = _picked(r)
    assert (pick.quant.id, pick.fits) == ("Q6_K", True) and pick.decode_tokens_per_s >= 24
    # Llama 3.3 70B with --min-tps 10: Q4_K_M reaches 10, not 20; IQ4_XS is faster for KLD +0.005, and the
    # 3-bit quantizations (KLD +0.066 further) are never taken for comfort
    r = _check(catalog, "llama-3.3-70b", ["2xrtx-3090"], min_tps=10)
    assert r.quant.id == "IQ4_XS" and r.fits
    assert "IQ4_XS at" in r.choice_why and "Q4_K_M would decode" in r.choice_why


def test_comfortable_picks_are_kept(catalog):
    # already at twice reading speed: the best quality that fits stays the pick
    r = _check(catalog, "llama-3.1-70b", ["2xrtx-3090"])
    assert r.quant.id == "Q4_K_M" and r.speed.decode_tokens_per_s >= r.policy.comfort_tokens_per_s
    assert "steps down" not in r.choice_why
    assert _check(catalog, "qwen3-32b", ["2xrtx-3090"]).quant.id == "Q8_0"


def test_fit_and_check_pick_the_same(catalog):
    # `fit` measures only until a row fits at a comfortable speed (table=False); `check` measures every row:
    # the comfort step must reach the same pick either way
    from advisor.engine.check import evaluate as ev

    for gpus in (["2xrtx-3090"], []):
        rig = rig_from_flags(catalog, gpus, ram=64)
        for m in catalog.models.values():
            a, b = ev(catalog, rig, m, Options(), table=False), ev(catalog, rig, m, Options(), table=True)
            assert (a.quant.id, a.options.kv_type) == (b.quant.id, b.options.kv_type), (gpus, m.id)
