"""The rules: each a small function with a stable code that turns a Report into findings.

`@rule("CODE")` registers a function under its code, once: the function yields (severity, message)
pairs and `run_rules` makes them Findings with that code. The docstring says what it checks and why
(`advisor rules` lists them); thresholds live in rules/*.toml. Findings are shown in the order the
rules are defined here. Adding a rule is adding one decorated function.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Callable, Iterator  # noqa: F401 - annotations name them

from advisor.record import Record, record
from advisor.catalog.types import GIB, Catalog
from advisor.engine.multinode import load_seconds, network_bytes_at_load
from advisor.engine.result import Finding, Report

Said = "tuple[str, str]"
"""What a rule yields: (severity, message); severity is `info`, `warning` or `error`."""


@record
class RuleDef(Record):
    code: str
    """Stable code, e.g. `FIT001`."""
    check: Callable[[Report, Catalog], Iterator[tuple[str, str]]]
    """The function: yields (severity, message) pairs for a report."""

    @property
    def summary(self) -> str:
        """What it checks, from the function's docstring."""
        return " ".join((self.check.__doc__ or "").split())


REGISTRY: list[RuleDef] = []
"""Every rule, in the order their findings are shown."""


def rule(code: str) -> Callable:
    """Register a rule function under its code (declared here, once)."""
    if any(d.code == code for d in REGISTRY):
        raise ValueError(f"rule code {code} is registered twice")

    def register(fn: Callable) -> Callable:
        REGISTRY.append(RuleDef(code, fn))
        return fn

    return register


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def ktok(n: int) -> str:
    """Tokens in the k (1024) people use for context sizes, rounded down so a fit is never overstated."""
    if n < 1024:
        return str(n)
    if n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{int(n / 1024 * 10) / 10:g}k"


@rule("FIT001")
def fit001_fits(r: Report, c: Catalog) -> Iterator[Said]:
    """It fits fully on the GPUs; say with how much to spare and the context it allows."""
    p = r.placement
    if not p.fits:
        return
    spare = min(d.free_bytes for d in p.devices)
    msg = f"fits with {gib(spare)} to spare" + (" on the fullest GPU" if len(p.devices) > 1 else "")
    msg += f"; up to {ktok(r.max_context_tokens)} context with {r.options.kv_type} KV"
    q8 = r.what_if.max_context_tokens if r.what_if is not None else None
    if q8 is not None and q8 > r.max_context_tokens:
        msg += f", {ktok(q8)} with {r.what_if.kv_type}"
    yield ("info", msg + ".")


@rule("FIT005")
def fit005_tight(r: Report, c: Catalog) -> Iterator[Said]:
    """It fits, but a GPU keeps less free than the runtime's own fit margin (llama.cpp's --fit-target,
    rules/runtimes.toml fit_margin_mib): what the runtime's buffers do not count (its memory pool, the driver,
    the desktop) must fit in what is left, and public out-of-memory reports (tests/data/oom_reports.csv) sit
    there. Say it is tight, with the margin and what to change."""
    d = r.tight_device
    if d is None:
        return
    yield ("warning", f"tight: {d.device} keeps {gib(d.free_bytes)} free, under the {gib(r.fit_margin_bytes)} "
                      f"fit margin ({r.runtime.fit_margin_basis}): what the runtime's buffers do not count (its "
                      f"memory pool, the driver, the desktop) must fit in it; a smaller --ctx or a q8_0 KV cache "
                      f"leaves room.")


@rule("CMP001")
def cmp001_runtime_hardware(r: Report, c: Catalog) -> Iterator[Said]:
    """The runtime cannot run this model on these GPUs at all: a compute capability below the runtime's
    or its quantization kernel's minimum, or a model family it does not implement (rules/runtimes.toml,
    hardware_db compute_capability). Names the rule and what runs instead."""
    if r.refusal:
        yield ("error", f"does not run: {r.refusal}.")


