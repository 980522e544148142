"""Traffic as a mix of request lengths: the classes of a published trace (rules/traffic.toml, `--request-mix`),
each of equal weight, instead of one `--prompt-tokens` / `--output-tokens`.

What is linear in the lengths takes the mix's means: the tokens a running request holds of the pool (each class's
prompt and half its output, each capped at the context), the KV a decode step reads, the prompts a step prefills
beside the decode tokens. Time to first token is not: each request waits for a slot freed by whichever request ends
(the mean), then prefills its own prompt, so its median is the median over the classes (advisor/engine/serving.py).
Without a mix the traffic is one class, the ask itself.
"""

from __future__ import annotations

import statistics

from advisor.engine.scenario import Scenario


def scenarios(sc: Scenario) -> tuple[Scenario, ...]:
    """One scenario per class of the mix, each with its prompt and output length; without a mix, the ask itself."""
    name = sc.options.request_mix
    if not name:
        return (sc,)
    mix = sc.rules.traffic.mix[name]
    return tuple(sc.with_options(prompt_tokens=p, output_tokens=o, request_mix=None)
                 for p, o in zip(mix.prompt_tokens, mix.output_tokens))


def mean_scenario(sc: Scenario) -> Scenario:
    """The mix as one request of its mean prompt and output (what the linear terms see); without a mix, the ask."""
    name = sc.options.request_mix
    if not name:
        return sc
    mix = sc.rules.traffic.mix[name]
    return sc.with_options(prompt_tokens=round(statistics.fmean(mix.prompt_tokens)),
                           output_tokens=round(statistics.fmean(mix.output_tokens)), request_mix=None)


def basis(sc: Scenario) -> str:
    """The mix in words, for the serving basis ("" without one)."""
    name = sc.options.request_mix
    if not name:
        return ""
    mix = sc.rules.traffic.mix[name]
    prompts = mix.prompt_tokens
    return (f"; requests as {name} ({mix.name}, {len(prompts)} classes of equal weight: prompts "
            f"{min(prompts):,}-{max(prompts):,} tokens, mean {statistics.fmean(prompts):,.0f}; "
            f"outputs mean {statistics.fmean(mix.output_tokens):,.0f}; {mix.source}), the median time to first token "
            f"over its classes")
