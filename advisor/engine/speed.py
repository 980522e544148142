"""How fast: decode is memory-bound, prefill compute-bound, calibrated on public measurements.

Decode time per token = for each device, the bytes it reads (its active weights plus the KV cache
so far) over its bandwidth at the achievable fraction for its architecture and the quant kernel,
plus a fixed cost per layer (kernel launches, synchronisation). Layer split adds the devices'
times (they run in turn for one stream); tensor parallel takes the slowest shard plus the
all-reduces. Offloaded weights are read at system-RAM bandwidth.

Prefill time = 2 x active parameters x prompt tokens over the dense FP16 tensor throughput at the
achievable fraction, plus the attention of the layers that attend (a sliding-window layer over at most
its window; recurrent layers none) at the fused (flash) or plain attention fraction of the backend, plus the
weights each kernel tile of a micro-batch streams from memory (`tile_reads_bytes`); offloaded weights cross PCIe
once per micro-batch.

Fractions are per GPU architecture where the architecture was measured on its vendor's own backend;
otherwise per backend family (CUDA, Metal, ROCm, Vulkan, SYCL; a card on another backend than its vendor's
by backend and vendor where measured, `vulkan-amd`), so an AMD card on ROCm or any card on Vulkan is not given
NVIDIA's fractions.

The achievable fractions live in rules/speed.toml, fitted by bench/calibrate.py on
tests/data/speed_measurements.csv; bench/accuracy.py prints the error they leave.
"""

from __future__ import annotations

from typing import NamedTuple

from advisor.record import Record, record
from advisor.catalog.rulebook import DecodeRules, FixedCosts, Rulebook
from advisor.catalog.types import GpuSpec, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine import memory as mem
from advisor.engine.multinode import prefill_overlaps
from advisor.engine.layers import RECURRENT, layer_kind
from advisor.engine.placement import Placement
from advisor.engine.placement.capacity import flash_attention_on
from advisor.engine.result import ErrorBand
from advisor.engine.rig import Rig, gpu_backend
from advisor.engine.scenario import Scenario
from advisor.engine.strategies import words_of


@record
class StepTimes(Record):
    """Seconds per token (decode) or per prompt (prefill), split into where the time goes."""

    gpu_s: float
    host_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.gpu_s + self.host_s + self.overhead_s


def backend_of(gpu: GpuSpec, runtime: RuntimeSpec | None = None) -> str:
    """The backend family the GPU runs: its catalog entry's (`vulkan` for an iGPU llama.cpp drives through
    Vulkan), else its vendor's own."""
    return gpu.backend or gpu_backend(gpu)


VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD", "apple": "Apple", "intel": "Intel"}


def answer_kind(placement: Placement, rig: Rig, model: ModelSpec, runtime: RuntimeSpec) -> str:
    """The kind of answer an estimate is, for its error band: runtime x hardware x placement.

    Decided from the runtime's declared `speed_kind` (Ollama inherits llama.cpp's: it runs its
    kernels), the placement's strategy, the GPUs' vendor and whether the model routes experts; a
    llama.cpp-kind tensor parallel is its row split, or its meta device (-sm tensor) where the placement says so."""
    who = runtime.speed_kind or "unmeasured runtime"
    if placement.strategy == "cpu_only" or not rig.gpus:
        return f"{who}, CPU only"
    where = words_of(placement.strategy).kind
    if placement.strategy == "tensor_parallel" and placement.split_kind == "meta":
        where = "tensor parallel (-sm tensor)"  # llama.cpp's meta device, not its row split
    if model.is_moe and placement.strategy in ("single_gpu", "layer_split", "tensor_parallel"):
        where = "MoE on GPU"
    vendor = rig.gpus[0].spec.vendor
    return f"{who}, {VENDOR_NAMES.get(vendor, vendor)}, {where}"


BACKEND_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal", "sycl": "SYCL", "cpu": "CPU"}
ALL_ROWS = "all rows"


