"""How fast a placement runs and what its links cost: the speed and interconnect stages of the engine.

Each stage takes the Scenario and the placement it was answered with; the arithmetic per device lives in
advisor.engine.speed (decode and prefill steps) and advisor.engine.interconnect (links and traffic).
"""

from __future__ import annotations

import math

from advisor.engine import memory as mem
from advisor.engine import speed as spd
from advisor.engine.family import family_of
from advisor.engine.interconnect import link_times, split_matrices
from advisor.engine.placement import Placement
from advisor.engine.result import Interconnect, Speed
from advisor.engine.scenario import Scenario
from advisor.engine.strategies import words_of

def decode_seconds(sc: Scenario, placement: Placement, depth: int, streams: int = 1) -> float:
    """Seconds per decode step of `streams` sequences, each with `depth` tokens already in its KV cache.

    The placement holds KV cache for `options.concurrency` sequences of `ctx` tokens; a step reads the
    filled part of the active streams' share, wherever it sits (GPUs or system RAM)."""
    options = sc.options
    per_stream = mem.kv_cells(sc.ctx, sc.runtime, sc.rules)
    held = family_of(sc.runtime).kv_sequences(options)  # sequences whose KV the placement holds
    share = streams * min(depth, per_stream) / (per_stream * held)
    kv = [int(d.kv_cache_bytes * share) for d in placement.devices]
    host_kv = int(placement.host.kv_cache_bytes * share)
    step = spd.decode_step(sc, placement, kv_depth_bytes=kv, streams=streams, host_kv_bytes=host_kv)
    lt = link_times(sc, placement, options.prompt_tokens, streams)
    return step.total_s + (lt.decode_s if lt else 0.0)


def prefill_seconds(sc: Scenario, placement: Placement, prompt_tokens: int, depth: int = 0) -> float:
    """Seconds to prefill a prompt of `prompt_tokens` after `depth` cached tokens, the links' share included."""
    pre = spd.prefill_time(sc, placement, prompt_tokens, depth)
    lt = link_times(sc, placement, prompt_tokens, 1)
    return pre.total_s + (lt.prefill_s if lt else 0.0)


