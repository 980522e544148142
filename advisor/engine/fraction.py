"""The share of each GPU a paged runtime reserves, and its default cap on requests at once.

vLLM takes a fixed `gpu_memory_utilization` (0.92; 0.9 before 0.20) of the whole card. SGLang, when no
`--mem-fraction-static` is given, derives the fraction from the card's memory, the chunked-prefill size,
the CUDA-graph batch size and the parallel size (server_args._handle_gpu_memory_settings); the rule's
constants are data (rules/runtimes.toml `fraction_rule`, `fraction_buckets`), read here without knowing
which runtime declared them. Pure.
"""

from __future__ import annotations

from advisor.catalog.types import RuntimeSpec
from advisor.engine.options import Options

MIB = 1024**2


def _bucket(runtime: RuntimeSpec, card_mib: float) -> tuple[float, ...] | None:
    for row in runtime.fraction_buckets:
        if not row[0] or card_mib < row[0]:
            return row
    return None


def parallel_ranks(options: Options, n_gpus: int) -> tuple[int, int]:
    """(GPUs per layer, stages) as asked, else every GPU splits each layer."""
    pp = options.pipeline_parallel or 1
    tp = options.tensor_parallel or max(n_gpus // pp, 1)
    return tp, pp


def chunked_prefill(runtime: RuntimeSpec, card_mib: float, options: Options) -> int:
    """Tokens per prefill chunk: as asked, else the runtime's default for this card (0: none declared)."""
    if options.max_num_batched_tokens:
        return options.max_num_batched_tokens
    row = _bucket(runtime, card_mib)
    return int(row[1]) if row else 0


def default_fraction(runtime: RuntimeSpec, capacities: list[int], options: Options) -> float:
    """The fraction the runtime reserves when none is given, for GPUs of these capacities (bytes)."""
    rule = runtime.fraction_rule
    if not rule or not capacities:
        return runtime.gpu_memory_utilization
    card = min(capacities) / MIB  # the smallest card (SGLang reads every GPU's total and keeps the least)
    row = _bucket(runtime, card)
    if row is None or card <= 0:
        return runtime.gpu_memory_utilization
    tp, pp = parallel_ranks(options, len(capacities))
    chunk = chunked_prefill(runtime, card, options)
    graphs = 0 if options.enforce_eager else (row[2] if tp < rule.get("large_tp", 4) else row[3])
    reserved = (rule.get("base_mib", 0.0) + rule.get("prefill_token_mib", 0.0) * max(chunk, rule.get("min_prefill_tokens", 0.0))
                + rule.get("graph_batch_mib", 0.0) * graphs + rule.get("rank_mib", 0.0) * tp * pp)
    if rule.get("floor_above_mib") and card > rule["floor_above_mib"]:
        reserved = max(reserved, rule.get("floor_mib", 0.0))
    return max(round((card - reserved) / card, int(rule.get("round_digits", 3))), 0.0)


def memory_fraction(runtime: RuntimeSpec, options: Options, capacities: list[int] | None = None) -> float:
    """The fraction in force: the user's, else the runtime's default for these GPUs."""
    if options.memory_fraction:
        return options.memory_fraction
    return default_fraction(runtime, capacities or [], options)


def default_max_requests(runtime: RuntimeSpec, pool_tokens: int, context: int) -> int:
    """The runtime's own cap on requests at once for a pool of this many tokens (0: none declared)."""
    if len(runtime.requests_rule) < 3 or pool_tokens <= 0:
        return 0
    factor, least, most = runtime.requests_rule[:3]
    per_context = int(pool_tokens / max(context, 1) * factor)
    return min(pool_tokens // 2, min(max(per_context, least), most))