def answer_family(placement: Placement, rig: Rig) -> str:
    """The backend family an answer runs on (CUDA, ROCm, Vulkan, Metal, SYCL; CPU without a GPU)."""
    if placement.strategy == "cpu_only" or not rig.gpus:
        return "CPU"
    backend = backend_of(rig.gpus[0].spec)
    return BACKEND_NAMES.get(backend, backend)


def band_pools(kind: str, family: str) -> tuple[str, str, str]:
    """Where an answer's error band comes from, narrowest first: its kind, its backend family, all rows."""
    return kind, f"{family} backend family", ALL_ROWS


def error_band(kind: str, family: str, rules: Rulebook) -> ErrorBand:
    """The held-out error of this kind of answer (rules/speed_bands.toml), pooled up to its backend family and
    then to all rows where its own kind has fewer than `min_rows` rows."""
    bands = rules.speed_bands
    got: dict[str, tuple] = {}
    for test in ("decode", "prefill"):
        for pool in band_pools(kind, family):
            b = bands.band.get(pool)
            if b is not None and getattr(b, f"{test}_p50_pct") is not None:
                got[test] = (getattr(b, f"{test}_rows"), getattr(b, f"{test}_p50_pct"), getattr(b, f"{test}_p90_pct"),
                             pool)
                break
    d = got.get("decode", (0, None, None, ""))
    p = got.get("prefill", (0, None, None, ""))
    return ErrorBand(kind, d[0], p[0], bands.min_rows, d[1], d[2], p[1], p[2], decode_pool=d[3], prefill_pool=p[3])


def _lookup(table: dict, key: str, default_key: str = "default") -> float:
    return float(table.get(key, table[default_key]))


def family_key(backend: str, vendor: str, native: bool) -> str:
    """The backend family a fraction is kept under: the backend, or for a GPU driven through another backend than
    its vendor's own the backend and the vendor (`vulkan-amd`): ggml-vulkan picks its matrix-product shaders and
    tile sizes per vendor (NV_coopmat2 on NVIDIA, KHR_coopmat with AMD's own tiles since llama.cpp PR #18749)."""
    return backend if native else f"{backend}-{vendor}"


def family_fraction(section, gpu: GpuSpec) -> float:
    """The fitted fraction of peak for a GPU: its architecture's own where the architecture was measured on
    its vendor's backend; else its backend family's (an architecture without enough rows, or a GPU driven
    through another backend such as Vulkan: that backend's vendor entry where it has one); else the table's
    default."""
    backend = backend_of(gpu)
    native = backend == gpu_backend(gpu)
    if native and gpu.arch in section.arch_efficiency:
        return float(section.arch_efficiency[gpu.arch])
    fam = section.backend_efficiency
    return float(fam.get(family_key(backend, gpu.vendor, native), fam.get(backend, section.arch_efficiency["default"])))


def decode_efficiency(gpu: GpuSpec, quant: QuantSpec, rules: Rulebook) -> float:
    s = rules.speed.decode
    return family_fraction(s, gpu) * _lookup(s.kernel_factor, quant.kernel)


def prefill_efficiency(gpu: GpuSpec, quant: QuantSpec, rules: Rulebook, moe: bool = False) -> float:
    """Share of dense FP16 throughput in prompt processing; a MoE model's at its backend's MoE factor."""
    s = rules.speed.prefill
    moe_factor = float(s.moe_efficiency.get(backend_of(gpu), s.moe_efficiency.get("default", 1.0))) if moe else 1.0
    return family_fraction(s, gpu) * _lookup(s.kernel_factor, quant.kernel) * moe_factor


