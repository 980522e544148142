"""The numeric options, declared once: their flags, bounds, defaults, help, the `--cmd` settings that carry them
and the runtime option a runtime must have to take them.

The argparse groups (advisor/cli.py), the engine's validation (`check_options`), the `--cmd` reader
(advisor/engine/launch.py options_from_command) and the MCP/app front ends read their bounds here, so a bound is
written once: `--ctx` was 100,000,000 in the parser, 16M in the engine and again in the `--cmd` reader;
`--concurrency` 65,536 and 4,096. Pure data and one bounded check; importing it costs nothing.
"""

from __future__ import annotations

from advisor.engine.options import DEFAULT_CTX, DEFAULT_PROMPT_TOKENS
from advisor.errors import AdvisorError
from advisor.record import Record, record

MAX_TOKENS = 16 * 1024 * 1024
"""The longest context or prompt any option takes: 16M tokens (no published model reaches it)."""
MAX_REQUESTS = 4096
"""The most sequences, requests or GPUs an option counts."""


@record
class OptionDef(Record):
    """One numeric option."""

    dest: str
    """Its field of advisor.engine.options.Options (and argparse's dest)."""
    flags: tuple[str, ...]
    """Its spellings on the command line, the advisor's first, then the runtimes' own (vLLM, SGLang)."""
    kind: str
    """`int` (a whole number; `8k` allowed) or `float`."""
    lo: float
    hi: float
    help: str
    group: str
    """Which argparse group it is in: `model`, `training`, `serving`."""
    default: float | None = None
    """Its default (None: the runtime's, or none)."""
    lo_open: bool = False
    """`lo` itself is refused (a fraction or size above 0)."""
    metavar: str = "N"
    cmd: tuple[str, ...] = ()
    """The `--cmd` settings (rules/launch.toml names) that set it, in order of precedence."""
    runtime_option: str = ""
    """The rules/runtimes.toml `option_names` key a runtime must have to take it (empty: every runtime)."""


OPTIONS: tuple[OptionDef, ...] = (
    OptionDef("ctx", ("--ctx", "--max-model-len", "--context-length"), "int", 1, MAX_TOKENS,
              f"context tokens to allocate KV cache for (default {DEFAULT_CTX:,}, capped at the model's max)", "model",
              cmd=("ctx_per_seq", "max_model_len")),
    OptionDef("prompt_tokens", ("--prompt-tokens",), "int", 1, MAX_TOKENS,
              f"prompt length for the prefill estimate (default {DEFAULT_PROMPT_TOKENS})", "model",
              default=DEFAULT_PROMPT_TOKENS, cmd=("n_prompt",)),
    OptionDef("output_tokens", ("--output-tokens",), "int", 1, MAX_TOKENS,
              "tokens each request generates: with the prompt, a request's real length, what it holds of a paged "
              "KV pool (default: every request may reach the whole context)", "model"),
    OptionDef("concurrency", ("--concurrency",), "int", 1, MAX_REQUESTS,
              "sequences decoded at once (default 1)", "model", default=1, cmd=("parallel",)),
    OptionDef("ubatch", ("--ubatch",), "int", 1, MAX_TOKENS,
              "micro-batch tokens (llama.cpp -ub, default 512): it sizes the compute buffers", "model",
              cmd=("ubatch",)),
    OptionDef("batch_size", ("--batch-size",), "int", 1, 1_000_000, "training: sequences per GPU per step",
              "training", default=1),
    OptionDef("seq_len", ("--seq-len",), "int", 1, MAX_TOKENS, "training: tokens per sequence", "training",
              default=2048),
    OptionDef("lora_rank", ("--lora-rank",), "int", 1, 65_536,
              "training: LoRA rank on every linear layer (default 16)", "training", metavar="R"),
    OptionDef("memory_fraction", ("--gpu-memory-utilization", "--mem-fraction-static"), "float", 0.05, 1.0,
              "fraction of each GPU the runtime reserves (vLLM default 0.9)", "serving", metavar="F",
              cmd=("memory_fraction",), runtime_option="memory_fraction"),
    OptionDef("max_num_seqs", ("--max-num-seqs", "--max-running-requests"), "int", 1, 65_536,
              "most requests decoded at once", "serving", cmd=("max_num_seqs",), runtime_option="max_num_seqs"),
    OptionDef("cpu_offload_gb", ("--cpu-offload-gb",), "float", 0, 100_000,
              "GiB of weights per GPU kept in system RAM (default 0)", "serving", default=0.0, metavar="GB",
              cmd=("cpu_offload_gb",), runtime_option="cpu_offload_gb"),
    OptionDef("max_num_batched_tokens", ("--max-num-batched-tokens", "--chunked-prefill-size"), "int", 1,
              MAX_TOKENS, "tokens per prefill step (vLLM's profile batch; SGLang's chunk, which also sets its default "
              "memory fraction)", "serving", cmd=("max_num_batched_tokens",),
              runtime_option="max_num_batched_tokens"),
    OptionDef("tensor_parallel", ("--tensor-parallel-size", "--tp-size", "--tp"), "int", 1, MAX_REQUESTS,
              "GPUs per layer", "serving", cmd=("tensor_parallel",), runtime_option="tensor_parallel"),
    OptionDef("pipeline_parallel", ("--pipeline-parallel-size", "--pp-size"), "int", 1, MAX_REQUESTS,
              "pipeline stages", "serving", cmd=("pipeline_parallel",), runtime_option="pipeline_parallel"),
)

BY_DEST = {d.dest: d for d in OPTIONS}


def option(dest: str) -> OptionDef:
    return BY_DEST[dest]


def in_bounds(d: OptionDef, value: float) -> bool:
    return (d.lo < value if d.lo_open else d.lo <= value) and value <= d.hi


def bounds_text(d: OptionDef) -> str:
    lo = f"{d.lo:,g}" if d.kind == "float" else f"{int(d.lo):,}"
    hi = f"{d.hi:,g}" if d.kind == "float" else f"{int(d.hi):,}"
    return f"use {'more than ' + lo + ' and at most' if d.lo_open else lo + ' to'} {hi}"


def check_value(d: OptionDef, value: float, flag: str | None = None) -> None:
    """One line and exit 2 (AdvisorError) for a value outside the option's bounds, naming the flag as given."""
    if not in_bounds(d, value):
        raise AdvisorError(f"{flag or d.flags[0]} {value:g} is out of range", bounds_text(d))


def parse(d: OptionDef, text: str, flag: str | None = None) -> float:
    """`text` as the option's value through the one bounded number parser (advisor.numbers)."""
    from advisor.numbers import parse_float, parse_int

    what = flag or d.flags[0]
    if d.kind == "int":
        return parse_int(text, what, int(d.lo), int(d.hi), suffixes=True)
    return parse_float(text, what, d.lo, d.hi, lo_open=d.lo_open)


def given(d: OptionDef, value) -> bool:
    """Whether the user set the option (a value other than its default)."""
    return value is not None and value != d.default


def for_group(group: str) -> tuple[OptionDef, ...]:
    return tuple(d for d in OPTIONS if d.group == group)
