"""The engine's answer: one frozen `Report` per (model, rig, options), rendered by `advisor.report`."""

from __future__ import annotations


from advisor.record import Record, record
from advisor.catalog.types import GpuSpec, ModelSpec, QuantSpec, RuntimeSpec
from advisor.engine.options import Options
from advisor.engine.placement import Placement
from advisor.engine.rig import Rig

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

    Percentiles of |predicted / measured - 1| over the rows of the same kind, each predicted by a fit
    that did not see that row's source (rules/speed_bands.toml, written by bench/accuracy.py); None
    where fewer than `min_rows` rows of the kind were measured."""

    kind: str
    """Runtime x hardware x placement, e.g. `llama.cpp, NVIDIA, layer split`."""
    decode_rows: int
    prefill_rows: int
    min_rows: int
    decode_p50_pct: float | None = None
    decode_p90_pct: float | None = None
    prefill_p50_pct: float | None = None
    prefill_p90_pct: float | None = None

    @property
    def text(self) -> str:
        def part(name: str, n: int, p50: float | None, p90: float | None) -> str:
            if p50 is None or p90 is None:
                return f"{name} not measured ({n} held-out rows of this kind, fewer than {self.min_rows})"
            return f"{name} within {p50:g}% half the time, {p90:g}% nine times in ten ({n} rows)"
        return (f"error on public measurements of this kind ({self.kind}), each predicted with its source "
                f"held out of the fit: {part('decode', self.decode_rows, self.decode_p50_pct, self.decode_p90_pct)}; "
                f"{part('prefill', self.prefill_rows, self.prefill_p50_pct, self.prefill_p90_pct)}")


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

    @property
    def fits(self) -> bool:
        """The answer to what was asked: the inference placement fits, or the training workload fits."""
        return self.training.fits if self.training is not None else self.placement.fits

    @property
    def runs(self) -> bool:
        """Inference runs at all (possibly offloaded); for training, `fits` is the answer."""
        return self.placement.runs

    @property
    def gpus(self) -> tuple[GpuSpec, ...]:
        return tuple(g.spec for g in self.rig.gpus)
