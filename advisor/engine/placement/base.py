"""What every placement strategy shares: capacities, the KV cache per layer, each GPU's overhead, the host's
share, and the verdict on a placement (advisor.engine.placement.placer picks the strategy)."""

from __future__ import annotations

from dataclasses import replace

from advisor.catalog.types import GIB
from advisor.engine import memory as mem
from advisor.engine.family import family_of
from advisor.engine.fraction import memory_fraction
from advisor.engine.multinode import across_nodes
from advisor.engine.placement.capacity import flash_attention_on, host_capacity, rig_capacities, usable_capacity
from advisor.engine.placement.records import DeviceUse, Placement
from advisor.engine.rig import gpu_backend
from advisor.engine.scenario import Scenario


class PlacerBase:
    """One Scenario on its rig: what the strategies (one module each) build their placements from."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = s = scenario
        self.model, self.quant, self.runtime, self.rig = s.model, s.quant, s.runtime, s.rig
        self.options, self.rules, self.layout = s.options, s.rules, s.layout
        rig, runtime, options, rules = s.rig, s.runtime, s.options, s.rules
        self.caps = usable_capacity(rig, runtime, rules, memory_fraction(runtime, options, rig_capacities(rig)))
        self.family = family_of(runtime)
        self.kv_sequences = self.family.kv_sequences(options)
        """Sequences whose KV cache a placement holds (its family's answer for these options)."""
        self._kv_at: dict[int, tuple[int, ...]] = {}
        self._overhead_at: dict[tuple, int] = {}
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
        return vision_use(self.scenario, self.flash_attention, tp, self.batch_defaults())

    def edges(self) -> tuple[int, int]:
        """(bytes only looked up, bytes of the output head) of a runtime that holds one copy of each matrix:
        a tied embedding is the head, leaving only the per-layer embeddings (Gemma 3n/4) looked up."""
        lay = self.layout
        if self.model.tied_embeddings:
            return lay.embed_bytes - lay.output_bytes, lay.output_bytes
        return lay.embed_bytes, lay.output_bytes

    def _vision_on_host(self) -> int:
        """The vision tower's bytes in system RAM (llama.cpp's --no-mmproj-offload, or no GPU)."""
        return self.vision.extra_bytes(None, 0) if self.vision is not None else 0

    def _streams(self, ctx: int) -> tuple[int, int, int]:
        """(cells per KV stream, streams, sequences per stream): one stream per sequence, or one
        shared by all when the cache is unified."""
        cells = mem.kv_cells(ctx, self.runtime, self.rules)
        # A paged pool starts when one request of the full context fits; the rest of it is shared by all.
        n = self.kv_sequences
        return (cells * n, 1, n) if self.kv_unified else (cells, n, 1)

    def _swa_cells(self, ctx: int) -> int:
        span, _, seqs = self._streams(ctx)
        return mem.swa_kv_cells(self.model, self.runtime, span, seqs, self.ubatch, self.options.swa_full)

    def kv_per_layer(self, ctx: int) -> tuple[int, ...]:
        """KV cache bytes of each layer for `concurrency` sequences of `ctx` tokens (one, for a paged pool).
        Kept per context: a placement search asks for the same context many times (-ngl bisection, expert fill)."""
        kv = self._kv_at.get(ctx)
        if kv is None:
            span, streams, _ = self._streams(ctx)
            kv = self._kv_at[ctx] = mem.kv_bytes_per_layer(self.model, span, self.options.kv_type, self.rules,
                                                           streams, swa_cells=self._swa_cells(ctx))
        return kv

    _kv = kv_per_layer

    def _overhead(self, ctx: int, holds_output: bool, heads: int | None = None, gpu: int = 0) -> int:
        """Runtime context (discrete GPUs only) plus the compute buffer on one GPU (kept per arguments, as
        `kv_per_layer` is)."""
        key = (ctx, holds_output, heads, gpu)
        got = self._overhead_at.get(key)
        if got is None:
            got = self._overhead_at[key] = self._overhead_of(ctx, holds_output, heads, gpu)
        return got

    def _overhead_of(self, ctx: int, holds_output: bool, heads: int | None, gpu: int) -> int:
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
        if context:
            context += self.graphs(gpu)[2]
        shape = mem.GraphShape(
            span, holds_output=holds_output, flash_attention=self.flash_attention, heads_on_device=heads,
            ubatch=self.family.micro_batch(ubatch, span * streams), sequences=seqs, swa_cells=self._swa_cells(ctx), total_cells=span * streams,
            kv_rotated=mem.kv_rotated(self.model, rt, self.options.kv_type, self.rules))
        buf = mem.compute_buffer_bytes(self.model, rt, shape)
        if self.rig.gpus:
            context += mem.attention_pool_bytes(self.model, rt, shape, gpu_backend(self.rig.gpus[gpu].spec)) + \
                mem.rotary_cache_bytes(self.model, rt)
        if self.vision is not None and self.rig.gpus:
            buf += self.vision.extra_bytes(gpu, buf - int(rt.compute_fixed_mib * mem.MIB))
        return context + buf

    def graphs(self, gpu: int = 0) -> tuple[int, int, int]:
        """(piecewise, full, bytes): the CUDA graphs this GPU captures and what they take out of its KV pool
        (advisor/engine/memory.py cuda_graph_bytes; none eager, none on unified memory)."""
        if self.options.enforce_eager or not self.rig.gpus or self.rig.gpus[gpu].spec.unified_memory:
            return 0, 0, 0
        ubatch, seqs = self.batch_defaults(gpu)
        ubatch = self.options.ubatch or ubatch
        return (*mem.graph_counts(self.runtime, seqs, ubatch), mem.cuda_graph_bytes(self.runtime, seqs, ubatch))

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

    def parallel_sizes(self) -> tuple[int, int]:
        """(tensor parallel, pipeline parallel) for runtimes that cut equal stages (vLLM): as asked, else
        every GPU in one tensor-parallel group (`--split tensor`) or one stage per GPU (`--split layer`)."""
        n = max(len(self.rig.gpus), 1)
        tp, pp = self.options.tensor_parallel, self.options.pipeline_parallel
        if tp is None and pp is None and self.options.split is None and (across := across_nodes(self.scenario)):
            return across  # GPUs in several machines: as the runtime's docs advise (advisor.engine.multinode)
        if tp is None and pp is None:
            return (1, n) if self.split == "layer" else (n, 1)
        return tp or 1, pp or 1

    def _refused(self, ctx: int, why: str) -> Placement:
        return Placement("none", (), self._host(0, 0, 0), fits=False, runs=False, gpu_layers=0, problem=why)

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