def matmul_efficiency(sc: Scenario, gpu: GpuSpec, moe: bool = False) -> float:
    """Share of dense FP16 throughput the scenario's runtime reaches in matrix products: llama.cpp's
    (`prefill_efficiency`: the GPU's fitted fraction, its quantization kernel's factor, the MoE factor); for a
    runtime family with its own factor in rules/speed.toml, the GPU's fraction times that factor (a paged server's
    cuBLAS/CUTLASS/Marlin/Triton products and scheduler step against llama.cpp's MMQ on the same GPU: llama.cpp's
    kernel and MoE factors describe its own kernels)."""
    pre = sc.rules.speed.prefill
    own = pre.family_efficiency.get(sc.runtime.family)
    if own is None:
        return prefill_efficiency(gpu, sc.quant, sc.rules, moe)
    return family_fraction(pre, gpu) * float(own) * (float(pre.family_moe_efficiency.get(sc.runtime.family, 1.0))
                                                     if moe else 1.0)


def attention_efficiency(sc: Scenario, gpu: GpuSpec) -> float:
    """Share of dense FP16 throughput in prompt attention: the backend's fused (flash) attention where it is
    on (always, for a runtime family whose prompt attention has no other kernel: `fused_attention_families`), else
    the plain attention fraction."""
    s = sc.rules.speed.prefill
    fused = sc.runtime.family in s.fused_attention_families or flash_attention_on(sc.runtime, sc.rig, sc.options)
    if fused and s.flash_attention_efficiency:
        return float(s.flash_attention_efficiency.get(backend_of(gpu), s.flash_attention_efficiency.get(
            "default", s.attention_efficiency)))
    return float(s.attention_efficiency)


def attention_flops(model: ModelSpec, prompt_tokens: int, depth: int = 0) -> float:
    """FLOPs of a prompt's attention: 2 x heads x head_dim per query-key pair for QK^T and as many for PV, over
    the pairs a causal prompt forms (each new token sees `depth` cached tokens and the prompt before it), on
    the layers that keep a KV cache (a hybrid model's recurrent layers do no quadratic attention); a
    sliding-window (or chunked) layer sees at most its window."""
    n = prompt_tokens
    attn_layers = sum(1 for il in range(model.layers) if layer_kind(model, il) != RECURRENT and
                      (not model.layer_pattern or model.layer_pattern[il] == "a"))
    window = model.attention_chunk_size or model.sliding_window
    local = min(model.sliding_window_layers, attn_layers) if window else 0

    def pairs(w: int) -> float:
        if not w:
            return n * depth + n * n / 2
        below = min(n, max(w - depth, 0))  # tokens that still see fewer than w keys
        return below * depth + below * below / 2 + (n - below) * w

    return 4 * model.attention_heads * model.head_dim * ((attn_layers - local) * pairs(0) + local * pairs(window))


def active_fraction(model: ModelSpec, streams: int = 1) -> float:
    """Share of the routed-expert weights one decode step reads (1 for dense models): k of E experts
    for one token; for a batch of `streams` tokens the union of their choices, 1 - (1 - k/E)^streams
    (routing taken as independent between tokens)."""
    if not model.is_moe or not model.experts:
        return 1.0
    k = model.experts_active / model.experts
    return 1 - (1 - k) ** max(streams, 1)


def active_device_bytes(placement: Placement, model: ModelSpec, streams: int = 1) -> list[float]:
    """Weights each GPU reads per decode step: everything but its routed experts and its input embedding
    (attention, router, dense and shared-expert weights, the output head), plus the share of its experts the
    step's tokens choose; a token reads one row of the embedding."""
    frac = active_fraction(model, streams)
    return [max(d.weights_bytes - d.embed_bytes - d.expert_bytes * (1 - frac), 0.0) for d in placement.devices]


class TokenParams(NamedTuple):
    """Parameters one token multiplies on one device, each part's bytes at its own width (gpt-oss keeps BF16
    attention, router and head beside MXFP4 experts: the file's average width would count its FLOPs 2.26x)."""

    body: float
    """Everything but the routed experts, the input embedding (looked up) and the output head."""
    experts: float
    """Its share of the routed experts a token chooses."""
    head: float
    """The output head: multiplied only for a row the step samples."""