@rule("FIT002")
def fit002_does_not_fit(r: Report, c: Catalog) -> Iterator[Said]:
    """It does not fit on the GPUs: say by how much, and what would make it fit."""
    p = r.placement
    if p.fits or r.rig.is_cpu_only or r.refusal:
        return
    need = sum(d.total_bytes for d in p.devices) + p.host.weights_bytes + p.host.kv_cache_bytes
    have = sum(d.capacity_bytes for d in p.devices)
    if p.strategy in ("cpu_offload", "moe_offload") and p.runs:
        where = (f"{p.cpu_expert_layers} layers' experts" if p.strategy == "moe_offload"
                 else f"{r.model.layers - p.gpu_layers} of {r.model.layers} layers")
        placed = r.options.cpu_expert_layers is not None or r.options.n_gpu_layers is not None
        if placed and need <= have:
            yield ("warning", f"as the command line places it, {where} run from system RAM "
                              f"({gib(p.host.weights_bytes)}), which is much slower; all of it ({gib(need)}) "
                              f"would fit in the GPUs' {gib(have)}.")
            return
        yield ("warning",
                      f"does not fit in GPU memory ({gib(need)} needed, {gib(have)} usable): {where} "
                      f"run from system RAM ({gib(p.host.weights_bytes)}), which is much slower.")
    elif p.problem:
        yield ("error", f"does not run: {p.problem}.")
    else:
        yield ("error", f"does not fit: needs about {gib(need)}, the GPUs offer {gib(have)}.")


@rule("FIT003")
def fit003_cpu_only(r: Report, c: Catalog) -> Iterator[Said]:
    """No GPU in the rig: the answer is for system RAM alone."""
    if r.rig.is_cpu_only:
        state = "runs" if r.runs else "does not run"
        yield ("warning" if r.runs else "error",
                      f"no GPU in this rig: it {state} on the CPU from system RAM "
                      f"({gib(r.placement.host.total_bytes)} needed, {gib(r.placement.host.capacity_bytes)} usable).")


@rule("FIT004")
def fit004_uneven_split(r: Report, c: Catalog) -> Iterator[Said]:
    """A layer split leaves one GPU over capacity while another has room (llama.cpp splits by
    free memory and does not rebalance); suggest --tensor-split."""
    p = r.placement
    if p.strategy != "layer_split" or p.fits or r.runtime.pipeline_split != "memory":
        return
    over = [d for d in p.devices if not d.fits]
    room = [d for d in p.devices if d.free_bytes > 0]
    if over and room and sum(d.free_bytes for d in p.devices) >= 0:
        yield ("warning",
                      f"{', '.join(d.device for d in over)} overflows while {', '.join(d.device for d in room)} "
                      f"has room: llama.cpp splits by free memory; set --tensor-split by hand to rebalance.")


@rule("SRV001")
def srv001_serving(r: Report, c: Catalog) -> Iterator[Said]:
    """A paged-KV runtime (vLLM, SGLang) that starts: the KV pool it leaves, how many requests of the full
    context it holds at once, and of `--concurrency` how many run and how many queue."""
    s = r.serving
    if s is None or not s.starts:
        return
    per = s.devices[0].pool_bytes if s.devices else 0
    msg = (f"KV pool {s.kv_cache_tokens:,} tokens ({gib(per)} per GPU of {r.runtime.name}'s "
           f"{s.memory_fraction:g} share): {s.max_concurrency:.2f} requests of {s.request_tokens:,} tokens at once")
    if s.requested > 1:
        msg += f"; of {s.requested} requested, {s.running} run together"
        if s.queued:
            why = "the pool" if s.running < s.max_num_seqs else f"max_num_seqs {s.max_num_seqs}"
            msg += f" and {s.queued} wait in the queue ({why} is the limit)"
    yield ("info", msg + ".")


@rule("SRV002")
def srv002_what_makes_it_start(r: Report, c: Catalog) -> Iterator[Said]:
    """A paged-KV runtime that does not start (one request of the full context does not fit in the pool):
    the runtime's own options that would make it start, each with the context it then allows."""
    s = r.serving
    if s is None or s.starts or not r.placement.devices:
        return
    if not s.remedies:
        yield ("error", f"{r.runtime.name} does not start at {s.request_tokens:,} tokens and no option of it "
                        f"frees enough memory: more or larger GPUs, or a smaller quantization.")
        return
    parts = []
    for m in s.remedies:
        if m.starts:
            parts.append(f"{m.option} (starts: pool {m.kv_cache_tokens:,} tokens, up to {ktok(m.max_context_tokens)})")
        elif m.max_context_tokens:
            parts.append(f"{m.option} (up to {ktok(m.max_context_tokens)})")
        else:
            parts.append(f"{m.option} (not enough)")
    if r.runtime.starts_without_room:  # it starts, then refuses any request longer than its pool
        yield ("error", f"{r.runtime.name} would start but refuse one {s.request_tokens:,}-token request: it does not "
                        f"fit in the KV pool; what would make it fit: " + "; ".join(parts) + ".")
        return
    yield ("error", f"{r.runtime.name} does not start: one {s.request_tokens:,}-token request does not fit in "
                    f"the KV pool; what would make it start: " + "; ".join(parts) + ".")


