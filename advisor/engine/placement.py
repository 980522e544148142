"""Put a model on a rig the way the runtime would: one GPU, layer split, tensor parallel, offload.

Layer split follows llama.cpp's `llama_model::load_tensors`: the split points are the GPUs'
cumulative share of (free) memory, computed in float32, and repeating layer `il` of `n_layer`
(plus the output layer as layer `n_layer`) goes to the first GPU whose split point exceeds
`il / (n_layer + 1)`. Each GPU holds its layers' weights and KV cache and its own buffers; the
input embedding stays in host RAM.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from dataclasses import replace
from fnmatch import fnmatchcase
from functools import lru_cache

from advisor.record import Record, record
from advisor.catalog.rulebook import Rulebook
from advisor.catalog.types import GIB, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine import memory as mem
from advisor.engine.fraction import memory_fraction
from advisor.engine.options import Options
from advisor.engine.rig import Rig, gpu_backend


@record
class DeviceUse(Record):
    """What one device holds."""

    device: str
    """`gpu0`, `gpu1`, ... or `cpu`."""
    name: str
    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    capacity_bytes: int
    """What the advisor lets this device hold (usable memory after the runtime's/OS's limits)."""
    layers: int = 0
    """Repeating layers whose weights sit here."""
    holds_output: bool = False
    expert_bytes: int = 0
    """Routed-expert weights here (part of `weights_bytes`): a token reads only the experts it chooses."""
    split_bytes: int = 0
    """This GPU's rows of the matrices a row split divides over all GPUs (part of `weights_bytes`): every
    GPU multiplies its rows at the same time; the rest of a layer runs on the layer's own GPU."""

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes

    @property
    def free_bytes(self) -> int:
        return self.capacity_bytes - self.total_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


@record
class Placement(Record):
    strategy: str
    """`single_gpu`, `layer_split`, `tensor_parallel`, `cpu_offload`, `moe_offload`, `cpu_only` or `none`."""
    devices: tuple[DeviceUse, ...]
    """GPUs, in order."""
    host: DeviceUse
    """System RAM: the embedding (llama.cpp), offloaded layers or experts and their KV cache."""
    fits: bool
    """Everything that should be on GPUs is, within each GPU's capacity."""
    runs: bool
    """It runs at all (possibly with offload)."""
    gpu_layers: int
    """Repeating layers on GPUs."""
    cpu_expert_layers: int = 0
    """MoE layers whose routed experts sit in system RAM."""
    cpu_expert_set: tuple[int, ...] = ()
    """Which layers those are (what `-ot` names)."""
    problem: str = ""
    """Why it does not run or fit, in words."""
    layout: mem.WeightsLayout | None = None
    """The weights this placement cut up (from the catalog's bits per weight, or a real file's tensors)."""
    split_kind: str = ""
    """How a tensor-parallel placement cut the layers (RuntimeSpec.tensor_split: `heads`, `rows`, `channels` or
    `meta`); empty for the other strategies."""

    @property
    def offloaded_bytes(self) -> int:
        return self.host.weights_bytes


def f32(x: float) -> float:
    """Round to float32, as llama.cpp's split arithmetic does."""
    return struct.unpack("f", struct.pack("f", x))[0]


def llama_cpp_split_points(capacities: list[int]) -> list[float]:
    """Cumulative, normalised split points, computed in float32 like llama.cpp."""
    points: list[float] = []
    total = 0.0
    for cap in capacities:
        total = f32(total + f32(float(cap)))
        points.append(total)
    if total <= 0:  # no GPU has usable memory (all of it taken by other processes): an even split, none fits
        return [f32(f32(i + 1) / len(points)) for i in range(len(points))]
    return [f32(p / total) for p in points]


def llama_cpp_layer_devices(n_layer: int, n_gpu_layers: int, capacities: list[int]) -> list[int]:
    """Device of each layer 0..n_layer (the last is the output layer); -1 is the CPU."""
    return list(_layer_devices(n_layer, n_gpu_layers, tuple(capacities)))


@lru_cache(maxsize=4096)
def _layer_devices(n_layer: int, n_gpu_layers: int, capacities: tuple[int, ...]) -> tuple[int, ...]:
    points = llama_cpp_split_points(list(capacities))
    start = max(n_layer - n_gpu_layers, 0)
    active = min(n_gpu_layers, n_layer + 1)
    out = []
    for il in range(n_layer + 1):
        if il < start or il - start >= active:
            out.append(-1)
        else:
            out.append(min(bisect_right(points, f32(f32(il - start) / active)), len(capacities) - 1))
    return tuple(out)


def deal_units(units: int, share: list[float], rotation: int = 0) -> list[int]:
    """`units` whole units (heads, column blocks, rows) dealt out in proportion to `share`: each device its
    rounded-down part, the units left over one each from device `rotation` on (llama.cpp's meta device rotates
    where the rounding lands from layer to layer, so the layers together follow -ts)."""
    n = len(share)
    got = [int(units * s) for s in share]
    left = units - sum(got)
    i = rotation % n if n else 0
    while left > 0 and n:
        if share[i] > 0:
            got[i] += 1
            left -= 1
        i = (i + 1) % n
    return got


