"""Serving on a paged-KV runtime (vLLM, SGLang): the KV pool, how many requests run at once, and what
would make it start.

A paged runtime reserves its memory fraction of each GPU at start, loads the weights, profiles one
batch (the activation peak), captures CUDA graphs, and gives everything left to one pool of KV pages.
It starts when one request of the full context (vLLM `--max-model-len`) fits in that pool; more
requests share the pool and the rest wait in the queue (or are preempted). The pool per GPU is what
the placement leaves: capacity (the memory fraction of the card) minus weights minus overhead. Every
GPU holds the pages of its own layers and heads, so the GPU with the fewest pages decides; vLLM logs
the result as "GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request: X".
"""

from __future__ import annotations

from dataclasses import replace

from advisor.catalog.types import RuntimeSpec
from advisor.engine import fraction
from advisor.engine import speed as spd
from advisor.engine.interconnect import link_times
from advisor.engine.options import Options
from advisor.engine.placement import Placement, Placer
from advisor.engine.result import PoolDevice, Remedy, Serving
from advisor.engine.rig import Rig
from advisor.engine.scenario import Scenario


def pool(placement: Placement, runtime: RuntimeSpec, ctx: int) -> tuple[int, int, tuple[PoolDevice, ...]]:
    """(tokens, bytes, per-GPU shares) of the pool a placement leaves; `ctx` is the context of the one
    request whose KV cache the placement holds."""
    block = max(runtime.kv_block_tokens, 1)
    shares, tokens = [], None
    for d in placement.devices:
        if d.total_bytes <= 0:  # a GPU the run does not use
            continue
        free = max(d.capacity_bytes - d.weights_bytes - d.overhead_bytes, 0)
        per_token = d.kv_cache_bytes / max(ctx, 1)
        t = int(free // (per_token * block)) * block if per_token > 0 else 0
        shares.append(PoolDevice(d.device, free, t))
        tokens = t if tokens is None else min(tokens, t)
    return tokens or 0, sum(s.pool_bytes for s in shares), tuple(shares)


def memory_fraction(runtime: RuntimeSpec, options: Options, rig: Rig | None = None) -> float:
    """The user's fraction, else the runtime's default for these GPUs (advisor/engine/fraction.py)."""
    return fraction.memory_fraction(runtime, options, [g.capacity_bytes for g in rig.gpus] if rig else None)


def _basis(runtime: RuntimeSpec, share: float, ctx: int) -> str:
    pages = (f"one pool of {runtime.kv_block_tokens}-token pages" if runtime.kv_block_tokens > 1
             else "one pool of token slots")
    if runtime.fraction_of_free:
        head = (f"{share:g} of what each GPU has free at start, less weights, is {pages} (activations and CUDA "
                f"graphs come out of the rest)")
    else:
        head = (f"{share:g} of each GPU, less weights, the activation peak of one profile batch and CUDA graphs, "
                f"is {pages}")
    return f"{head}; the GPU with the fewest pages decides; a request of {ctx:,} tokens is the unit of concurrency"


def serve(sc: Scenario, placement: Placement, max_num_seqs: int = 0) -> Serving:
    """The paged KV pool of this placement: how many requests of the context run at once, how many queue, and
    their time to first token and decode speeds."""
    rig, runtime, options, ctx = sc.rig, sc.runtime, sc.options, sc.ctx
    tokens, total, shares = pool(placement, runtime, ctx)
    conc = tokens / max(ctx, 1) if placement.runs else 0.0
    used = [d for d in placement.devices if d.total_bytes > 0]
    spare = min((d.free_bytes for d in used), default=0)
    if runtime.requests_rule and not options.max_num_seqs and placement.runs:
        max_num_seqs = fraction.default_max_requests(runtime, tokens, ctx)  # its own cap, from the pool
    cap = max_num_seqs or options.concurrency
    running = min(options.concurrency, cap, int(conc)) if conc >= 1 else 0
    s = Serving(kv_cache_tokens=tokens if placement.runs else 0, kv_cache_bytes=total if placement.runs else 0,
                request_tokens=ctx, max_concurrency=round(conc, 2), requested=options.concurrency,
                running=running, queued=options.concurrency - running, max_num_seqs=cap,
                memory_fraction=memory_fraction(runtime, options, rig), devices=shares, spare_bytes=spare,
                basis=_basis(runtime, memory_fraction(runtime, options, rig), ctx))
    if running and rig.speed_known:
        s = _with_speeds(sc, placement, s, running)
    if not s.starts or s.marginal(int(runtime.pool_spread_mib * 1024**2)):
        s = replace(s, remedies=remedies(sc, placement))
    return s


def _with_speeds(sc: Scenario, placement: Placement, s: Serving, running: int) -> Serving:
    """Time to first token and decode speeds of `running` requests served at once."""
    options, ctx = sc.options, sc.ctx
    pre = spd.prefill_time(sc, placement, options.prompt_tokens)
    lt = link_times(sc, placement, options.prompt_tokens, 1)
    ttft = pre.total_s + (lt.prefill_s if lt else 0.0)
    # each running request reads its own KV cache, on average half of its context
    kv = [int(d.kv_cache_bytes * running * 0.5) for d in placement.devices]
    # under sustained load each finished request is replaced by a new one, whose prompt is computed
    # (chunked prefill) in the steps the other streams decode: (running - 1) x prompt / output tokens
    # a step on top of the `running` decode tokens (what makes a large batch compute-bound)
    output = max(ctx - options.prompt_tokens, 1)
    prefill = (running - 1) * min(options.prompt_tokens, ctx) / output
    step = spd.decode_step(sc, placement, kv_depth_bytes=kv, streams=running, tokens=running + prefill)
    lt_dec = link_times(sc, placement, options.prompt_tokens, running)
    step_s = step.total_s + (lt_dec.decode_s if lt_dec else 0.0)
    return replace(s, ttft_s=round(ttft, 3), ttft_all_s=round(ttft * running, 3),
                   aggregate_decode_tokens_per_s=round(running / step_s, 1),
                   per_stream_decode_tokens_per_s=round(1 / step_s, 1))


def remedies(sc: Scenario, placement: Placement) -> tuple[Remedy, ...]:
    """Each single change, in the runtime's own option names, that lets one request start, with the
    longest context it then allows; then all of them together."""
    rig, runtime, options, ctx = sc.rig, sc.runtime, sc.options, sc.ctx
    names = runtime.option_names
    tries: list[tuple[str, Options]] = []
    if "fp8" in runtime.kv_types and options.kv_type != "fp8" and "kv_cache_dtype" in names:
        fp8 = names.get("kv_cache_dtype_fp8") or f"{names['kv_cache_dtype']} fp8"  # as the runtime spells it
        tries.append((fp8, replace(options, kv_type="fp8")))
    if runtime.remedy_memory_fraction > memory_fraction(runtime, options, rig) and "memory_fraction" in names:
        tries.append((f"{names['memory_fraction']} {runtime.remedy_memory_fraction:g}",
                      replace(options, memory_fraction=runtime.remedy_memory_fraction)))
    if runtime.cuda_graph_mib and not options.enforce_eager and "eager" in names:
        tries.append((names["eager"], replace(options, enforce_eager=True)))
    if len(tries) > 1:
        both = options
        for _, o in tries:
            both = replace(both, kv_type=o.kv_type if o.kv_type != options.kv_type else both.kv_type,
                           memory_fraction=o.memory_fraction or both.memory_fraction,
                           enforce_eager=o.enforce_eager or both.enforce_eager)
        tries.append((" ".join(t for t, _ in tries), both))
    out = []
    for text, opts in tries:
        p = Placer(replace(sc, options=opts))
        at = p.at(ctx)
        tokens = pool(at, runtime, ctx)[0] if at.runs else 0
        out.append(Remedy(text, p.max_context(), tokens, at.runs))
    here = Placer(sc)
    base = here.max_context()
    if base and base < ctx and "max_model_len" in names:
        out.insert(0, Remedy(f"{names['max_model_len']} {base}", base, pool(here.at(base), runtime, base)[0], False))
    return tuple(out)