@rule("SRV003")
def srv003_no_margin(r: Report, c: Catalog) -> Iterator[Said]:
    """A paged-KV runtime that starts with less spare pool over one request than its non-KV memory varies
    by between two starts of the same command (rules/runtimes.toml pool_spread_mib): it may not start;
    name what gives it room."""
    s = r.serving
    spread = int(r.runtime.pool_spread_mib * 1024**2)
    if s is None or not s.marginal(spread):
        return
    room = "; ".join(f"{m.option} (up to {ktok(m.max_context_tokens)})" for m in s.remedies if m.max_context_tokens)
    yield ("warning", f"{r.runtime.name} starts with {gib(s.spare_bytes)} to spare over one "
                      f"{s.request_tokens:,}-token request, less than the {gib(spread)} its non-KV memory varied "
                      f"by between two starts of one command: it may not start" + (f"; room: {room}." if room else "."))


@rule("CTX001")
def ctx001_capped(r: Report, c: Catalog) -> Iterator[Said]:
    """The asked context exceeds the model's maximum: it was capped."""
    if r.options.ctx and r.options.ctx > r.model.max_context:
        yield ("warning",
                      f"--ctx {r.options.ctx} is beyond {r.model.name}'s maximum of {r.model.max_context}; "
                      f"using {r.model.max_context}.")


@rule("CTX002")
def ctx002_context_limited(r: Report, c: Catalog) -> Iterator[Said]:
    """It does not fit at the asked context but would fully on the GPUs at a shorter one: say the most that fits.
    Silent where the largest context measured is the one that runs (no GPU, or a placement the command line
    fixed with -ngl or -ot), which says nothing of fitting on the GPUs."""
    if r.runs and not r.fits and r.max_context_tokens and r.max_context_limit == "fits":
        yield ("info", f"it would fit fully on the GPUs at up to {ktok(r.max_context_tokens)} tokens of context.")


@rule("QNT001")
def qnt001_chosen(r: Report, c: Catalog) -> Iterator[Said]:
    """Say which quantization the advisor chose when none was given, and why."""
    if not r.quant_chosen or r.refusal:
        return
    if r.choice_why:
        yield ("info", f"{r.quant.id} with {r.options.kv_type} KV: {r.choice_why} (no --quant given).")
        return
    if r.rig.is_cpu_only:
        msg = f"no GPU: showing {r.quant.id}, the common download (no --quant given)"
    else:
        msg = f"no quantization fits fully; showing {r.quant.id}, the common download (no --quant given)"
    yield ("info", msg + ".")


@rule("QNT003")
def qnt003_below_floor(r: Report, c: Catalog) -> Iterator[Said]:
    """Nothing above the quality floor fits fully, but a quantization below it would: name it and the
    flag that allows it, so a user who accepts the loss knows the option exists (never chosen unasked)."""
    if r.fits or not r.quant_chosen or (r.rig.is_cpu_only and r.runs):
        return
    low = next((ch for ch in r.choices if ch.below_floor and (ch.fits or (r.rig.is_cpu_only and ch.runs))), None)
    if low is not None and r.rig.is_cpu_only:
        yield ("info", f"{low.quant.id} would run from system RAM, but it is below the quality floor; "
                       f"--allow-low-bit or --quant {low.quant.id} takes it anyway.")
    elif low is not None:
        loss = f"KL divergence {low.quant.kld:.3f} vs 16-bit" if low.quant.kld is not None else \
            f"{low.quant.bits_per_weight:.2f} bits per weight"
        yield ("info", f"{low.quant.id} would fit fully, but it is below the quality floor ({loss}); "
                       f"--allow-low-bit or --quant {low.quant.id} takes it anyway.")


@rule("QNT002")
def qnt002_steep_loss(r: Report, c: Catalog) -> Iterator[Said]:
    """Below the quants where quality loss climbs steeply (KL divergence over the rulebook's
    threshold on Llama 3.1 8B), warn."""
    steep = float(c.rules.memory.selection.steep_kld)
    if r.quant.kld is not None and r.quant.kld >= steep:
        yield ("warning",
                      f"{r.quant.id} loses noticeable quality (KL divergence {r.quant.kld:.3f} vs 16-bit on "
                      f"Llama 3.1 8B; steep above {steep}); prefer Q4_K_M or better where it fits.")


