"""The engine's answer: one frozen `Report` per (model, rig, options), rendered by `advisor.report`."""

from __future__ import annotations


from advisor.record import Record, record
from advisor.engine.launch import Launch
from advisor.catalog.types import GpuSpec, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine.options import Options
from advisor.engine.placement import Placement
from advisor.engine.placement.records import DeviceUse, fit_margin_bytes, plain_fit, tight_device
from advisor.engine.rig import Rig
from advisor.engine.vision import VisionUse

SCHEMA_VERSION = 1


@record
class Finding(Record):
    """One rule's verdict, in words."""

    code: str
    """Stable rule code, e.g. `FIT001`."""
    severity: str
    """`info`, `warning` or `error`."""
    message: str


@record
class ErrorBand(Record):
    """How far off estimates of this kind of answer were on public measurements held out of the fit.

    Percentiles of |predicted / measured - 1| over public rows predicted without their source
    (rules/speed_bands.toml, written by bench/accuracy.py): the rows of the answer's own kind where
    there are `min_rows` of them, else of its backend family, else all rows (`decode_pool` and
    `prefill_pool` say which); None only where no pool has rows."""

    kind: str
    """Runtime x hardware x placement, e.g. `llama.cpp, NVIDIA, layer split`."""
    decode_rows: int
    prefill_rows: int
    min_rows: int
    decode_p50_pct: float | None = None
    decode_p90_pct: float | None = None
    prefill_p50_pct: float | None = None
    prefill_p90_pct: float | None = None
    decode_pool: str = ""
    """The rows the decode band comes from: the kind itself, `<family> backend family`, or `all rows`."""
    prefill_pool: str = ""
    """The same for the prefill band."""

    @property
    def text(self) -> str:
        def part(name: str, n: int, p50: float | None, p90: float | None, pool: str) -> str:
            if p50 is None or p90 is None:
                return f"{name} not measured (no public rows)"
            where = "of this kind" if pool == self.kind else f"pooled from {pool}, fewer than {self.min_rows} of this kind"
            return f"{name} within {p50:g}% half the time, {p90:g}% nine times in ten ({n} rows {where})"
        return (f"error on public measurements ({self.kind}), each predicted without its source in the fit: "
                f"{part('decode', self.decode_rows, self.decode_p50_pct, self.decode_p90_pct, self.decode_pool)}; "
                f"{part('prefill', self.prefill_rows, self.prefill_p50_pct, self.prefill_p90_pct, self.prefill_pool)}")


@record
class Speed(Record):
    decode_tokens_per_s: float | None
    """Single-stream decode at short context (llama-bench tg)."""
    prefill_tokens_per_s: float | None
    """Prompt processing of `prompt_tokens` (llama-bench pp)."""
    decode_at_ctx_tokens_per_s: float | None
    """Single-stream decode with the KV cache filled to the chosen context."""
    aggregate_decode_tokens_per_s: float | None
    """All streams together at `concurrency`."""
    per_stream_decode_tokens_per_s: float | None
    """Each stream at `concurrency`."""
    basis: str
    """How the numbers were made, in one sentence."""
    error_band: ErrorBand
    """How far off estimates of this kind were on held-out public measurements."""


@record
class Interconnect(Record):
    nvlink: str
    """`not_applicable`, `not_needed`, `helps` or `needed`."""
    link_time_share: float
    """Fraction of each step spent waiting on GPU-to-GPU links."""
    nvlink_speedup: float
    """Estimated speedup of the same workload with NVLink (>= 1.0)."""
    summary: str
    """Why, with the numbers."""
    details: tuple[tuple[str, str], ...] = ()
    """Arithmetic lines (label, value) behind the verdict."""


@record
class SplitChoice(Record):
    """One multi-GPU split of the same answer, for the split choice (llama.cpp: -sm layer vs -sm tensor)."""

    split: str
    """`layer`, `tensor` or `row` (the `--split` value)."""
    runs: bool
    fits: bool
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    link_time_share: float
    """Fraction of the decode step (or of the prefill, where the verdict is about prefill) on the GPU links."""
    nvlink_speedup: float
    """The same split with NVLink (>= 1.0)."""
    problem: str = ""
    """Why it does not run or fit."""