def token_params(sc: Scenario, placement: Placement) -> list[TokenParams]:
    """Each device's `TokenParams`."""
    k = active_fraction(sc.model, 1)
    rest_b = max(mem.body_bits(sc.model, sc.quant), 1e-9) / 8
    expert_b = max(mem.expert_bits(sc.model, sc.quant), 1e-9) / 8
    head_b = max(mem.head_bits(sc.model, sc.quant), 1e-9) / 8
    return [TokenParams(max(d.weights_bytes - d.expert_bytes - d.embed_bytes - d.head_bytes, 0) / rest_b,
                        d.expert_bytes * k / expert_b, d.head_bytes / head_b)
            for d in placement.devices]


def step_flops(p: TokenParams, tokens: float, samples: float) -> float:
    """FLOPs of one device's products in a step that computes `tokens` tokens and samples `samples` rows (one
    a decoding stream: a paged server's chunked-prefill tokens in the same step are not sampled)."""
    return 2 * ((p.body + p.experts) * tokens + p.head * samples)


def moe_kernel(decode: DecodeRules, quant_id: str, arch: str) -> str | None:
    """The MoE kernel a quantization's experts run through on `arch` where rules/speed.toml [decode] moe_kernels
    names one apart from the default fused-MoE kernel (`mxfp4-marlin`), else None."""
    return decode.moe_kernels.get(quant_id, {}).get(arch)


def moe_decode_key(sc: Scenario, gpu: GpuSpec) -> str:
    """The key of rules/speed.toml [decode]'s MoE tables for the scenario on `gpu`: `family:kernel` where the
    experts run through a kernel of their own on the GPU's architecture (`moe_kernel`: vLLM takes Marlin for MXFP4
    experts on Ampere and Ada, triton_kernels on Hopper) and `family_moe_compute` has that key, else the family."""
    d, family = sc.rules.speed.decode, sc.runtime.family
    key = f"{family}:{moe_kernel(d, sc.quant.id, gpu.arch)}"
    return key if key in d.family_moe_compute else family


def moe_decode_factor(sc: Scenario, gpu: GpuSpec) -> float:
    """The factor on a MoE model's matrix fraction in a decode step on `gpu` (rules/speed.toml [decode]
    family_moe_compute at `moe_decode_key`); 1 for a dense model or a family without one."""
    table = sc.rules.speed.decode.family_moe_compute
    return float(table.get(moe_decode_key(sc, gpu), 1.0)) if sc.model.is_moe else 1.0


def moe_decode_serial(sc: Scenario, gpu: GpuSpec) -> float:
    """The share of the shorter of a MoE decode step's weight stream and its products on `gpu` that adds to the
    longer (rules/speed.toml [decode] family_moe_serial at `moe_decode_key`, else the family's); 0 for a dense model
    or a family without one (the roofline: the longer of the two)."""
    table = sc.rules.speed.decode.family_moe_serial
    return float(table.get(moe_decode_key(sc, gpu), table.get(sc.runtime.family, 0.0))) if sc.model.is_moe else 0.0


def decode_flops_per_s(sc: Scenario, gpu: GpuSpec) -> float:
    """FLOP/s a decode step's products reach on `gpu`: its matrix fraction, times the MoE decode factor for a MoE
    model (`moe_decode_factor`)."""
    return gpu.fp16_tflops * 1e12 * matmul_efficiency(sc, gpu, sc.model.is_moe) * moe_decode_factor(sc, gpu)