@rule("KV001")
def kv001_quantized_kv(r: Report, c: Catalog) -> Iterator[Said]:
    """The context does not fit with f16 KV but would with q8_0 (the engine's what-if, placed with the answer's
    own weights): suggest it."""
    if r.fits or r.what_if is None or not r.what_if.fits:
        return
    yield ("info", f"with --kv-cache {r.what_if.kv_type} the KV cache halves and {r.quant.id} at "
                   f"{ktok(r.context_tokens)} context fits fully.")


@rule("MEM001")
def mem001_apple_limit(r: Report, c: Catalog) -> Iterator[Said]:
    """On Apple silicon the GPU may use only part of unified memory; say how to raise it."""
    if r.rig.gpus and r.rig.gpus[0].spec.vendor == "apple":
        cap = r.placement.devices[0].capacity_bytes if r.placement.devices else 0
        yield ("info",
                      f"macOS lets the GPU wire {gib(cap)} of {gib(r.rig.gpus[0].capacity_bytes)} unified memory; "
                      f"`sudo sysctl iogpu.wired_limit_mb=N` raises it.")


@rule("MEM002")
def mem002_free_memory(r: Report, c: Catalog) -> Iterator[Said]:
    """Planning with memory free at detection time (a desktop holds some), not the total."""
    free = [g for g in r.rig.gpus if g.capacity_basis == "free"]
    if free:
        held = sum(g.spec.vram_bytes - g.capacity_bytes for g in free)
        if r.rig.source == "rig-file":
            yield ("info", f"planned with the memory the rig file leaves free ({gib(held)} held by the desktop or "
                           f"other programs: used_gib / memory_gib); drop them to plan for idle GPUs.")
        else:
            yield ("info",
                          f"planned with the memory free now ({gib(held)} held by other processes); "
                          f"--empty plans for idle GPUs.")


@rule("RIG001")
def rig001_detection_warnings(r: Report, c: Catalog) -> Iterator[Said]:
    """What the probe warned about the GPUs it found (one in MIG mode, one lost while read), so the
    answer carries it and nobody reads a fit on 80 GiB that a MIG instance does not have; also when
    every GPU found was left out (a MIG card without a readable instance: the rig keeps the probe's
    source). (When no GPU was found, why none was readable is the CPU-only answer's own business.)"""
    if r.rig.gpus or r.rig.source != "cpu-only":
        for warning in r.rig.warnings:
            yield ("warning", warning)


@rule("TP001")
def tp001_divisibility(r: Report, c: Catalog) -> Iterator[Said]:
    """Tensor parallel was refused (head counts do not divide by the GPU count)."""
    if r.placement.strategy == "none" and "divide" in r.placement.problem:
        yield ("error", r.placement.problem + "; use a GPU count that divides them, or --split layer.")


@rule("NVL001")
def nvl001_verdict(r: Report, c: Catalog) -> Iterator[Said]:
    """The interconnect verdict in one line, with what would change it."""
    i = r.interconnect
    if i.nvlink == "not_applicable":
        return
    sev = {"not_needed": "info", "helps": "info", "needed": "warning"}[i.nvlink]
    yield (sev, i.summary)


@rule("NVL002")
def nvl002_split_mode(r: Report, c: Catalog) -> Iterator[Said]:
    """Tensor parallel over a host-staged PCIe link pays the all-reduce latency every layer;
    for one stream, layer split is usually as fast and needs no fast link (said only where the split choice,
    SPL002, does not show tensor parallel decoding faster)."""
    i = r.interconnect
    by = {s.split: s for s in r.split_choices}
    if "layer" in by and "tensor" in by and by["layer"].decode_tokens_per_s and by["tensor"].decode_tokens_per_s \
            and by["tensor"].decode_tokens_per_s > by["layer"].decode_tokens_per_s:
        return  # the split choice (SPL002) shows tensor parallel ahead even over this link
    if r.placement.strategy == "tensor_parallel" and i.details and "host" in i.details[0][1] and \
            r.options.concurrency == 1:
        yield ("info",
                      "tensor parallel without P2P stages every all-reduce through host memory; for one user "
                      "`--split layer` (llama.cpp -sm layer) needs no fast link.")


@rule("SPL001")
def spl001_row_split_removed(r: Report, c: Catalog) -> Iterator[Said]:
    """A row split (llama.cpp -sm row) on GPUs whose back-end today's builds of the runtime no longer
    split by rows on (rules/runtimes.toml row_split_removed): the answer is for older builds."""
    from advisor.engine.rig import gpu_backend

    rt = r.runtime
    if r.placement.strategy != "tensor_parallel" or r.placement.split_kind != "rows" or not rt.row_split_removed:
        return
    gone = sorted({gpu_backend(g.spec) for g in r.rig.gpus} & set(rt.row_split_removed))
    if gone:
        yield ("warning", f"{rt.name} builds since July 2026 have no -sm row on the {' or '.join(gone)} back-end "
                          f"(they stop at load: 'device CUDA0 does not support split buffers'); this row-split answer is "
                          f"for older builds. With a current build use --split tensor (-sm tensor) or --split layer.")