@record
class Training(Record):
    """Memory and step time for a training workload."""

    workload: str
    strategy: str
    per_gpu_bytes: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    fits: bool
    step_compute_s: float | None
    step_comm_s: float | None
    tokens_per_s: float | None
    basis: str
    capacity_bytes: int = 0
    """Usable memory of the smallest GPU."""
    trainable_params: int = 0
    sharding: str = ""
    """`single`, `ddp`, `zero1`, `zero2` or `zero3` (FSDP)."""
    assumptions: tuple[tuple[str, str], ...] = ()
    """(what, value and the option that sets it): sequence length, micro-batch, checkpointing, optimizer..."""
    note: str = ""
    """What would make it fit when only system RAM is short (FSDP CPU offload)."""


@record
class PoolDevice(Record):
    """One GPU's share of the KV pool."""

    device: str
    pool_bytes: int
    """Memory left for KV pages on this GPU after weights, activations and CUDA graphs."""
    pool_tokens: int
    """Tokens of context its pages hold (its layers' and heads' share of each token)."""


@record
class Remedy(Record):
    """A change that would make a paged runtime start, with what it buys."""

    option: str
    """The runtime's own option, as typed (`--kv-cache-dtype fp8`)."""
    max_context_tokens: int
    """The longest context that then starts."""
    kv_cache_tokens: int
    """The pool it leaves, in tokens, at the asked context (0 when the asked context still does not start)."""
    starts: bool
    """The asked context starts with it."""


@record
class Serving(Record):
    """The paged KV pool and what it holds."""

    kv_cache_tokens: int
    """Tokens the pool holds (vLLM's "GPU KV cache size")."""
    kv_cache_bytes: int
    """The pool over all GPUs, bytes."""
    request_tokens: int
    """Tokens one request may reach (`--max-model-len` / `--ctx`)."""
    request_length_tokens: int = 0
    """Tokens one request holds at its end: prompt + `--output-tokens` (the context when no output is given)."""
    output_tokens: int = 0
    """Tokens each request generates (`--output-tokens`, else the rest of the context)."""
    max_concurrency: float
    """Requests of `request_tokens` the pool holds at once (vLLM's "Maximum concurrency")."""
    requested: int
    """Requests asked for at once (`--concurrency`)."""
    running: int
    """Of those, how many decode together (the pool, and `max_num_seqs`, permitting)."""
    queued: int
    """How many wait for a running request to finish."""
    max_num_seqs: int
    """The runtime's cap on requests per step."""
    memory_fraction: float
    """The fraction of each GPU reserved (gpu_memory_utilization / mem_fraction_static)."""
    devices: tuple[PoolDevice, ...]
    ttft_s: float | None = None
    """Time to first token of one `--prompt-tokens` prompt on an idle server."""
    ttft_all_s: float | None = None
    """Time to first token of the last of `running` prompts that arrive together (prefill is compute-bound,
    so their prefills take turns)."""
    ttft_p50_s: float | None = None
    """Median time to first token of `requested` clients each sending a new request when its last one ends
    (`vllm bench serve --max-concurrency`): prefill chunks riding in decode steps, plus the wait for a slot."""
    output_tokens_per_s: float | None = None
    """What those clients receive per second (`vllm bench serve`'s "Output token throughput")."""
    aggregate_decode_tokens_per_s: float | None = None
    """All running requests together, each half-way through its output."""
    per_stream_decode_tokens_per_s: float | None = None
    """Each running request."""
    remedies: tuple[Remedy, ...] = ()
    """When it does not start, or starts with less spare than starts vary by: what would make it start."""
    spare_bytes: int = 0
    """Pool left over one request of `request_tokens` on the tightest GPU (negative: it does not start)."""
    basis: str = ""

    @property
    def starts(self) -> bool:
        return self.max_concurrency >= 1.0

    def marginal(self, spread_bytes: int) -> bool:
        """It starts, with less spare than the run-to-run spread of the runtime's non-KV memory."""
        return self.starts and self.spare_bytes < spread_bytes