def estimate_speed(sc: Scenario, placement: Placement) -> Speed:
    """Decode (empty and full context, and per stream under concurrency) and prefill speed of a placement."""
    rig, runtime, options, ctx = sc.rig, sc.runtime, sc.options, sc.ctx
    band = spd.error_band(spd.answer_kind(placement, rig, sc.model, runtime), spd.answer_family(placement, rig),
                          sc.rules)
    if not placement.runs:
        return Speed(None, None, None, None, None, basis="does not run on this rig", error_band=band)
    if not rig.speed_known:
        return Speed(None, None, None, None, None, error_band=band,
                     basis="unknown GPU (not in the catalog): its bandwidth and throughput are not known")
    decode = 1 / decode_seconds(sc, placement, depth=0)
    at_ctx = 1 / decode_seconds(sc, placement, depth=ctx)
    prefill = options.prompt_tokens / prefill_seconds(sc, placement, options.prompt_tokens)
    agg = per_stream = None
    if options.concurrency > 1:
        # every stream reads its own KV cache; on average each is half-way through its context
        step_t = decode_seconds(sc, placement, depth=ctx // 2, streams=options.concurrency)
        agg = options.concurrency / step_t
        per_stream = 1 / step_t
    return Speed(round(decode, 1), round(prefill, 1), round(at_ctx, 1),
                 round(agg, 1) if agg else None, round(per_stream, 1) if per_stream else None,
                 basis=_speed_basis(sc, placement), error_band=band)


def _family_basis(sc: Scenario) -> str:
    """What a runtime family's own factors make of the fractions (rules/speed.toml, bench/paged_fit.py)."""
    speed, family = sc.rules.speed, sc.runtime.family
    own = speed.prefill.family_efficiency.get(family)
    if not own:
        return ""
    text = f", its matrix products {own:g} of them, fitted on cited vllm bench serve sweeps (bench/paged_fit.py)"
    moe = speed.prefill.family_moe_efficiency.get(family)
    if not (sc.model.is_moe and moe and sc.rig.gpus):
        return text
    gpu = sc.rig.gpus[0].spec
    key, serial = spd.moe_decode_key(sc, gpu), spd.moe_decode_serial(sc, gpu)
    kernel = f" ({key.split(':', 1)[1]} experts)" if ":" in key else ""
    text += (f"; a MoE model's {moe:g} of that, and a decode step's {spd.moe_decode_factor(sc, gpu):g}{kernel} of "
             f"that again, fitted on cited vLLM MoE runs (bench/paged_fit.py)")
    share = "" if serial >= 1 else f"{serial:g} of "
    return text + (f", {share}the shorter of a step's weight stream and its products added to the longer" if serial
                   else "")


def _speed_basis(sc: Scenario, placement: Placement) -> str:
    where = words_of(placement.strategy).reads
    basis = (f"decode: bytes read per token over the memory bandwidth of {where} at the achievable fraction "
             f"fitted to public llama-bench results; prefill: 2 x active parameters FLOPs per token over dense "
             f"FP16 tensor throughput at the fitted fraction")
    if not sc.runtime.speed_fitted:
        basis += f" (fitted on llama.cpp; {sc.runtime.name} is assumed to reach the same fractions{_family_basis(sc)})"
    if placement.host.weights_bytes and placement.strategy not in ("layer_split", "tensor_parallel"):
        basis += (f"; the part in system RAM is read at {sc.rig.ram_bandwidth_gb_s:g} GB/s "
                  f"({sc.rig.ram_bandwidth_basis or 'given'}) at the rulebook's CPU fraction") + _cpu_basis(sc)
    return basis


def _cpu_basis(sc: Scenario) -> str:
    """What the rig's CPU adds to decode from system RAM: its fabric cap and its compute ceiling (empty: unknown)."""
    cpu = sc.rig.cpu_spec
    if cpu is None:
        return ""
    text = ""
    fabric = cpu.fabric_gb_s
    if fabric and fabric * sc.rig.cpu_sockets < sc.rig.ram_bandwidth_gb_s:
        text += (f", capped at {fabric * sc.rig.cpu_sockets:g} GB/s by what its {cpu.ccds * sc.rig.cpu_sockets} "
                 f"CCDs' fabric links read ({cpu.fabric_basis})")
    eff, peak = float(sc.rules.speed.cpu_decode.compute_efficiency), cpu.int8_gops * sc.rig.cpu_sockets
    if eff and peak:
        text += (f"; where slower, the {cpu.name} multiplies it at {eff * peak:,.0f} GOPS ({eff:g} of its "
                 f"{peak:,.0f} GOPS int8 peak on llama.cpp's default threads, hardware_db/cpus.toml)")
    return text


def _not_applicable(sc: Scenario, placement: Placement) -> Interconnect | None:
    """The verdict when no link is in play (one GPU, nothing runs, an unknown GPU), else None."""
    used = [d for d in placement.devices if d.total_bytes > 0]
    if len(used) < 2:
        why = "one GPU: nothing crosses a GPU-to-GPU link" if sc.rig.gpus else "no GPU: nothing crosses a GPU link"
        return Interconnect("not_applicable", 0.0, 1.0, why)
    if not placement.runs:
        return Interconnect("not_applicable", 0.0, 1.0, "does not run on this rig, so the link does not matter")
    if not sc.rig.speed_known:
        return Interconnect("not_applicable", 0.0, 1.0,
                            "a GPU is not in the catalog: without its bandwidth and throughput the link's share "
                            "of the time cannot be estimated")
    return None


def interconnect_verdict(sc: Scenario, placement: Placement) -> Interconnect:
    """PCIe or NVLink: the same workload's decode and prefill over each, the phase the link matters most in,
    and the verdict by the rulebook's thresholds (rules/interconnect.toml [verdict])."""
    na = _not_applicable(sc, placement)
    if na is not None:
        return na
    options, rules = sc.options, sc.rules
    streams, prompt = options.concurrency, options.prompt_tokens
    now, nv, pcie = (link_times(sc, placement, prompt, streams, mode=m) for m in ("as_is", "nvlink", "pcie"))
    assert now is not None and nv is not None and pcie is not None
    step = spd.decode_step(sc, placement, streams=streams)
    pre = spd.prefill_time(sc, placement, prompt)
    # The question is always "PCIe or NVLink": a rig that has NVLink is judged by what it would lose.
    dec_speedup = (step.total_s + pcie.decode_s) / (step.total_s + nv.decode_s)
    pre_speedup = (pre.total_s + pcie.prefill_s) / (pre.total_s + nv.prefill_s)
    dec_now, pre_now = step.total_s + now.decode_s, pre.total_s + now.prefill_s
    long_prompt = prompt >= int(rules.interconnect.verdict.long_prompt_tokens)
    phase, speedup, share = "decode", dec_speedup, now.decode_s / dec_now
    if (long_prompt or streams > 1) and pre_speedup > speedup:
        phase, speedup, share = "prefill", pre_speedup, now.prefill_s / pre_now
    if options.output_tokens:  # a stated workload: its whole requests, prompt and output together
        phase, speedup, share = "request", *_request_speedup(sc, placement, pre.total_s)
    v = rules.interconnect.verdict
    verdict = "needed" if speedup >= float(v.needed_above) else "helps" if speedup >= float(v.helps_above) \
        else "not_needed"
    summary = _verdict_summary(sc, placement, (now, pcie), (phase, speedup, share), verdict)
    details = (
        ("link", now.link.label),
        ("decode link time per token", f"{now.decode_s * 1e3:.3f} ms of {dec_now * 1e3:.2f} ms"),
        ("prefill link time", f"{now.prefill_s * 1e3:.1f} ms of {pre_now * 1e3:.1f} ms for {prompt} tokens"),
        ("decode speedup, NVLink over PCIe", f"{dec_speedup:.3f}x"),
        ("prefill speedup, NVLink over PCIe", f"{pre_speedup:.3f}x"),
    ) + ((("request speedup, NVLink over PCIe", f"{speedup:.3f}x"),) if phase == "request" else ())
    return Interconnect(verdict, round(share, 4), round(max(speedup, 1.0), 3), summary, details)


def _request_speedup(sc: Scenario, placement: Placement, prefill_s: float) -> tuple[float, float]:
    """(NVLink's speedup, the link's share as the rig is) of whole requests of `--prompt-tokens` and
    `--output-tokens` at `--concurrency`: the prompt, then the output's decode steps, each of which also carries
    the prompts of the requests that replace finished ones (advisor.engine.serving, chunked prefill), whose
    all-reduces carry those tokens too (`vllm bench serve` output throughput: tests/data/nvlink_tp_measurements.md)."""
    streams, prompt, out = sc.options.concurrency, sc.options.prompt_tokens, max(sc.options.output_tokens or 1, 1)
    carried = (streams - 1) * prompt / out
    step_s = spd.decode_step(sc, placement, streams=streams, tokens=streams + carried).total_s
    seconds = {}
    for mode in ("as_is", "nvlink", "pcie"):
        pre = link_times(sc, placement, prompt, 1, mode)
        dec = link_times(sc, placement, prompt, streams + math.ceil(carried), mode)
        seconds[mode] = (prefill_s + pre.prefill_s + out * (step_s + dec.decode_s), pre.prefill_s + out * dec.decode_s)
    return seconds["pcie"][0] / seconds["nvlink"][0], seconds["as_is"][1] / seconds["as_is"][0]


def _noun(sc: Scenario, phase: str) -> str:
    """The phase as the subject of a sentence; a whole request names its prompt and output lengths."""
    if phase != "request":
        return phase
    o = sc.options
    return f"each request ({o.prompt_tokens:,} prompt and {o.output_tokens:,} output tokens, {o.concurrency} at once)"


def _verdict_summary(sc: Scenario, placement: Placement, links: tuple, phase_speedup_share: tuple,
                     verdict: str) -> str:
    """The verdict in words: what crosses the link, its share of the time, and what NVLink would change."""
    (now, pcie), (phase, speedup, share) = links, phase_speedup_share
    if placement.strategy == "tensor_parallel" and placement.split_kind == "rows":
        what = f"row split synchronises {split_matrices(sc.model, sc.rules)} split matrix multiplies per token"
    elif placement.strategy == "tensor_parallel":
        what = "tensor parallel does 2 all-reduces per layer per token"
    else:
        what = (f"layer split moves {sc.model.hidden_size * 4 * sc.options.concurrency / 1024:.0f} KiB per token "
                f"between your GPUs")
    if now.link.kind == "network":
        return (f"{what}: {share:.1%} of the {phase} time on {now.link.label}; NVLink cannot join machines, "
                f"so the split between them is what matters (see NVL005).")
    if sc.rig.nvlink and now.link.kind != "nvlink":  # bridges join pairs: the all-reduce also crosses PCIe
        return (f"{what}: {share:.1%} of the {phase} time on {now.link.label}, between GPUs this rig's NVLink "
                f"bridges do not join, so the bridges it has cannot carry it; tensor parallel inside each NVLink "
                f"pair avoids it (NVL004).")
    if now.link.kind == "nvlink":
        return (f"{what}: {share:.1%} of the {phase} time on {now.link.label}; over PCIe ({pcie.link.label}) "
                f"{_noun(sc, phase)} would be {speedup:.2f}x slower"
                + (", so the bridge pays." if verdict != "not_needed" else ", so the bridge changes little."))
    return (f"{what}: {share:.1%} of the {phase} time on {now.link.label}; "
            f"NVLink would make {_noun(sc, phase)} {speedup:.2f}x as fast"
            + ("." if verdict != "not_needed" else ", so it would change little."))