@rule("SPL002")
def spl002_split_choice(r: Report, c: Catalog) -> Iterator[Said]:
    """On a multi-GPU rig, llama.cpp's two splits side by side (-sm layer: GPUs in turn, little traffic;
    -sm tensor: all GPUs on every layer, two all-reduces per layer over the rig's link): which one decodes and
    prefills faster here, how much of tensor parallel's step the link takes, and what NVLink would change."""
    by = {s.split: s for s in r.split_choices}
    layer, tensor = by.get("layer"), by.get("tensor")
    if layer is None or tensor is None:
        return
    if not tensor.runs:
        if layer.runs:
            yield ("info", f"--split tensor (-sm tensor) does not run here: {tensor.problem.rstrip('.')}.")
        return
    if not layer.runs or not layer.decode_tokens_per_s or not tensor.decode_tokens_per_s:
        return
    dec = tensor.decode_tokens_per_s / layer.decode_tokens_per_s
    pre = (tensor.prefill_tokens_per_s or 0) / (layer.prefill_tokens_per_s or 1)
    v = c.rules.interconnect.verdict
    if tensor.nvlink_speedup < v.link_matters_above:
        nv = "; a faster link would change little"
    elif r.rig.nvlink:
        nv = f"; over PCIe instead of NVLink its step would be {tensor.nvlink_speedup:.3f}x as slow"
    else:
        nv = f"; NVLink would make its step {tensor.nvlink_speedup:.3f}x as fast"
    if dec >= 1 + v.same_speed_within:
        verdict = f"tensor parallel pays for one stream here ({dec:.2f}x the decode)"
    elif dec > 1 - v.same_speed_within:
        verdict = "tensor parallel decodes about as fast as the layer split here"
    else:
        verdict = "the layer split decodes faster here"
    nvidia = all(g.spec.vendor == "nvidia" for g in r.rig.gpus)
    if not nvidia:
        nv = nv.replace("NVLink", "a GPU link as fast as NVLink")
    score = c.rules.interconnect.sm_tensor
    held = (
        f" (on {score.decode_rows} public runs the -sm tensor/-sm layer decode ratio came out "
        f"{abs(score.decode_ratio_bias_pct):.0f}% {'high' if score.decode_ratio_bias_pct > 0 else 'low'} at the median)")
    yield ("info", f"split choice: -sm layer {layer.decode_tokens_per_s:.1f} tok/s decode, "
                   f"{layer.prefill_tokens_per_s or 0:.0f} tok/s prefill; -sm tensor {tensor.decode_tokens_per_s:.1f} tok/s, "
                   f"{tensor.prefill_tokens_per_s or 0:.0f} tok/s ({pre:.2f}x the prefill), with "
                   f"{tensor.link_time_share:.0%} of its step on the GPU links{nv}. So {verdict}{held}"
                   + ("." if tensor.fits or not layer.fits else ", but it does not fit where the layer split does."))


@rule("NVL003")
def nvl003_slot(r: Report, c: Catalog) -> Iterator[Said]:
    """A GPU whose installed link is narrower or older than the card's own maximum."""
    for g in r.rig.gpus:
        if g.pcie_gen and g.spec.pcie_gen and g.pcie_lanes and g.spec.pcie_lanes and \
                (g.pcie_gen < g.spec.pcie_gen or g.pcie_lanes < g.spec.pcie_lanes):
            matters = "matters for tensor parallel and offload" if len(r.rig.gpus) > 1 or not r.fits \
                else "barely matters once the model is loaded"
            yield ("info",
                          f"{g.label} runs at PCIe {g.pcie_gen}.0 x{g.pcie_lanes} (the card supports "
                          f"{g.spec.pcie_gen}.0 x{g.spec.pcie_lanes}); this {matters}.")