def _unit_fractions(size: int, unit: int, share: list[float], rotation: int) -> list[float]:
    """Each device's fraction of a dimension of `size` split in blocks of `unit` (the last block may be short)."""
    blocks = max(-(-size // max(unit, 1)), 1)
    got = deal_units(blocks, share, rotation)
    return [g / blocks for g in got]


def rig_capacities(rig: Rig) -> list[int]:
    """Each GPU's memory as the runtime reads it (the card's total, or what was free when detected)."""
    return [g.capacity_bytes for g in rig.gpus]


def usable_capacity(rig: Rig, runtime: RuntimeSpec, rules: Rulebook, fraction: float | None = None) -> list[int]:
    """Per GPU: the memory the runtime may use (`fraction` replaces the runtime's own reservation). A
    runtime whose fraction is of the memory free at start (`fraction_of_free`) takes its CUDA context
    off the card before the fraction."""
    caps = []
    reserved = int(float(rules.memory.discrete_gpu.nvidia_reserved_mib) * mem.MIB)
    for g in rig.gpus:
        cap = g.capacity_bytes
        if g.spec.vendor == "nvidia" and not g.spec.unified_memory and g.capacity_basis == "total":
            cap -= reserved
        if g.spec.unified_memory:
            if g.spec.vendor == "apple":
                cap = mem.apple_working_set(cap, rules)
            else:
                uni = rules.memory.unified
                reserve = uni.os_reserve_gib.get(g.spec.id, rules.memory.host.os_reserve_gib)
                cap = max(cap - int(reserve * GIB), 0)
        share = fraction or runtime.gpu_memory_utilization
        if runtime.fraction_of_free and not g.spec.unified_memory:
            cap -= mem.context_bytes(runtime)
            if rig.nvlink and len(rig.gpus) > 1:
                cap -= int(runtime.context_mib_nvlink * mem.MIB)
            cap = max(cap, 0)
        if share:
            cap = int(cap * share)
        caps.append(cap)
    return caps


def host_capacity(rig: Rig, rules: Rulebook) -> int:
    reserve = int(rules.memory.host.os_reserve_gib * GIB)
    if rig.unified:
        # Unified memory: what the GPU holds comes out of the same RAM.
        return max(rig.ram_bytes - reserve, 0)
    return max(rig.ram_bytes - reserve, 0)


def flash_attention_on(runtime: RuntimeSpec, rig: Rig, options: Options) -> bool:
    """Whether flash attention is on: as asked, or under `auto` where every device's backend runs it
    (the runtime declares which: rules/runtimes.toml flash_attention_backends)."""
    if options.flash_attn in ("on", "off"):
        return options.flash_attn == "on"
    backends = {gpu_backend(g.spec) for g in rig.gpus} or {"cpu"}
    return bool(runtime.flash_attention_backends) and backends <= set(runtime.flash_attention_backends)


class Placer:
    """Places one (model, quant, runtime, options) on one rig; `at(ctx)` gives the placement."""

    def __init__(self, model: ModelSpec, quant: QuantSpec, runtime: RuntimeSpec, rig: Rig,
                 options: Options, rules: Rulebook, layout: mem.WeightsLayout | None = None) -> None:
        self.model, self.quant, self.runtime, self.rig = model, quant, runtime, rig
        self.options, self.rules = options, rules
        self.layout = layout or mem.weights_layout(model, quant)
        self.caps = usable_capacity(rig, runtime, rules, memory_fraction(runtime, options, rig_capacities(rig)))
        self.paged = runtime.kv_pool == "paged"
        ts = options.tensor_split
        if ts is not None and len(ts) != len(self.caps):
            ts = None  # a split for another number of GPUs: by memory (the engine's callers check it)
        self.split_weights = [int(x * GIB) for x in ts] if ts is not None else self.caps
        self.host_cap = host_capacity(rig, rules)
        self.split = options.split or runtime.default_split
        # what a tensor split cuts: `--split row` is the row split; `--split tensor` the runtime's own kind
        self.split_kind = "rows" if self.split == "row" else runtime.tensor_split
        self.embed_on_host = runtime.embeddings_on_host
        self.flash_attention = flash_attention_on(runtime, rig, options)
        self.ubatch = options.ubatch or runtime.ubatch
        self.kv_unified = runtime.default_unified_kv if options.kv_unified is None else options.kv_unified
        self.fa_missing = (not self.flash_attention and options.kv_type != "f16"
                           and runtime.kv_quant_needs_flash_attention)
        self.vision = self._vision()

    def _vision(self):
        """The vision tower's cost on this runtime (advisor.engine.vision), or None when it loads none."""
        if self.options.vision_tower is None:
            return None
        from advisor.engine.vision import vision_use

        tp = self.parallel_sizes()[0] if self.runtime.pipeline_split == "even" else 1
        tokens, seqs = self.batch_defaults()
        return vision_use(self.options.vision_tower, self.runtime.vision_terms, self.rules, flash_attention=self.flash_attention,
                          n_gpus=len(self.rig.gpus), offload=self.options.mmproj_offload, limit=self.options.mm_limit,
                          tp=tp, max_num_batched_tokens=tokens, max_num_seqs=seqs)

    def _vision_on_host(self) -> int:
        """The vision tower's bytes in system RAM (llama.cpp's --no-mmproj-offload, or no GPU)."""
        return self.vision.extra_bytes(None, 0) if self.vision is not None else 0

    # -- helpers ---------------------------------------------------------------------------------
    def _streams(self, ctx: int) -> tuple[int, int, int]:
        """(cells per KV stream, streams, sequences per stream): one stream per sequence, or one
        shared by all when the cache is unified."""
        cells = mem.kv_cells(ctx, self.runtime, self.rules)
        # A paged pool starts when one request of the full context fits; the rest of it is shared by all.
        n = 1 if self.paged else self.options.concurrency
        return (cells * n, 1, n) if self.kv_unified else (cells, n, 1)

    def _swa_cells(self, ctx: int) -> int:
        span, _, seqs = self._streams(ctx)
        return mem.swa_kv_cells(self.model, self.runtime, span, seqs, self.ubatch, self.options.swa_full)

    def kv_per_layer(self, ctx: int) -> tuple[int, ...]:
        """KV cache bytes of each layer for `concurrency` sequences of `ctx` tokens (one, for a paged pool)."""
        span, streams, _ = self._streams(ctx)
        return mem.kv_bytes_per_layer(self.model, span, self.options.kv_type, self.rules, streams,
                                      swa_cells=self._swa_cells(ctx))

    _kv = kv_per_layer

    def _overhead(self, ctx: int, holds_output: bool, heads: int | None = None, gpu: int = 0) -> int:
        """Runtime context (discrete GPUs only) plus the compute buffer on one GPU."""
        span, streams, seqs_per_stream = self._streams(ctx)
        if self.runtime.fraction_of_free and self.rig.gpus:
            # only weights and KV cache live in its fraction; activations, CUDA graphs and request tables
            # come out of the rest of the card (and the context was taken off before the fraction)
            return int(self.runtime.load_extra_mib * mem.MIB)
        unified = bool(self.rig.gpus) and self.rig.gpus[gpu].spec.unified_memory
        context = 0 if unified or not self.rig.gpus else mem.context_bytes(self.runtime)
        rt = self.runtime
        ubatch, seqs = self.batch_defaults(gpu)
        if self.options.ubatch:
            ubatch = self.options.ubatch
        if context and gpu > 0:  # what its loader leaves free on the GPUs after the first
            context += int(rt.reserve_mib_other_gpus * mem.MIB)
        if context and len(self.rig.gpus) >= 8:
            context += int(rt.context_mib_many_gpus * mem.MIB)
        if context and rt.cuda_graph_mib and not self.options.enforce_eager:
            context += int(rt.cuda_graph_mib * mem.MIB)
        buf = mem.compute_buffer_bytes(
            self.model, rt, span, holds_output=holds_output,
            flash_attention=self.flash_attention, heads_on_device=heads, ubatch=ubatch, sequences=seqs,
            swa_cells=self._swa_cells(ctx), total_cells=span * streams,
            kv_rotated=mem.kv_rotated(self.model, rt, self.options.kv_type, self.rules))
        if self.vision is not None and self.rig.gpus:
            buf += self.vision.extra_bytes(gpu, buf - int(rt.compute_fixed_mib * mem.MIB))
        return context + buf

    def batch_defaults(self, gpu: int = 0) -> tuple[int, int]:
        """(tokens per profile batch, requests per step) on this GPU: as asked, else the runtime's defaults,
        which vLLM raises on GPUs of `large_gpu_gib` and more that are not A100s (its get_batch_defaults)."""
        rt = self.runtime
        ubatch, seqs = rt.ubatch, rt.max_num_seqs
        if self.rig.gpus and rt.large_gpu_gib:
            spec = self.rig.gpus[gpu].spec
            if spec.vram_gib >= rt.large_gpu_gib and not spec.id.startswith(rt.large_gpu_excluded or ("\0",)):
                ubatch = rt.ubatch_large or ubatch
                seqs = rt.max_num_seqs_large or seqs
        return (self.options.max_num_batched_tokens or ubatch, self.options.max_num_seqs or seqs)

    def _host(self, weights: int, kv: int, layers: int, gpu_bytes: int = 0, expert_bytes: int = 0) -> DeviceUse:
        """System RAM's share (the first machine's, where the process that keeps the embedding runs). On
        unified memory what that machine's GPU holds comes out of the same RAM, and the GPU's working-set
        limit has already left the OS its share, so no separate reserve applies."""
        cap = max(self.rig.ram_bytes - gpu_bytes, 0) if self.rig.unified else self.host_cap
        return DeviceUse("cpu", self.rig.cpu or "system RAM", weights, kv, self._vision_on_host(), cap, layers,
                         expert_bytes=expert_bytes)

    # -- strategies ------------------------------------------------------------------------------
    def at(self, ctx: int) -> Placement:
        return replace(self._at(ctx), layout=self.layout)

    def _at(self, ctx: int) -> Placement:
        if self.fa_missing:
            return self._refused(ctx, f"{self.runtime.name} needs flash attention for a {self.options.kv_type} "
                                      f"V cache, and it is off here")
        if self.rig.is_cpu_only:
            return self._cpu_only(ctx)
        if self.split == "tensor" and (why := self.tensor_refusal()):
            return self._refused(ctx, why)
        if self.runtime.pipeline_split == "even" and (len(self.rig.gpus) > 1 or self.options.cpu_offload_gb):
            return self._staged(ctx)
        explicit = self.options.n_gpu_layers is not None or self.options.cpu_expert_layers is not None
        if len(self.rig.gpus) > 1 and self.split in ("tensor", "row"):
            placement = replace(self._tensor_parallel(ctx), split_kind=self.split_kind)
        elif explicit:  # the layers and experts the command line put where it put them
            ngl = self.model.layers + 1 if self.options.n_gpu_layers is None else self.options.n_gpu_layers
            return self._runs_or_not(self._layers(ctx, min(ngl, self.model.layers + 1),
                                                  frozenset(self.options.cpu_expert_layers or ())))
        else:
            placement = self._layers(ctx, self.model.layers + 1)
        if placement.fits or placement.problem:
            return placement
        return self._offload(ctx)

    def _cpu_only(self, ctx: int) -> Placement:
        kv = sum(self._kv(ctx))
        host = DeviceUse("cpu", self.rig.cpu or "system RAM", self.layout.total_bytes, kv,
                         self._overhead(ctx, True) + self._vision_on_host(), self.host_cap,
                         self.model.layers, expert_bytes=sum(self.layout.expert_bytes))
        runs = host.fits
        return Placement("cpu_only", (), host, fits=False, runs=runs, gpu_layers=0,
                         problem="" if runs else "the weights and KV cache do not fit in system RAM")

    def _layers(self, ctx: int, n_gpu_layers: int, cpu_experts: frozenset[int] = frozenset()) -> Placement:
        """llama.cpp layer placement with `n_gpu_layers` (n_layer + 1 = everything incl. output); the
        routed experts of the layers in `cpu_experts` stay in system RAM (`-ot blk.N.ffn_.*_exps=CPU`)."""
        n = self.model.layers
        kv = self._kv(ctx)
        devs = llama_cpp_layer_devices(n, n_gpu_layers, self.split_weights)
        w = [0] * len(self.caps)
        k = [0] * len(self.caps)
        e = [0] * len(self.caps)
        nl = [0] * len(self.caps)
        host_w = self.layout.embed_bytes if self.embed_on_host else 0
        host_k = host_e = 0
        moved = []
        for il in range(n):
            d = devs[il]
            lw = self.layout.layer_bytes[il]
            ew = self.layout.expert_bytes[il]
            if d >= 0 and il in cpu_experts and ew:
                host_w += ew
                host_e += ew
                lw -= ew
                ew = 0
                moved.append(il)
            if d < 0:
                host_w += lw
                host_e += ew
                host_k += kv[il]
            else:
                w[d] += lw
                e[d] += ew
                k[d] += kv[il]
                nl[d] += 1
        out_dev = devs[n]
        if out_dev >= 0:
            w[out_dev] += self.layout.output_bytes
        else:
            host_w += self.layout.output_bytes
        if not self.embed_on_host and not (self.model.tied_embeddings and out_dev >= 0):
            # unified memory / runtimes that keep the embedding on the GPU: it sits with layer 0 (a tied
            # embedding is the output head already counted there: PyTorch runtimes hold one copy).
            first = next((d for d in devs if d >= 0), -1)
            if first >= 0:
                w[first] += self.layout.embed_bytes
            else:
                host_w += self.layout.embed_bytes
        used = sorted({d for d in devs if d >= 0})
        devices = []
        for i, g in enumerate(self.rig.gpus):
            over = self._overhead(ctx, holds_output=(i == out_dev), gpu=i) if (i in used) else 0
            devices.append(DeviceUse(g.label, g.name or g.spec.name, w[i], k[i], over, self.caps[i], nl[i],
                                     i == out_dev, e[i]))
        host = self._host(host_w, host_k, n - sum(nl), gpu_bytes=sum(d.total_bytes for g, d in zip(self.rig.gpus, devices)
                                            if g.node == self.rig.gpus[0].node),
                          expert_bytes=host_e)
        gpu_ok = all(d.fits for d in devices)
        full = n_gpu_layers > n and not moved
        if full:
            strategy = "single_gpu" if len(used) <= 1 else "layer_split"
        else:
            strategy = "moe_offload" if moved and n_gpu_layers > n else "cpu_offload"
        return Placement(strategy, tuple(devices), host, fits=gpu_ok and full and host.fits,
                         runs=gpu_ok and host.fits, gpu_layers=sum(nl), cpu_expert_layers=len(moved),
                         cpu_expert_set=tuple(moved))

    def _tensor_parallel(self, ctx: int) -> Placement:
        m, n = self.model, len(self.caps)
        if self.split_kind == "meta":
            return self._meta_split(ctx)
        row_split = self.split_kind == "rows"  # splits matrix rows: no head constraint
        # `channels`: heads and MLP channels dealt out in proportion to each GPU's memory (ExLlamaV3's
        # TPAllocator), so no head count has to divide by the GPU count and each GPU keeps its heads' KV.
        by_memory = self.split_kind == "channels"
        if not (row_split or by_memory) and m.attention_heads % n:
            return self._refused(ctx, f"tensor parallel over {n} GPUs needs the {m.attention_heads} attention "
                                      f"heads to divide by {n}")
        if not (row_split or by_memory) and (m.kv_heads % n) and (n % m.kv_heads):
            return self._refused(ctx, f"tensor parallel over {n} GPUs needs the {m.kv_heads} KV heads and "
                                      f"{n} to divide one another")
        if row_split:
            return self._row_split(ctx)
        kv_total = sum(self._kv(ctx))
        kv_share = kv_total * max(1 / n, 1 / max(m.kv_heads, 1)) if not m.is_mla else kv_total
        weights = self.layout.total_bytes
        if by_memory:
            total_cap = sum(self.caps)
            frac = [c / total_cap for c in self.caps] if total_cap > 0 else [1 / n] * n
            shares = [weights * f for f in frac]
            kvs = [kv_total if m.is_mla else kv_total * f for f in frac]
        else:
            shares = [weights / n] * n
            kvs = [kv_share] * n
        devices = tuple(
            DeviceUse(g.label, g.name or g.spec.name, int(shares[i]), int(kvs[i]),
                      self._overhead(ctx, holds_output=True, heads=m.attention_heads // n, gpu=i), self.caps[i],
                      m.layers, True)
            for i, g in enumerate(self.rig.gpus))
        ok = all(d.fits for d in devices)
        return Placement("tensor_parallel", devices, self._host(0, 0, 0), fits=ok, runs=ok, gpu_layers=m.layers,
                         problem="" if ok or self.runtime.supports_cpu_offload else
                         f"{self.runtime.name} cannot offload to system RAM and the GPUs are too small")

    def tensor_refusal(self) -> str:
        """Why the runtime's `--split tensor` refuses this configuration (rules/runtimes.toml tensor_*), or ""."""
        rt, m = self.runtime, self.model
        if self.split_kind != "meta" or len(self.rig.gpus) < 2:
            return ""
        why = next((why for pattern, why in rt.tensor_unsupported_models.items()
                    if fnmatchcase(m.id.lower(), pattern)), "")
        if why:
            return f"{rt.name} --split-mode tensor does not run {m.name}: {why}; use --split layer"
        other = sorted({gpu_backend(g.spec) for g in self.rig.gpus} - set(rt.tensor_backends)) if rt.tensor_backends \
            else []
        if other:
            return (f"{rt.name} documents --split-mode tensor for the {' and '.join(rt.tensor_backends)} back-ends only, "
                    f"not {' or '.join(other)} ({rt.tensor_basis.split(':')[0]}); use --split layer")
        if rt.tensor_flash_attention and not self.flash_attention:
            return (f"{rt.name} --split-mode tensor needs flash attention ('SPLIT_MODE_TENSOR requires flash_attn to "
                    f"be enabled'), and it is off here")
        if rt.tensor_kv_types and self.options.kv_type not in rt.tensor_kv_types:
            return (f"{rt.name} --split-mode tensor has no quantized KV cache ('simultaneous use of SPLIT_MODE_TENSOR "
                    f"and KV cache quantization not implemented'): use --kv-cache {rt.tensor_kv_types[0]}")
        return ""

    def _meta_split(self, ctx: int) -> Placement:
        """llama.cpp -sm tensor as its meta device allocates it (src/llama-model.cpp
        llama_meta_device_get_split_state, PR #19378; rules/runtimes.toml): in every layer the attention
        matrices go by KV heads (each GPU its KV groups' Q heads and output columns) and the dense and routed-
        expert feed-forward matrices by units of `lcm(block, 128)` columns, each in -ts proportion (even without
        -ts), the remainder of the rounding rotating with the layer; the KV cache follows the KV heads (latent
        attention keeps it whole on every GPU); the output head is cut by vocabulary rows; norms, the router and
        whatever else a layer holds are mirrored on every GPU; the input embedding stays in host RAM."""
        m, lay, n = self.model, self.layout, len(self.caps)
        ts = self.options.tensor_split
        share = list(ts) if ts is not None and len(ts) == n and sum(ts) > 0 else [1.0] * n
        share = [x / sum(share) for x in share]
        kv = self._kv(ctx)
        bpw = self.quant.body_bits / 8
        col = int(self.rules.memory.tensor_split.ffn_columns.get(self.quant.kernel,
                                                                self.rules.memory.tensor_split.ffn_columns["default"]))
        w, k, e = [0.0] * n, [0.0] * n, [0.0] * n
        for il in range(m.layers):
            rot = il % n
            heads = deal_units(m.kv_heads, share, rot)
            head_fr = [h / max(m.kv_heads, 1) for h in heads]
            ew = lay.expert_bytes[il]
            rest = lay.layer_bytes[il] - ew
            mats = mem.row_split_matrices(m, il, lay)
            if mats is None:  # latent attention, recurrent or MLP-only blocks: the split weights in -ts proportion
                for i in range(n):
                    w[i] += rest * share[i]
                    k[i] += kv[il] if m.is_mla else kv[il] * share[i]
            else:
                h = m.hidden_size
                q_dim, kv_dim = m.attention_heads * m.head_dim, m.kv_heads * m.head_dim
                attn = min((2 * q_dim * h + 2 * kv_dim * h) * bpw, rest)
                ff = m.shared_experts * m.moe_intermediate_size if ew else m.intermediate_size
                ffn = min(3 * ff * h * bpw, rest - attn)
                mirrored = rest - attn - ffn  # norms, the router, biases of sums
                ffn_fr = _unit_fractions(ff, col, share, rot)
                for i in range(n):
                    w[i] += attn * head_fr[i] + ffn * ffn_fr[i] + mirrored
                    k[i] += kv[il] * head_fr[i]
            if ew:
                ex_fr = _unit_fractions(m.moe_intermediate_size or m.intermediate_size, col, share, rot)
                for i in range(n):
                    w[i] += ew * ex_fr[i]
                    e[i] += ew * ex_fr[i]
        out_fr = [r / max(m.vocab_size, 1) for r in deal_units(m.vocab_size, share, m.layers % n)]
        for i in range(n):
            w[i] += lay.output_bytes * out_fr[i]
        host_w = lay.embed_bytes if self.embed_on_host else 0
        if not self.embed_on_host:  # a runtime that keeps the input embedding on its GPUs: mirrored like the rest
            for i in range(n):
                w[i] += lay.embed_bytes
        devices = tuple(
            DeviceUse(g.label, g.name or g.spec.name, int(w[i]), int(k[i]),
                      self._overhead(ctx, holds_output=True, heads=max(round(m.attention_heads * share[i]), 1), gpu=i),
                      self.caps[i], m.layers, True, int(e[i]))
            for i, g in enumerate(self.rig.gpus))
        ok = all(d.fits for d in devices)
        over = next((d for d in devices if not d.fits), None)
        problem = "" if over is None else (
            f"{over.device} would need {over.total_bytes / GIB:.1f} GiB with --split-mode tensor; "
            f"{over.capacity_bytes / GIB:.1f} GiB is usable (this mode cannot fit itself: lower -c or use --split layer)")
        return Placement("tensor_parallel", devices, self._host(host_w, 0, 0), fits=ok, runs=ok, gpu_layers=m.layers,
                         problem=problem)

    def _row_tile(self) -> list[int]:
        """Each GPU's MMQ tile height, the rows its share of a split matrix is rounded to (rules/memory.toml
        [row_split])."""
        rs = self.rules.memory.row_split
        out = []
        for g in self.rig.gpus:
            if g.spec.vendor == "nvidia":
                cc = g.spec.compute_capability
                out.append(rs.mmq_rows["nvidia" if cc is None or cc >= rs.volta_cc else "nvidia_pre_volta"])
            else:
                out.append(rs.mmq_rows.get(g.spec.vendor, rs.mmq_rows["amd"]))
        return out

    def _row_split(self, ctx: int) -> Placement:
        """llama.cpp -sm row as its loader places it (src/llama-model.cpp load_tensors, Oct 2024 - Jul 2026):
        the layers go to the GPUs as in a layer split (split points by free memory or -ts), and with each
        layer its KV cache, norms, routed experts (3-D: a split buffer refuses them) and compute; only its
        2-D matrices, and the output head, sit in the split buffer, which gives every GPU a band of rows in
        proportion to -ts or, by default, to each GPU's total memory (advisor.engine.memory row_split_*).
        A matrix of which the layer's own GPU would get no rows is not split (the device refuses it)."""
        m, lay, n = self.model, self.layout, len(self.caps)
        rs = self.rules.memory.row_split
        kv = self._kv(ctx)
        devs = llama_cpp_layer_devices(m.layers, m.layers + 1, self.split_weights)
        ts = self.options.tensor_split
        starts = mem.row_split_starts(list(ts) if ts is not None and len(ts) == n and any(ts)
                                      else [g.spec.vram_bytes for g in self.rig.gpus])
        rounding = mem.row_rounding(starts, self._row_tile())
        bpw = self.quant.body_bits / 8
        own = [0] * n
        split = [0] * n
        k, e, nl = [0] * n, [0] * n, [0] * n

        def deal(total: int, d: int, mats: list[tuple[int, int]] | None) -> None:
            """`total` bytes of non-expert weights of a layer on GPU d: its listed matrices split by rows."""
            if mats is None:  # matrices not listed: the whole non-expert part in proportion to the shares
                fr = [(starts[i + 1] if i + 1 < n else 1.0) - starts[i] for i in range(n)]
                for i in range(n):
                    split[i] += int(total * fr[i])
                return
            left = total
            for rows, cols in mats:
                want = int(round(rows * cols * bpw))
                if want > left:
                    break  # the layout holds fewer bytes than the listed shapes: the rest stays on GPU d
                left -= want
                per = mem.row_split_rows(rows, starts, rounding)
                if per[d] == 0:
                    own[d] += want
                    continue
                got = mem.split_matrix_bytes(rows, cols, bpw, per, rs.row_padding)
                scale = want / max(rows * cols * bpw, 1)
                for i in range(n):
                    split[i] += int(got[i] * scale)
            own[d] += left  # norms and anything not listed

        for il in range(m.layers):
            d = devs[il]
            ew = lay.expert_bytes[il]
            own[d] += ew
            e[d] += ew
            k[d] += kv[il]
            nl[d] += 1
            deal(lay.layer_bytes[il] - ew, d, mem.row_split_matrices(m, il, lay))
        out_dev = devs[m.layers]
        deal(lay.output_bytes, out_dev, [(m.vocab_size, m.hidden_size)])
        if not self.embed_on_host:  # a runtime that keeps the input embedding on the GPU: with layer 0
            own[devs[0]] += lay.embed_bytes
        used = {i for i in range(n) if own[i] or split[i]}
        devices = tuple(
            DeviceUse(g.label, g.name or g.spec.name, own[i] + split[i], k[i],
                      self._overhead(ctx, holds_output=(i == out_dev), gpu=i) if i in used else 0,
                      self.caps[i], nl[i], i == out_dev, e[i], split_bytes=split[i])
            for i, g in enumerate(self.rig.gpus))
        ok = all(d.fits for d in devices)
        return Placement("tensor_parallel", devices, self._host(self.layout.embed_bytes if self.embed_on_host else 0,
                                                                0, 0),
                         fits=ok, runs=ok, gpu_layers=m.layers,
                         problem="" if ok or self.runtime.supports_cpu_offload else
                         f"{self.runtime.name} cannot offload to system RAM and the GPUs are too small")

    def parallel_sizes(self) -> tuple[int, int]:
        """(tensor parallel, pipeline parallel) for runtimes that cut equal stages (vLLM): as asked, else
        every GPU in one tensor-parallel group (`--split tensor`) or one stage per GPU (`--split layer`)."""
        n = max(len(self.rig.gpus), 1)
        tp, pp = self.options.tensor_parallel, self.options.pipeline_parallel
        if tp is None and pp is None:
            return (1, n) if self.split == "layer" else (n, 1)
        return tp or 1, pp or 1

    def _staged(self, ctx: int) -> Placement:
        """vLLM's layout: `pp` pipeline stages of equal layer counts (vllm/distributed/utils.py
        get_pp_indices: the remainder goes to the stages before the last), each split across `tp` GPUs by
        heads; the embedding sits on the first stage, the output head on the last. Every GPU must hold its
        own share, so the smallest card of a stage decides. `--cpu-offload-gb` keeps that many GiB of each
        GPU's weights in system RAM."""
        m, lay = self.model, self.layout
        tp, pp = self.parallel_sizes()
        if tp > 1 and m.attention_heads % tp:
            return self._refused(ctx, f"tensor parallel over {tp} GPUs needs the {m.attention_heads} attention "
                                      f"heads to divide by {tp}")
        if tp > 1 and (m.kv_heads % tp) and (tp % m.kv_heads):
            return self._refused(ctx, f"tensor parallel over {tp} GPUs needs the {m.kv_heads} KV heads and "
                                      f"{tp} to divide one another")
        if pp > m.layers:
            return self._refused(ctx, f"{pp} pipeline stages need at least {pp} layers; {m.name} has {m.layers}")
        per = [m.layers // pp] * pp
        for i in range(2, m.layers % pp + 2):
            per[-i] += 1
        kv = self._kv(ctx)
        kv_share = 1.0 if m.is_mla else max(1 / tp, 1 / max(m.kv_heads, 1))
        offload = int(self.options.cpu_offload_gb * GIB)
        devices, host_w, start = [], 0, 0
        for s_i, count in enumerate(per):
            layers = range(start, start + count)
            start += count
            w = sum(lay.layer_bytes[il] for il in layers)
            if s_i == 0:
                w += lay.embed_bytes
            if s_i == pp - 1 and not (m.tied_embeddings and pp == 1):
                w += lay.output_bytes
            k = sum(kv[il] for il in layers) * kv_share
            for t in range(tp):
                i = s_i * tp + t
                g = self.rig.gpus[i]
                gw = int(w / tp)
                moved = min(offload, gw)
                host_w += moved
                devices.append(DeviceUse(g.label, g.name or g.spec.name, gw - moved, int(k),
                                         self._overhead(ctx, holds_output=(s_i == pp - 1),
                                                        heads=m.attention_heads // tp, gpu=i),
                                         self.caps[i], count, s_i == pp - 1))
        for g in self.rig.gpus[tp * pp:]:  # GPUs the run does not use
            devices.append(DeviceUse(g.label, g.name or g.spec.name, 0, 0, 0, self.caps[len(devices)], 0))
        host = self._host(host_w, 0, 0)
        ok = all(d.fits for d in devices) and host.fits
        if host_w:
            strategy = "cpu_offload"
        elif tp * pp == 1:
            strategy = "single_gpu"
        else:
            strategy = "layer_split" if pp > 1 else "tensor_parallel"
        problem = "" if ok else (f"{self.runtime.name} cannot offload to system RAM on its own and the GPUs are too "
                                 f"small" if host.fits else "the weights offloaded with --cpu-offload-gb do not fit "
                                                            "in system RAM")
        return Placement(strategy, tuple(devices), host, fits=ok and not host_w, runs=ok, gpu_layers=m.layers,
                         problem=problem)

    def _refused(self, ctx: int, why: str) -> Placement:
        return Placement("none", (), self._host(0, 0, 0), fits=False, runs=False, gpu_layers=0, problem=why)

    def _offload(self, ctx: int) -> Placement:
        """Keep as much on the GPUs as fits; the rest runs from system RAM (if the runtime can)."""
        if not self.runtime.supports_cpu_offload:
            best = self._layers(ctx, self.model.layers + 1)
            return Placement(best.strategy, best.devices, best.host, fits=False, runs=False,
                             gpu_layers=best.gpu_layers,
                             problem=f"{self.runtime.name} cannot offload to system RAM and the GPUs are too small")
        if self.model.is_moe:
            best = self._fill_experts(ctx)
            if best is not None:
                return self._runs_or_not(best)
        lo, hi, best = 0, self.model.layers, None
        while lo <= hi:  # most layers on the GPUs that still fit
            mid = (lo + hi) // 2
            p = self._layers(ctx, mid)
            if all(d.fits for d in p.devices):
                best, lo = p, mid + 1
            else:
                hi = mid - 1
        if best is None:
            best = self._layers(ctx, 0)
        return self._runs_or_not(best)

    def _fill_experts(self, ctx: int) -> Placement | None:
        """MoE offload as llama.cpp's `--fit` does it: every layer's attention, dense and shared weights
        and its KV cache on its GPU (layers spread by memory or `-ts`), then on every GPU as many of its
        layers' routed experts as fit; the experts of the rest (each GPU's first layers) stay in RAM.
        None when even without any experts a GPU overflows (then whole layers go to RAM)."""
        n = self.model.layers
        moe = [il for il in range(n) if self.layout.expert_bytes[il]]
        bare = self._layers(ctx, n + 1, frozenset(moe))
        if not all(d.fits for d in bare.devices):
            return None
        devs = llama_cpp_layer_devices(n, n + 1, self.split_weights)
        cpu = set(moe)
        for i, d in enumerate(bare.devices):
            free = d.free_bytes
            mine = [il for il in moe if devs[il] == i]
            for il in reversed(mine):  # keep the last layers' experts; the first ones go to RAM
                if self.layout.expert_bytes[il] <= free:
                    free -= self.layout.expert_bytes[il]
                    cpu.discard(il)
                else:
                    break
        return self._layers(ctx, n + 1, frozenset(cpu))

    def _runs_or_not(self, p: Placement) -> Placement:
        over = [d for d in p.devices if not d.fits]
        if over:
            d = over[0]
            return replace(p, fits=False, runs=False,
                           problem=f"{d.device} would need {d.total_bytes / GIB:.1f} GiB; "
                                   f"{d.capacity_bytes / GIB:.1f} GiB is usable")
        if p.host.fits:
            return p
        need = p.host.total_bytes / GIB
        have = p.host.capacity_bytes / GIB
        return Placement(p.strategy, p.devices, p.host, fits=False, runs=False, gpu_layers=p.gpu_layers,
                         cpu_expert_layers=p.cpu_expert_layers, cpu_expert_set=p.cpu_expert_set,
                         problem=f"the part that does not fit on the GPUs needs {need:.1f} GiB of system RAM; "
                                 f"{have:.1f} GiB is usable")

    def max_context(self) -> int:
        """The largest context (multiple of 256, up to the model's maximum) that still fits fully
        (on a CPU-only rig: that still runs from system RAM)."""
        limit = self.model.max_context
        # no GPU, or a placement the command line fixed (-ngl, -ot): the largest context that still runs so
        explicit = self.options.n_gpu_layers is not None or self.options.cpu_expert_layers is not None
        ok = (lambda p: p.runs) if self.rig.is_cpu_only or explicit else (lambda p: p.fits)
        if not ok(self.at(256)):
            return 0
        if ok(self.at(limit)):
            return limit
        lo, hi = 1, limit // 256
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(self.at(mid * 256)):
                lo = mid
            else:
                hi = mid - 1
        return lo * 256
