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

import math
import statistics
from dataclasses import replace

from advisor.catalog.types import GIB, RuntimeSpec
from advisor.engine import fraction, kv_groups, kv_kinds, traffic
from advisor.engine import speed as spd
from advisor.engine.interconnect import link_times
from advisor.engine.options import Options
from advisor.engine.placement import Placement, Placer
from advisor.engine.result import PoolDevice, Remedy, Serving
from advisor.engine.rig import Rig
from advisor.engine.scenario import Scenario


def pool(placement: Placement, runtime: RuntimeSpec, ctx: int,
         sc: Scenario | None = None) -> tuple[int, int, tuple[PoolDevice, ...]]:
    """(tokens, bytes, per-GPU shares) of the pool a placement leaves; `ctx` is the context of the one
    request whose KV cache the placement holds. Given the Scenario, a model with layers of more than one kind
    on a runtime that groups them (vLLM's hybrid KV cache manager, advisor/engine/kv_groups.py) is counted as
    that runtime logs it: requests of `ctx` the pool holds, times `ctx`."""
    block = max(runtime.kv_block_tokens, 1)
    g = grouped(sc) if sc is not None else None
    kinds = sc is not None and kv_kinds.applies(sc)  # pools by attention kind (SGLang)
    shares, tokens = [], None
    for d in placement.devices:
        if d.total_bytes <= 0:  # a GPU the run does not use
            continue
        free = max(d.capacity_bytes - d.weights_bytes - d.overhead_bytes, 0)
        per_token = d.kv_cache_bytes / max(ctx, 1)
        if g is not None:
            t = int(kv_groups.concurrency(sc, g, free, ctx) * ctx)
        elif kinds:
            t = kv_kinds.pools(sc, tensor_parallel(sc), free).tokens
        else:
            t = int(free // (per_token * block)) * block if per_token > 0 else 0
        shares.append(PoolDevice(d.device, free, t))
        tokens = t if tokens is None else min(tokens, t)
    return tokens or 0, sum(s.pool_bytes for s in shares), tuple(shares)


def grouped(sc: Scenario) -> kv_groups.GroupLayout | None:
    """This model's layer groups on the runtime's grouped pool (None: one pool of one kind)."""
    return kv_groups.layout(sc, tensor_parallel(sc), _step_budget(sc))


def tensor_parallel(sc: Scenario) -> int:
    """GPUs each layer's heads are split over."""
    return Placer(sc).parallel_sizes()[0] if len(sc.rig.gpus) > 1 else 1


def _requests_that_fit(sc: Scenario, shares: tuple[PoolDevice, ...], tokens: int, held: float) -> int:
    """Requests each holding `held` tokens that the pool holds at once (the GPU with the fewest pages decides)."""
    g = grouped(sc) if shares else None
    if g is None:
        return int(tokens // max(held, 1))
    free = min(s.pool_bytes for s in shares)
    return int(kv_groups.blocks(g, free) // max(kv_groups.pages_per_request(sc, g, int(round(held))), 1))


def memory_fraction(runtime: RuntimeSpec, options: Options, rig: Rig | None = None) -> float:
    """The user's fraction, else the runtime's default for these GPUs (advisor/engine/fraction.py)."""
    return fraction.memory_fraction(runtime, options, [g.capacity_bytes for g in rig.gpus] if rig else None)


def _graphs(sc: Scenario) -> str:
    """The CUDA graphs the first GPU's pool gives up, as the runtime captures them (empty: none)."""
    piecewise, full, size = Placer(sc).graphs()
    return f"CUDA graphs ({piecewise} piecewise and {full} full: {size / GIB:.2f} GiB)" if size else ""


def _basis(runtime: RuntimeSpec, share: float, ctx: int, held: float | None = None, graphs: str = "") -> str:
    pages = (f"one pool of {runtime.kv_block_tokens}-token pages" if runtime.kv_block_tokens > 1
             else "one pool of token slots")
    if runtime.fraction_of_free:
        head = (f"{share:g} of what each GPU has free at start, less weights, is {pages} (activations and CUDA "
                f"graphs come out of the rest)")
    else:
        head = (f"{share:g} of each GPU, less weights, the activation peak of one profile batch"
                f"{' and ' + graphs if graphs else ''}, is {pages}")
    unit = (f"one request of {ctx:,} tokens must fit for it to start; requests run while their tokens fit, each "
            f"holding {held:,.0f} on average (its prompt and half its output)" if held is not None
            else f"a request of {ctx:,} tokens is the unit of concurrency")
    return f"{head}; the GPU with the fewest pages decides; {unit}"


def _groups_basis(g: kv_groups.GroupLayout | None) -> str:
    if g is None:
        return ""
    kinds = ", ".join(f"{n} {k} group{'s' if n > 1 else ''}" for n, k in zip(g.groups, ("full-attention", "sliding-window", "recurrent")) if n)
    pages = (f"{g.block_tokens} tokens" if g.full_block_tokens == g.block_tokens else
             f"{g.block_tokens} tokens ({g.full_block_tokens} in the narrower full-attention layers)")
    holds = [held for n, held in zip(g.groups, (
        "its length in the full-attention groups",
        f"its window and the {g.batch_tokens:,} tokens it may have in flight in the sliding ones",
        "its state in the recurrent ones")) if n]
    held = ", ".join(holds[:-1]) + f" and {holds[-1]}" if len(holds) > 1 else holds[0]
    return (f"; layers of each kind share it in groups of {g.group_size} ({kinds}), on pages of {pages}, a "
            f"request holding {held} (vLLM's hybrid KV cache manager)")


def _kind_pools(sc: Scenario, shares: tuple[PoolDevice, ...]) -> kv_kinds.KindPools | None:
    """The pools by kind on the GPU with the least free (None: one pool of one kind)."""
    if not shares or not kv_kinds.applies(sc):
        return None
    return kv_kinds.pools(sc, tensor_parallel(sc), min(s.pool_bytes for s in shares))


def serve(sc: Scenario, placement: Placement, max_num_seqs: int = 0) -> Serving:
    """The paged KV pool of this placement: how many requests of the context run at once, how many queue, and
    their time to first token and decode speeds."""
    rig, runtime, options, ctx = sc.rig, sc.runtime, sc.options, sc.ctx
    tokens, total, shares = pool(placement, runtime, ctx, sc)
    conc = tokens / max(ctx, 1) if placement.runs else 0.0
    length = request_length(sc)
    used = [d for d in placement.devices if d.total_bytes > 0]
    spare = min((d.free_bytes for d in used), default=0)
    if runtime.requests_rule and not options.max_num_seqs and placement.runs:
        max_num_seqs = fraction.default_max_requests(runtime, tokens, ctx)  # its own cap, from the pool
    kinds = _kind_pools(sc, shares)
    state = kv_kinds.requests_cap(sc, kinds) if kinds is not None else 0
    if placement.runs and state:  # and its recurrent-state slots' (resolve_max_num_reqs)
        max_num_seqs = min(max_num_seqs or state, state)
    cap = max_num_seqs or options.concurrency
    # a request holds pages only for the tokens it has (vllm/v1/core/sched/scheduler.py schedule(): each step
    # kv_cache_manager.allocate_slots for the request's new tokens, preempting the newest when none are
    # free), so in a steady stream requests of their real length share the pool, each on average its prompt
    # and half its output; vLLM starts only when one of --max-model-len fits (conc >= 1)
    running = min(options.concurrency, cap, _requests_that_fit(sc, shares, tokens, _held(sc, length))) \
        if conc >= 1 else 0
    s = Serving(kv_cache_tokens=tokens if placement.runs else 0, kv_cache_bytes=total if placement.runs else 0,
                request_tokens=ctx, request_length_tokens=length,
                output_tokens=length - min(traffic.mean_scenario(sc).options.prompt_tokens, length),
                max_concurrency=round(conc, 2), requested=options.concurrency,
                running=running, queued=options.concurrency - running, max_num_seqs=cap,
                memory_fraction=memory_fraction(runtime, options, rig), devices=shares, spare_bytes=spare,
                basis=_basis(runtime, memory_fraction(runtime, options, rig), ctx,
                             _held(sc, length) if options.output_tokens is not None or options.request_mix else None,
                             _graphs(sc))
                + _groups_basis(grouped(sc)) + (kv_kinds.basis(sc, kinds) if kinds is not None else "")
                + traffic.basis(sc))
    if running and rig.speed_known:
        s = _with_speeds(sc, placement, s, running)
    if not s.starts or s.marginal(int(runtime.pool_spread_mib * 1024**2)):
        s = replace(s, remedies=remedies(sc, placement))
    return s


def request_length(sc: Scenario) -> int:
    """Tokens one request holds at its end: its prompt and its output (`--output-tokens`), at most the context;
    without an output length, the whole context (every request may reach --max-model-len); a mix: its classes'
    mean."""
    if sc.options.request_mix:
        return round(statistics.fmean(request_length(c) for c in traffic.scenarios(sc)))
    out = sc.options.output_tokens
    if out is None:
        return sc.ctx
    return max(min(sc.options.prompt_tokens + out, sc.ctx), 1)


def _held(sc: Scenario, length: int) -> float:
    """Tokens a running request holds on average: prompt and half its output (`length` without one). A mix: its
    classes' (each capped at the context), each counted for as long as it runs, its output's decode steps: the
    clients draw the classes alike, so a class's share of the running requests is its share of their time."""
    if sc.options.request_mix:
        held = [(max(n - min(c.options.prompt_tokens, n), 1), _held(c, n))
                for c, n in ((c, request_length(c)) for c in traffic.scenarios(sc))]
        return sum(steps * h for steps, h in held) / sum(steps for steps, _ in held)
    if sc.options.output_tokens is None:
        return float(length)
    prompt = min(sc.options.prompt_tokens, length)
    return prompt + (length - prompt) / 2


def _with_speeds(sc: Scenario, placement: Placement, s: Serving, running: int) -> Serving:
    """Time to first token and decode speeds of `running` requests served at once, each of its real length."""
    mean = traffic.mean_scenario(sc)  # a mix: its mean request
    options, length = mean.options, s.request_length_tokens
    prompt = min(options.prompt_tokens, length)
    output = max(length - prompt, 1)
    pre = spd.prefill_time(sc, placement, prompt)
    lt = link_times(sc, placement, prompt, 1)
    ttft = pre.total_s + (lt.prefill_s if lt else 0.0)
    # each running request reads its own KV cache: its prompt and, on average, half of its output (a mix: its
    # classes', each counted for as long as it runs, `_held`)
    depth = (_held(sc, length) if sc.options.request_mix else prompt + output / 2) / max(sc.ctx, 1)
    kv = [int(d.kv_cache_bytes * running * depth) for d in placement.devices]
    # under sustained load each finished request is replaced by a new one, whose prompt is computed
    # (chunked prefill) in the steps the other streams decode: (running - 1) x prompt / output tokens
    # a step on top of the `running` decode tokens (what makes a large batch compute-bound)
    prefill = (running - 1) * prompt / output
    step = spd.decode_step(sc, placement, kv_depth_bytes=kv, streams=running, tokens=running + prefill)
    lt_dec = link_times(sc, placement, prompt, math.ceil(running + prefill))
    step_s = step.total_s + (lt_dec.decode_s if lt_dec else 0.0)
    first, wait = _ttft_p50(mean, placement, (ttft, step_s), kv, running, output)
    # a mix: the median over its classes; one class is the request just timed
    p50 = _ttft_median(sc, placement, step_s, kv, running) if sc.options.request_mix else first + wait
    done = min(options.concurrency, running) * output / (first + output * step_s)  # a slot: first token, output
    return replace(s, ttft_s=round(ttft, 3), ttft_all_s=round(ttft * running, 3), ttft_p50_s=round(p50, 3),
                   aggregate_decode_tokens_per_s=round(running / step_s, 1),
                   per_stream_decode_tokens_per_s=round(1 / step_s, 1),
                   output_tokens_per_s=round(done, 1) if s.output_tokens else None)


def _ttft_p50(sc: Scenario, placement: Placement, times: tuple[float, float], kv: list[int], running: int,
              output: int) -> tuple[float, float]:
    """Median time to first token of a steady closed loop of `--concurrency` clients (`vllm bench serve
    --max-concurrency`), from `times` = (the prompt's prefill alone, one decode step of the `running` requests).
    (time to the first token once in a slot, wait for the slot).

    A closed loop: each client sends its next request the moment its last one completes (vllm/benchmarks/
    serve.py `limited_request_func`: `async with semaphore`), and requests complete at the end of a step. The
    engine drains its input queue only between steps (vllm/v1/engine/core.py `run_busy_loop`:
    `_process_input_queue()`, then `_process_engine_step()`), so a new prompt arrives while the next step
    already runs and waits out that step (a whole decode step, not half of one: arrivals follow step ends).
    The step that then takes it schedules the running requests' decode tokens first and the prompt in what
    is left of the token budget (vllm/v1/core/sched/scheduler.py `schedule()`: "First, schedule the RUNNING
    requests", then the waiting ones while `token_budget > 0`, a longer prompt cut into chunks), so it computes
    (running - 1) decode tokens besides the prompt's chunk; its first token comes out at the end of its last
    chunk. Clients beyond the running requests wait for a slot: by Little's law (c - running) / running
    times a request's time in its slot (its prefill and its `output` decode steps)."""
    alone_s, step_s = times
    prefill = alone_s
    if running > 1:
        # a runtime that prefills in steps of their own (SGLang) computes only the prompt's chunk there
        others = running - 1 if sc.runtime.prefill_beside_decode else 0
        room = max(_step_budget(sc) - others, 1)
        chunk = min(sc.options.prompt_tokens, room)
        chunks = -(-sc.options.prompt_tokens // room)
        carrying = spd.decode_step(sc, placement, kv_depth_bytes=kv if others else None, streams=max(others, 1),
                                   tokens=others + chunk)
        lt = link_times(sc, placement, chunk, others + chunk)  # its all-reduces carry every token it computes
        prefill = step_s + max(alone_s, chunks * (carrying.total_s + (lt.decode_s if lt else 0.0)))
    waiting = max(sc.options.concurrency - running, 0)
    return prefill, waiting / max(running, 1) * (prefill + output * step_s)


def _ttft_median(sc: Scenario, placement: Placement, step_s: float, kv: list[int], running: int) -> float:
    """Median time to first token over the traffic's classes (one class without a mix): each prefills its own
    prompt as `_ttft_p50` says, after the mean wait for a slot (freed by whichever request ends)."""
    firsts, waits = [], []
    for c in traffic.scenarios(sc):
        length = request_length(c)
        prompt = min(c.options.prompt_tokens, length)
        lt = link_times(c, placement, prompt, 1)
        alone = spd.prefill_time(c, placement, prompt).total_s + (lt.prefill_s if lt else 0.0)
        first, wait = _ttft_p50(c, placement, (alone, step_s), kv, running, max(length - prompt, 1))
        firsts.append(first)
        waits.append(wait)
    return statistics.median(firsts) + statistics.fmean(waits)


def _step_budget(sc: Scenario) -> int:
    """Tokens one scheduler step computes (vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size)."""
    if sc.options.max_num_batched_tokens:
        return sc.options.max_num_batched_tokens
    return Placer(sc).batch_defaults()[0]


def _fewer_seqs(sc: Scenario) -> list[Remedy]:
    """`--max-num-seqs` down to the requests asked for, where the sampler warm-up of the default count is what
    keeps the request out (vLLM 0.8's 1,024 dummy requests: "I set the parameter max_num_seqs = 4 or 8 ... the
    model can be started normally now", vllm-project/vllm#17238); nothing when it would not start either."""
    runtime, options = sc.runtime, sc.options
    name = runtime.option_names.get("max_num_seqs")
    if not runtime.sampler_copies or not name or options.max_num_seqs:
        return []
    if options.concurrency >= Placer(sc).batch_defaults()[1]:
        return []
    r = _remedy(sc, f"{name} {options.concurrency}", replace(options, max_num_seqs=options.concurrency))
    return [r] if r.starts else []


def _remedy(sc: Scenario, text: str, opts: Options) -> Remedy:
    """The answer with the options `text` names: the longest context that starts, and the pool at the asked one."""
    alt = replace(sc, options=opts)
    p = Placer(alt)
    at = p.at(sc.ctx)
    return Remedy(text, p.max_context(), pool(at, sc.runtime, sc.ctx, alt)[0] if at.runs else 0, at.runs)


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
    out = [_remedy(sc, text, opts) for text, opts in tries] + _fewer_seqs(sc)
    here = Placer(sc)
    base = here.max_context()
    if base and base < ctx and "max_model_len" in names:
        out.insert(0, Remedy(f"{names['max_model_len']} {base}", base, pool(here.at(base), runtime, base, sc.at_context(base))[0], False))
    return tuple(out)