@rule("NVL004")
def nvl004_what_changes_it(r: Report, c: Catalog) -> Iterator[Said]:
    """When the link matters (helps/needed), name the cheaper fixes before a bridge, with the
    engine and flags that select them: P2P on GeForce, CPU lanes, keeping tensor parallel inside an
    NVLink pair, or a layer/pipeline split that needs no fast link."""
    i = r.interconnect
    if i.nvlink not in ("helps", "needed") or r.training is not None:
        return
    specs = [g.spec for g in r.rig.gpus]
    geforce_no_p2p = all(s.vendor == "nvidia" and s.category == "consumer" and not s.pcie_p2p for s in specs)
    tips = []
    if r.placement.strategy == "tensor_parallel":
        if geforce_no_p2p and r.rig.p2p is not True and not r.rig.nvlink:  # a bridged pair has its fast link
            tips.append("enable PCIe P2P (patched open kernel modules): measured +10-30% for vLLM on 2x 3090/5090, "
                        "about the NVLink gain at a fraction of the cost")
        if any((g.pcie_lanes or 16) <= 4 for g in r.rig.gpus):
            tips.append("move the x4/x1 cards to CPU lanes at x8 or wider: a chipset or riser link drags every "
                        "all-reduce down to its speed")
        if r.rig.nvlink and len(r.rig.nvlink_pairs) < len(r.rig.gpus) * (len(r.rig.gpus) - 1) // 2:
            tips.append("keep tensor parallel inside each NVLink pair and pipeline across pairs "
                        "(vLLM --tensor-parallel-size 2 --pipeline-parallel-size N/2)")
        tips.append("for one user, a layer split needs no fast link (llama.cpp -sm layer; vLLM "
                    "--pipeline-parallel-size N)")
    specs_bridge = all(s.nvlink is not None and s.nvlink.topology == "bridge" for s in specs)
    sold = c.rules.plan.nvlink_bridge_sold_for
    if specs_bridge and not r.rig.nvlink and not all(s.id in sold for s in specs):
        tips.append(f"an NVLink bridge would give {r.interconnect.nvlink_speedup:.2f}x, but none with a dated price is "
                    f"on sale for {specs[0].name} (rules/plan.toml nvlink_bridge_sold_for)")
    elif specs_bridge and not r.rig.nvlink:
        bridge = float(c.rules.plan.nvlink_bridge_usd)
        tips.append(f"an NVLink bridge per pair (about ${bridge:.0f}, {c.rules.plan.nvlink_bridge_basis}) "
                    f"gives the {r.interconnect.nvlink_speedup:.2f}x above")
    elif not any(s.nvlink for s in specs):
        tips.append(f"these cards have no NVLink connector ({specs[0].name}); the fixes above are the ones available")
    if tips:
        yield ("info", "what would change it: " + "; ".join(tips) + ".")


@rule("NVL005")
def nvl005_across_machines(r: Report, c: Catalog) -> Iterator[Said]:
    """GPUs in several machines: a layer (pipeline) split crosses the network once per token
    per boundary and is fine; tensor parallel crosses it twice per layer and is the case to avoid."""
    if r.rig.nodes < 2 or not r.runs:
        return
    net = c.rules.interconnect.network.label.get(r.rig.network, r.rig.network or "the network")
    share = r.interconnect.link_time_share
    if r.placement.tp_size > 1:
        yield ("info",
               f"tensor parallel over the {r.placement.tp_size} GPUs inside each machine and one pipeline stage per "
               f"machine, as {r.runtime.name}'s docs advise: {net} carries one hidden state per token between "
               f"machines, {share:.1%} of the time with the GPU links.")
    elif r.placement.strategy == "tensor_parallel":
        yield ("warning",
                      f"tensor parallel across {r.rig.nodes} machines spends {share:.0%} of its time on {net}; split by "
                      f"layer across machines instead and keep tensor parallel inside each (vLLM: "
                      f"--pipeline-parallel-size {r.rig.nodes} with Ray; llama.cpp: --rpc; exo for Macs).")
    else:
        yield ("info",
                      f"the layer split crosses {net} between {r.rig.nodes} machines: {share:.1%} of the time; "
                      f"a faster network would change little (llama.cpp --rpc, vLLM pipeline parallel with Ray, "
                      f"exo for Macs all split this way).")


@rule("NET001")
def net001_load_over_network(r: Report, c: Catalog) -> Iterator[Said]:
    """GPUs in several machines: how the weights reach them. llama.cpp RPC sends every remote GPU its share over
    the network at each start (tools/rpc/README.md; `rpc-server -c` keeps a copy for the next start); at the
    network's line rate that is the least it takes. Runtimes whose machines read their own copy need it on each."""
    if r.rig.nodes < 2 or not r.runs or r.runtime.multinode.split == "none":
        return
    sent = network_bytes_at_load(r.rig, r.runtime, r.placement)
    if sent:
        seconds = load_seconds(r.rig, r.runtime, r.placement, c.rules)
        net = c.rules.interconnect.network.label.get(r.rig.network, r.rig.network)
        took = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
        yield ("warning", f"loading sends {gib(sent)} of weights to the other machines over {net}: at least {took} "
                          f"at its line rate, at every start; rpc-server -c keeps them on each machine's disk, so "
                          f"only the first start waits (the README of llama.cpp's tools/rpc).")
    else:
        yield ("info", f"each of the {r.rig.nodes} machines loads its own share from its own disk: put the model "
                       f"on every machine, at the same path, before the first start.")


