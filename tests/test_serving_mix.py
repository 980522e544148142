"""A request-length mix (`--request-mix`, rules/traffic.toml): a published trace's requests in ten classes, used by
the serving answer for the tokens a running request holds and the median time to first token.

The classes were computed from microsoft/vidur's copies of the Azure LLM inference traces of 2023 (see the file's
header); the trace files are not in this repository, so the classes are held to the trace's own recorded means and
medians, and the engine to what each class gives alone."""

from __future__ import annotations

import statistics

import pytest

from advisor.engine.check import evaluate
from advisor.engine.optiontable import option
from advisor.engine.options import Options
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags


@pytest.fixture(scope="module")
def mixes(catalog):
    return catalog.rules.traffic.mix


def test_each_mix_is_its_traces_tenths(mixes):
    """Ten classes of equal weight whose means are the trace's (within the rounding of ten whole-token means), and
    whose two middle classes bracket the trace's median prompt."""
    assert mixes
    for name, mix in mixes.items():
        assert len(mix.prompt_tokens) == len(mix.output_tokens) == 10, name
        assert "@" in mix.source and mix.requests > 1000
        assert abs(statistics.fmean(mix.prompt_tokens) - mix.mean_prompt_tokens) <= 0.5, name
        assert abs(statistics.fmean(mix.output_tokens) - mix.mean_output_tokens) <= 0.5, name
        assert list(mix.prompt_tokens) == sorted(mix.prompt_tokens)  # tenths in prompt order
        assert mix.prompt_tokens[4] <= mix.median_prompt_tokens <= mix.prompt_tokens[5], name


def test_the_option_names_every_mix(mixes):
    text = option("request_mix").help
    assert all(name in text for name in mixes)


def _serving(catalog, gpus: str, **kw):
    rig = rig_from_flags(catalog, [gpus])
    return evaluate(catalog, rig, catalog.models["llama-3.1-8b"],
                    Options(runtime="vllm", quant="BF16", ctx=8192, **kw)).serving


def test_a_running_request_holds_its_classes_tokens_by_how_long_each_runs(catalog, mixes):
    """Each class holds its prompt and half its output while it runs, for its output's steps: the running requests
    hold sum(O x (P + O/2)) / sum(O) each, and the pool runs as many as that fits."""
    mix = mixes["azure-conv"]
    pairs = list(zip(mix.prompt_tokens, mix.output_tokens))
    held = sum(o * (p + o / 2) for p, o in pairs) / sum(o for _, o in pairs)
    s = _serving(catalog, "rtx-4090", concurrency=256, request_mix="azure-conv")
    assert s.request_length_tokens == round(statistics.fmean(p + o for p, o in pairs))
    assert s.running == int(s.kv_cache_tokens // held)
    assert f"holding {held:,.0f} on average" in s.basis
    # one request of the mean lengths holds more (the long prompts rarely run long) and fewer of them run
    flat = _serving(catalog, "rtx-4090", concurrency=256, prompt_tokens=round(mix.mean_prompt_tokens),
                    output_tokens=round(mix.mean_output_tokens))
    assert flat.running < s.running


def test_decode_reads_the_kv_cache_the_classes_hold(catalog, mixes):
    """A decode step reads each running request's KV cache: under a mix the classes' tokens by how long each runs
    (1,212 on azure-conv), less than one request of the mean lengths holds (1,260), so the same running requests
    decode faster than those of the mean lengths."""
    mix = mixes["azure-conv"]
    s = _serving(catalog, "h100-sxm", concurrency=8, request_mix="azure-conv")
    flat = _serving(catalog, "h100-sxm", concurrency=8, prompt_tokens=round(mix.mean_prompt_tokens),
                    output_tokens=round(mix.mean_output_tokens))
    assert s.running == flat.running == 8  # a memory-bound step (90.3 against 90.1 tok/s a stream)
    assert s.per_stream_decode_tokens_per_s > flat.per_stream_decode_tokens_per_s


def test_time_to_first_token_is_the_median_over_the_classes(catalog, mixes):
    """With room for every client (no queue), each class's first token comes after its own prompt's prefill: the
    median lies between the 5th and 6th classes' (right-skewed prompts: below the mean prompt's)."""
    mix = mixes["azure-code"]
    s = _serving(catalog, "h100-sxm", concurrency=8, request_mix="azure-code")
    assert s.queued == 0
    alone = [_serving(catalog, "h100-sxm", concurrency=8, prompt_tokens=p, output_tokens=o).ttft_p50_s
             for p, o in zip(mix.prompt_tokens, mix.output_tokens)]
    mean = _serving(catalog, "h100-sxm", concurrency=8, prompt_tokens=round(mix.mean_prompt_tokens),
                    output_tokens=round(mix.mean_output_tokens)).ttft_p50_s
    assert sorted(alone)[4] * 0.9 <= s.ttft_p50_s <= sorted(alone)[5] * 1.1
    assert s.ttft_p50_s < mean
    assert "requests as azure-code" in s.basis


def test_a_mix_is_checked(catalog):
    rig = rig_from_flags(catalog, ["rtx-4090"])
    model = catalog.models["llama-3.1-8b"]
    with pytest.raises(AdvisorError, match="unknown request mix"):
        evaluate(catalog, rig, model, Options(runtime="vllm", request_mix="sharegpt-ish"))
    with pytest.raises(AdvisorError, match="has no option --request-mix"):  # llama.cpp serves no batch of requests
        evaluate(catalog, rig, model, Options(request_mix="azure-conv"))
    with pytest.raises(AdvisorError, match="--output-tokens"):
        evaluate(catalog, rig, model, Options(runtime="vllm", request_mix="azure-conv", output_tokens=100))


def test_the_text_answer_names_the_mixs_mean_request(catalog):
    """The serving rows say the mix's mean request and its prompt, not --prompt-tokens' default."""
    from advisor.report.text import render_text

    rig = rig_from_flags(catalog, ["h100-sxm"])
    r = evaluate(catalog, rig, catalog.models["llama-3.1-8b"],
                 Options(runtime="vllm", quant="BF16", ctx=8192, concurrency=8, request_mix="azure-conv"))
    text = render_text(r)
    prompt = r.serving.request_length_tokens - r.serving.output_tokens
    assert "request length (mean of azure-conv)" in text
    assert f"time to first token ({prompt:,} tokens)" in text and prompt != r.options.prompt_tokens