def decode_step(sc: Scenario, placement: Placement, kv_depth_bytes: list[int] | None = None, streams: int = 1,
                host_kv_bytes: int = 0, tokens: float | None = None) -> StepTimes:
    """Seconds for one decode step of `streams` sequences.

    `kv_depth_bytes` is the KV cache each GPU reads in the step (all streams together), `host_kv_bytes`
    what the CPU reads for the layers it runs. The weights are read once for all streams, so a batch is
    memory-bound until the FLOPs of `streams` tokens outgrow the memory time; then it is compute-bound. `tokens`
    is what the step computes when it carries more than one token per stream (a paged server's chunked prefill
    of the requests that replace finished ones rides in the same step; it defaults to `streams`). A MoE model's
    products run at its MoE matrix fraction (`matmul_efficiency`) times `family_moe_compute` (rules/speed.toml
    [decode]: a decode step gives each expert a few rows from many requests), and the share `family_moe_serial`
    of the shorter of its weight stream and its products adds to the longer.
    """
    rig, model, quant, rules = sc.rig, sc.model, sc.quant, sc.rules
    layout = placement.layout or sc.layout
    kv = kv_depth_bytes or [0] * len(placement.devices)
    computed = max(tokens if tokens is not None else streams, streams)
    reads = active_device_bytes(placement, model, max(int(round(computed)), 1))
    # a step reads the union of the experts its tokens choose, but each token multiplies only its own k
    # experts: the FLOPs are per token's active parameters (the same for a dense model)
    per_token = active_device_bytes(placement, model, 1)
    params = token_params(sc, placement)

    def device_s(i: int, weights: float, kv_bytes: float) -> float:
        g = rig.gpus[i].spec
        bw = g.memory_bandwidth_gb_s * 1e9 * decode_efficiency(g, quant, rules)
        share = min(weights / per_token[i], 1.0) if weights and per_token[i] else 0.0
        stream, products = (weights + kv_bytes) / bw, share * step_flops(params[i], computed, streams) / \
            decode_flops_per_s(sc, g)
        # the weights' stream or the products, whichever is longer, and the share of the other that does not overlap
        return max(stream, products) + moe_decode_serial(sc, g) * min(stream, products)

    used = [i for i, d in enumerate(placement.devices) if d.total_bytes]
    if any(d.split_bytes for d in placement.devices):
        # a row split (llama.cpp -sm row): the GPUs multiply their rows of each split matrix at the same
        # time, so the slowest share counts; everything else of a layer (attention over its KV cache,
        # norms, routed experts) runs on the layer's own GPU, one layer after the other
        split = max((device_s(i, placement.devices[i].split_bytes, 0) for i in used), default=0.0)
        gpu_s = split + sum(device_s(i, reads[i] - placement.devices[i].split_bytes, kv[i]) for i in used)
    elif placement.strategy == "tensor_parallel":
        gpu_s = max((device_s(i, reads[i], kv[i]) for i in used), default=0.0)
    else:  # stage after stage; the GPUs of a stage split by tensor parallel (vLLM's TP x PP) work at once
        tp = max(placement.tp_size, 1)
        gpu_s = sum(max(device_s(i, reads[i], kv[i]) for i in used[k:k + tp]) for k in range(0, len(used), tp))
    host_s = _host_decode_s(sc, placement, layout, streams, host_kv_bytes)
    return StepTimes(gpu_s, host_s, _fixed_decode_s(sc))


def _host_decode_s(sc: Scenario, placement: Placement, layout: mem.WeightsLayout, streams: int,
                   host_kv_bytes: int) -> float:
    """Seconds the CPU spends per decode step reading the weights (and KV cache) kept in system RAM."""
    if not (placement.host.weights_bytes and placement.strategy in ("cpu_offload", "moe_offload", "cpu_only")):
        return 0.0
    host, model = placement.host, sc.model
    host_active = host.weights_bytes - host.expert_bytes * (1 - active_fraction(model, streams))
    if placement.strategy != "cpu_only" and sc.runtime.embeddings_on_host or not model.tied_embeddings:
        host_active -= layout.embed_bytes  # a token reads one row of the input embedding, not all of it
    weights = max(host_active, 0)
    return max((weights + host_kv_bytes) / (host_read_gb_s(sc.rig) * 1e9 * float(sc.rules.speed.decode.cpu_efficiency)),
               _host_compute_s(sc, weights, streams))