@rule("TRN001")
def trn001_training_fit(r: Report, c: Catalog) -> Iterator[Said]:
    """A training workload: say whether its memory fits per GPU, with which sharding, and what would
    make it fit when it does not (a lighter workload, an 8-bit optimizer, sharding, a shorter sequence)."""
    t = r.training
    if t is None:
        return
    cap = t.capacity_bytes or min((d.capacity_bytes for d in r.placement.devices), default=0)
    if t.fits:
        yield ("info", f"{t.workload} fits with {t.strategy}: {gib(t.per_gpu_bytes)} per GPU of {gib(cap)}.")
        return
    hints = []
    if t.workload == "full-finetune":
        hints.append("LoRA or QLoRA (--workload qlora)")
    elif t.workload == "lora":
        hints.append("QLoRA (--workload qlora)")
    if len(r.rig.gpus) > 1 and t.sharding not in ("zero3", "offload"):
        hints.append("--sharding fsdp")
    if t.workload == "full-finetune":
        hints.append("--optimizer adamw-8bit")
    if r.options.batch_size > 1 or r.options.seq_len > 512:
        hints.append("a smaller --batch-size or --seq-len")
    hints.append("more or larger GPUs")
    yield ("error", f"{t.workload} does not fit: {gib(t.per_gpu_bytes)} per GPU with {t.strategy}, "
                    f"{gib(cap)} usable; try {', '.join(hints)}." + (f" {t.note}." if t.note else ""))


INFERENCE_ONLY = frozenset({"FIT001", "FIT002", "FIT003", "FIT004", "FIT005", "CTX001", "CTX002", "QNT001", "QNT002", "QNT003",
                            "KV001", "NVL002", "NVL005"})
"""Rules about serving the model, left out when the question is a training workload."""


@rule("CMD001")
def cmd001_command_notes(r: Report, c: Catalog) -> Iterator[Said]:
    """A `--cmd` command line: name every flag the advisor did not read or does not model, so the answer
    is never silently for a different configuration than the one given."""
    for note in r.options.command_notes:
        yield ("warning", f"--cmd: {note}.")


@rule("ARC001")
def arc001_layer_memory(r: Report, c: Catalog) -> Iterator[Said]:
    """Hybrid models (linear attention, Mamba, KV-shared layers) keep a KV cache on only some layers:
    say which, and what the fixed recurrent state costs, so the small KV cache is not taken for a bug."""
    from advisor.engine import layers

    m = r.model
    if not m.is_hybrid:
        return
    kv_n, rec_n = layers.kv_layer_count(m), layers.recurrent_layer_count(m)
    rest = m.layers - kv_n - rec_n
    parts = [f"KV cache on {kv_n} of {m.layers} layers"]
    if rec_n and m.recurrent is not None:
        per = layers.state_elements(m) * c.rules.memory.recurrent.bytes_per_element
        seqs = max(r.options.concurrency, 1)
        parts.append(f"{rec_n} {m.recurrent.kind.replace('_', ' ')} layers keep a fixed state of "
                     f"{per / 1024**2:.1f} MiB each per sequence ({per * rec_n * seqs / 1024**2:.0f} MiB in all, "
                     f"whatever the context)")
    if rest:
        parts.append(f"{rest} keep no cache of their own (MLP-only, or reusing an earlier layer's KV)")
    yield ("info", "; ".join(parts) + ".")


@rule("ARC002")
def arc002_assumed(r: Report, c: Catalog) -> Iterator[Said]:
    """A model file the reader did not fully understand: say what was assumed instead of silently
    answering as for a plain transformer."""
    for what in r.model.assumptions:
        yield ("warning", f"assumed: {what}")