@record
class WhatIf(Record):
    """The same answer with another KV cache type, computed by the engine with the answer's own weights (a
    model file's real bytes): what findings FIT001 and KV001 offer."""

    kv_type: str
    max_context_tokens: int | None = None
    """The largest context fully on the GPUs with it (None: not asked: the answer does not fit)."""
    fits: bool | None = None
    """It fits fully at the asked context (None: not asked: the answer fits already)."""


@record
class Report(Record):
    model: ModelSpec
    quant: QuantSpec
    quant_chosen: bool
    """The quant was chosen by the advisor (not given with --quant)."""
    runtime: RuntimeSpec
    split: str
    context_tokens: int
    options: Options
    rig: Rig
    placement: Placement
    kv_cache_bytes: int
    max_context_tokens: int
    """The largest context that fits fully on the GPUs (or that runs: `max_context_limit`)."""
    speed: Speed
    interconnect: Interconnect
    findings: tuple[Finding, ...]
    training: Training | None = None
    model_source: str = "catalog"
    """Where the architecture and weights came from: `catalog`, or a file/store and its path."""
    choices: tuple = ()
    """The trade-off table (advisor.engine.choice.Choice rows): each viable quantization x KV cache type."""
    choice_why: str = ""
    """Why the quantization and KV cache type were picked."""
    policy: object = None
    """What the automatic choice aimed for (advisor.engine.choice.Policy): targets and the quality floor."""
    launch: Launch | None = None
    """The command that realises this answer (rules/launch.toml), when the runtime has a launcher."""
    serving: Serving | None = None
    """Paged-KV runtimes (vLLM, SGLang): the KV pool and how many requests run at once."""
    split_choices: tuple[SplitChoice, ...] = ()
    """The same answer under the runtime's other multi-GPU splits (llama.cpp -sm layer / -sm tensor), where
    it has a tensor split of its own to compare."""
    refusal: str = ""
    """Why the runtime cannot run this model on these GPUs at all (compatibility rules), or empty."""
    vision: VisionUse | None = None
    """The vision tower this answer loads (llama.cpp's --mmproj, vLLM's encoder), and what it costs."""
    max_context_limit: str = "fits"
    """What `max_context_tokens` measures: `fits` (fully on the GPUs) or `runs` (no GPU, or a placement the
    command line fixed: the largest context that still runs so)."""
    what_if: WhatIf | None = None
    """The answer with a q8_0 KV cache where an f16 one leaves context on the table or does not fit."""

    @property
    def fits(self) -> bool:
        """The answer to what was asked: the inference placement fits, or the training workload fits."""
        return self.training.fits if self.training is not None else self.placement.fits

    @property
    def runs(self) -> bool:
        """Inference runs at all (possibly offloaded); for training, `fits` is the answer."""
        return self.placement.runs

    @property
    def fit_margin_bytes(self) -> int:
        """What the runtime keeps free on each GPU when it fits a model itself (RuntimeSpec.fit_margin_mib)."""
        return fit_margin_bytes(self.runtime)

    @property
    def tight_device(self) -> DeviceUse | None:
        """The GPU with the least memory left, where an inference answer that fits leaves it less free than the
        runtime's fit margin; None when it is not tight (or the runtime declares no margin)."""
        return None if self.training is not None else tight_device(self.placement, self.fit_margin_bytes)

    @property
    def tight(self) -> bool:
        """It fits, but with less free than the runtime's fit margin on some GPU: not a plain "fits"."""
        return self.tight_device is not None

    @property
    def gpus(self) -> tuple[GpuSpec, ...]:
        return tuple(g.spec for g in self.rig.gpus)