def host_read_gb_s(rig: Rig) -> float:
    """What the CPU reads from system RAM at peak, GB/s: the RAM's bandwidth, capped by what a chiplet CPU's
    fabric links can read (hardware_db/cpus.toml ccds x ccd_read_gb_s, per socket)."""
    fabric = rig.cpu_spec.fabric_gb_s if rig.cpu_spec is not None else None
    return min(rig.ram_bandwidth_gb_s, fabric * rig.cpu_sockets) if fabric else rig.ram_bandwidth_gb_s


def _host_compute_s(sc: Scenario, weights_bytes: float, streams: int) -> float:
    """Seconds the CPU multiplies the weights it holds for `streams` tokens: 2 ops per weight per token at
    rules/speed.toml [cpu_decode] compute_efficiency of its peak int8 dot-product rate (0 when the CPU is unknown)."""
    cpu, eff = sc.rig.cpu_spec, float(sc.rules.speed.cpu_decode.compute_efficiency)
    if cpu is None or not eff or not cpu.int8_gops:
        return 0.0
    params = weights_bytes / max(sc.quant.bits_per_weight / 8, 1e-9)
    return 2 * params * max(streams, 1) / (cpu.int8_gops * sc.rig.cpu_sockets * 1e9 * eff)


def cpu_prefill_gflops(sc: Scenario) -> float:
    """What the CPU multiplies at in prompt processing, GFLOP/s: rules/speed.toml [cpu_decode]
    prefill_efficiency of its peak int8 rate where the catalog has the CPU, else [prefill] cpu_gflops."""
    cpu, share = sc.rig.cpu_spec, float(sc.rules.speed.cpu_decode.prefill_efficiency)
    if cpu is None or not share or not cpu.int8_gops:
        return float(sc.rules.speed.prefill.cpu_gflops)
    return cpu.int8_gops * sc.rig.cpu_sockets * share


def _fixed_decode_s(sc: Scenario) -> float:
    """The fixed cost of a decode step: kernel launches per layer and a per-token cost (the runtime's own
    fitted ones where rules/speed.toml has them)."""
    s, runtime = sc.rules.speed.decode, sc.runtime
    backend = backend_of(sc.rig.gpus[0].spec, runtime) if sc.rig.gpus else "cpu"
    own = sc.rules.speed.by_runtime.get(runtime.speed_terms, FixedCosts())
    per_layer = (own.per_layer_us if own.per_layer_us is not None else _lookup(s.per_layer_us, backend)) * 1e-6
    return sc.model.layers * per_layer + (own.per_token_us if own.per_token_us is not None else s.per_token_us) * 1e-6


class _PrefillTerms(NamedTuple):
    """What every device's prefill time is built from, for one prompt (a named tuple: the calibration builds
    millions)."""

    prompt_tokens: int
    active_params: float
    """Parameters a token multiplies (the embedding is a lookup)."""
    attn_flops: float
    """Attention FLOPs of the whole prompt over all layers."""
    per_layer_s: float
    launch_s: float
    step_s: float
    micro_batches: int
    ub_tokens: int
    """Tokens of one micro-batch (the prompt where it is shorter than n_ubatch)."""