@rule("ARC003")
def arc003_not_loaded(r: Report, c: Catalog) -> Iterator[Said]:
    """Parts a model ships that the answer leaves out: multi-token-prediction layers (loaded only for
    speculative decoding) and a vision tower (loaded only to read images)."""
    m = r.model
    if m.mtp_layers:
        yield ("info", f"the model ships {m.mtp_layers} multi-token-prediction layer"
                       f"{'s' if m.mtp_layers > 1 else ''}, not loaded by default and not counted here "
                       f"(they are only used for speculative decoding).")
    if m.vision_params and r.vision is None and r.options.mm_limit != 0:
        yield ("info", f"its vision tower ({m.vision_params / 1e9:.2f}B parameters) is not counted here: "
                       f"reading images adds it (for llama.cpp, the mmproj file passed with --mmproj).")


@rule("LCH001")
def lch001_quantized_checkpoint(r: Report, c: Catalog) -> Iterator[Said]:
    """A server that downloads the model by repo (`vllm serve REPO`) runs a quantized answer only from a
    checkpoint in that quantization: name the one the command uses and its source, say when the program
    quantizes the 16-bit checkpoint itself, or that a quantized checkpoint must be supplied."""
    from advisor.engine.launch import model_reference, weights_source

    if r.launch is None or r.model_source != "catalog" or not r.placement.runs:
        return
    base = model_reference(r.model, r.quant)
    how, repo, source = weights_source(c.rules.launch, c.rules.checkpoints, r.launch.launcher, r.model.id, r.quant.id,
                                       base)
    q = r.quant.id
    if how == "checkpoint":
        yield ("info", f"the command names {repo}, {r.model.name} quantized with {q} ({source}); the runtime "
                       f"reads the method from the checkpoint's config and picks its kernels, so no "
                       f"--quantization is written.")
    elif how == "at_load":
        yield ("info", f"no {q} checkpoint of {r.model.name} is listed: the command gives the 16-bit {base} and "
                       f"the runtime quantizes it to {q} as it loads (the full 16-bit files are downloaded).")
    elif how == "missing":
        yield ("warning", f"{q} weights of {r.model.name} run only from a checkpoint in {q}, and none is listed "
                          f"(rules/checkpoints.toml); {base} does not load as {q}, so no command is written: name "
                          f"such a checkpoint of this model.")


@rule("VIS001")
def vis001_vision_tower(r: Report, c: Catalog) -> Iterator[Said]:
    """A vision tower the answer loads (llama.cpp's --mmproj, vLLM's encoder): what its weights and the
    runtime's reserved peak for the largest image cost and where, and what was assumed about it, so the
    memory for reading images is never silently left out."""
    v = r.vision
    if v is None:
        return
    where = ", ".join(f"gpu{i}" for i in v.devices) if v.devices else "system RAM"
    t = v.tower
    peak = f"{gib(v.compute_bytes)} reserved for its largest image" if v.compute_bytes else "no compute peak counted"
    each = " each" if len(v.devices) > 1 else ""
    what = ", ".join(x for x in (t.kind, f"{t.params / 1e9:.2f}B parameters") if x)
    yield ("info", f"vision tower{' of ' + t.of if t.of else ''} ({what}): {gib(v.weights_bytes)} of weights and "
                   f"{peak} on {where}{each}; {v.basis}.")
    if v.flash_compute_bytes:
        yield ("info", f"with flash attention (-fa on) its compute buffer would be "
                       f"{gib(v.flash_compute_bytes)} instead of {gib(v.compute_bytes)}.")
    if v.sequential and v.compute_bytes:
        yield ("info", f"vLLM profiles the encoder on {v.images} image{'s' if v.images > 1 else ''} before the text "
                       f"run: its peak lowers the KV pool by what it exceeds the text run's; "
                       f"--limit-mm-per-prompt '{{\"image\":0}}' serves text only and frees the encoder's memory.")
    if v.sequential and not t.item_patches:
        whose = f"the {t.kind} processor" if t.kind else f"{t.of}'s processor" if t.of else "its processor"
        yield ("warning", f"assumed: the largest image {whose} accepts is not known, so the encoder's "
                          f"profile peak is not counted (the KV pool may come out smaller than shown).")
    elif v.sequential:
        yield ("warning", "assumed: the encoder's profile peak is estimated from its layer structure (live "
                          "activations per patch, rules/vision.toml), not fitted on measured profiles.")
    for what in t.assumptions:
        if what not in r.model.assumptions:
            yield ("warning", f"assumed: {what}")


def run_rules(report: Report, catalog: Catalog) -> tuple[Finding, ...]:
    """Every registered rule in order; each finding carries its rule's code."""
    skip = INFERENCE_ONLY if report.training is not None else frozenset()
    return tuple(Finding(d.code, severity, message) for d in REGISTRY if d.code not in skip
                 for severity, message in d.check(report, catalog))