def _prefill_terms(sc: Scenario, prompt_tokens: int, depth: int = 0) -> _PrefillTerms:
    s, model, rules = sc.rules.speed.prefill, sc.model, sc.rules
    backend = backend_of(sc.rig.gpus[0].spec, sc.runtime) if sc.rig.gpus else "cpu"
    return _PrefillTerms(
        prompt_tokens=prompt_tokens,
        active_params=model.params_active - model.vocab_size * model.hidden_size,
        attn_flops=attention_flops(model, prompt_tokens, depth),
        per_layer_s=_lookup(s.per_layer_us, backend) * 1e-6,
        launch_s=_lookup(rules.speed.decode.per_layer_us, backend) * 1e-6,
        step_s=float(rules.speed.decode.per_token_us) * 1e-6,
        micro_batches=max(1, -(-prompt_tokens // sc.runtime.ubatch)),
        ub_tokens=max(1, min(prompt_tokens, sc.runtime.ubatch)))


def tile_reads_bytes(sc: Scenario, gpu: GpuSpec, weights_bytes: float, expert_bytes: float, ub_tokens: int) -> float:
    """Bytes of weights one micro-batch reads from memory: a prompt's matrix product is cut into tiles of
    `token_tile` tokens (the backend's kernel tile, rules/speed.toml) and each tile streams the weights it
    multiplies, so a dense weight is read ceil(tokens / tile) times; a routed expert sees only the tokens routed
    to it (ub x k / E of them: 32 for Qwen3-30B-A3B at n_ubatch 512) and is read ceil(that / tile) times,
    if any token chooses it (`active_fraction`). 0 where the backend's tile is not given or the runtime's kernels
    are not the tiled ones (`token_tile_families`)."""
    tiles = sc.rules.speed.prefill.token_tile
    tile = tiles.get(backend_of(gpu), tiles.get("default", 0.0))
    if not tile or sc.runtime.family not in sc.rules.speed.prefill.token_tile_families:
        return 0.0
    model = sc.model
    dense = max(weights_bytes - expert_bytes, 0.0) * -(-ub_tokens // tile)
    if not expert_bytes or not model.experts:
        return dense
    per_expert = max(ub_tokens * model.experts_active / model.experts, 1.0)
    return dense + expert_bytes * active_fraction(model, ub_tokens) * -(-per_expert // tile)


def prefill_time(sc: Scenario, placement: Placement, prompt_tokens: int, depth: int = 0) -> StepTimes:
    """Seconds to process a prompt of `prompt_tokens` tokens after `depth` tokens already in the cache.

    Each GPU does 2 x (its share of the active parameters) FLOPs per token in matrix products and its
    share of the attention FLOPs (`attention_flops`; fitted separately per backend, fused or not: without
    flash attention llama.cpp's attention runs slower than its matrix products). The prompt is cut into
    micro-batches; with a layer split llama.cpp pipelines the micro-batches of one batch across
    the GPUs, so they overlap instead of waiting for each other.
    """
    t = _prefill_terms(sc, prompt_tokens, depth)
    if any(d.split_bytes for d in placement.devices):
        return StepTimes(_row_split_prefill_s(sc, placement, t), 0.0, 0.0)
    layout = placement.layout or sc.layout
    total_w = sum(layout.layer_bytes) + layout.output_bytes
    times = []
    for i, d in enumerate(placement.devices):
        if d.total_bytes == 0:
            continue
        g, quant = sc.rig.gpus[i].spec, sc.quant
        share = 1 / len(placement.devices) if placement.strategy == "tensor_parallel" else \
            (d.weights_bytes / total_w if total_w else 0.0)
        peak = g.fp16_tflops * 1e12
        compute = (2 * t.active_params * share * prompt_tokens / (peak * matmul_efficiency(sc, g, sc.model.is_moe))
                   + t.attn_flops * share / (peak * attention_efficiency(sc, g)))
        # floor: each micro-batch reads the device's weights at least once and launches every layer's
        # kernels, which a decode step measures (the decode per-layer cost)
        bw = g.memory_bandwidth_gb_s * 1e9 * decode_efficiency(g, quant, sc.rules)
        stream = t.micro_batches * (d.weights_bytes / bw + d.layers * t.launch_s + t.step_s)
        compute += t.micro_batches * tile_reads_bytes(sc, g, d.weights_bytes, d.expert_bytes, t.ub_tokens) / bw
        times.append(max(compute, stream) + d.layers * t.per_layer_s)
    return StepTimes(_overlap_s(sc, placement, times, t.micro_batches), _host_prefill_s(sc, placement, layout, t),
                     0.0)


def _overlap_s(sc: Scenario, placement: Placement, times: list[float], n_ub: int) -> float:
    """The GPUs' prefill time together: tensor parallel waits for the slowest; a layer split pipelines the
    micro-batches of each batch of `pipeline_microbatches` across its GPUs."""
    if placement.strategy == "tensor_parallel":
        return max(times, default=0.0)
    tp = max(placement.tp_size, 1)  # the GPUs of a TP x PP stage work at once
    times = [max(times[k:k + tp]) for k in range(0, len(times), tp)]
    if len(times) <= 1:
        return sum(times)
    # across machines llama.cpp RPC and exo run the stages one after another (rules/interconnect.toml [protocol])
    per_batch = max(1, int(sc.rules.speed.prefill.pipeline_microbatches)) if prefill_overlaps(sc) else 1
    slices = [t / n_ub for t in times]
    gpu_s = 0.0
    for start in range(0, n_ub, per_batch):
        m = min(per_batch, n_ub - start)
        gpu_s += sum(slices) + (m - 1) * max(slices)
    return gpu_s


def _host_prefill_s(sc: Scenario, placement: Placement, layout: mem.WeightsLayout, t: _PrefillTerms) -> float:
    """No GPU: the CPU's own throughput. Offload: llama.cpp copies the offloaded weights to the GPU for each
    micro-batch of a large prompt."""
    if placement.strategy == "cpu_only":
        return (2 * t.active_params * t.prompt_tokens + t.attn_flops) / (cpu_prefill_gflops(sc) * 1e9)
    if not placement.host.weights_bytes:
        return 0.0
    moved = placement.host.weights_bytes - (layout.embed_bytes if sc.runtime.embeddings_on_host else 0)
    if moved <= 0 or not sc.rig.gpus:
        return 0.0
    g0 = sc.rig.gpus[0]
    return moved * t.micro_batches / (pcie_gb_s(g0.pcie_gen, g0.pcie_lanes, sc.rules) * 1e9)


def _row_split_prefill_s(sc: Scenario, placement: Placement, t: _PrefillTerms) -> float:
    """A row split: the split matrices' share of the products runs on all GPUs at once; attention and the
    rest of each layer (routed experts, norms) on the layer's own GPU, layer after layer."""
    quant, rules, model = sc.quant, sc.rules, sc.model
    split_w = sum(d.split_bytes for d in placement.devices)
    split_params = min(split_w / max(quant.bits_per_weight / 8, 1e-9), t.active_params)
    split_t, own_t = 0.0, 0.0
    for i, d in enumerate(placement.devices):
        if d.total_bytes == 0:
            continue
        g = sc.rig.gpus[i].spec
        peak = g.fp16_tflops * 1e12
        eff = prefill_efficiency(g, quant, rules, model.is_moe)
        attn_eff = attention_efficiency(sc, g)
        bw = g.memory_bandwidth_gb_s * 1e9 * decode_efficiency(g, quant, rules)
        layers = d.layers / max(model.layers, 1)
        split_t = max(split_t, max(2 * split_params * (d.split_bytes / split_w) * t.prompt_tokens / (peak * eff),
                                   t.micro_batches * d.split_bytes / bw))
        own = (2 * (t.active_params - split_params) * layers * t.prompt_tokens / (peak * eff)
               + t.attn_flops * layers / (peak * attn_eff))
        own_t += max(own, t.micro_batches * ((d.weights_bytes - d.split_bytes) / bw + d.layers * t.launch_s)) \
            + d.layers * t.per_layer_s
    return split_t + own_t + t.micro_batches * t.step_s


def pcie_gb_s(gen: int | None, lanes: int | None, rules: Rulebook) -> float:
    """Achievable one-direction PCIe bandwidth for a link, GB/s."""
    table = rules.interconnect.pcie
    per_lane = float(table.per_lane_gb_s.get(str(gen or 3), table.per_lane_gb_s["3"]))
    return per_lane * (lanes or 16) * float(table.efficiency)
