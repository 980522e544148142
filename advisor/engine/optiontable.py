"""Every option of `advisor check`, `fit` and `plan` (and the app's rig flags), declared once: its flags (the
advisor's, then the runtimes' own spellings), what it holds, its bounds, default, help, the commands that take it,
the Options field it sets, the `--cmd` settings that carry it, the rules/runtimes.toml `option_names` key a runtime
must have to take it, and the control the app shows for it.

Read by the argparse tree (advisor/cli.py), `options_from` (advisor/commands/args.py), the engine's validation
(advisor/engine/validate.py), the `--cmd` reader (advisor/engine/launch.py), the app's controls
(advisor/tui/widgets/controls.py) and any other front end (`for_command`): an option's bounds are written once
(`--ctx` was 100,000,000 in the parser, 16M in the engine and again in the `--cmd` reader; `--concurrency` 65,536
and 4,096). Like llama.cpp's common/arg.cpp, one record per option; unlike it, no parsing code in the records.
Pure data and small checks; importing it costs well under a millisecond and pulls in nothing but Options.
"""

from __future__ import annotations

from advisor.engine.options import (DEFAULT_CTX, DEFAULT_PROMPT_TOKENS, FLASH_ATTN, KV_TYPES, SHARDINGS, SPLITS,
                                    WORKLOADS, Options)
from advisor.errors import AdvisorError
from advisor.record import Record, record

MAX_TOKENS = 16 * 1024 * 1024
"""The longest context or prompt any option takes: 16M tokens (no published model reaches it)."""
MAX_REQUESTS = 4096
"""The most sequences, requests, images or GPUs an option counts."""
MAX_TPS = 1e7
"""The fastest decode a target may ask for, tokens/s (far above any rig's)."""

COMMANDS = ("check", "fit", "plan")
"""The commands whose options the table declares (`app`: the terminal app's launcher takes the rig flags)."""
TAKES_ALSO = {"verify": "check"}
"""A command that takes another's options before its own: `verify` measures what `check` answers."""
GROUP_TITLES = {
    "model": "model options", "training": "model options", "serving": "serving options (vLLM / SGLang)",
    "images": "images (vision towers)", "rig": "rig (default: the detected local GPUs; CPU-only when none)",
    "filters": "filters", "target": "target and budget", "measuring": "measuring", "command": None,
}
"""Each `group`'s argparse group title, in the order they are shown (None: the command's own options)."""
KINDS = ("int", "float", "choice", "text", "path", "flag", "off", "list")
"""What an option holds: a whole number (`8k` allowed), a number, one of `choices`, free text, a file, a switch
(`flag` sets True, `off` sets False), a repeatable value (a list)."""


@record
class Widget(Record):
    """How the app shows an option: a Select, under `label`, with `id`."""

    id: str
    label: str
    presets: tuple = ()
    """The values offered (empty: the option's `choices`, or the catalog's `from_catalog`)."""
    from_catalog: str = ""
    """`quants` or `runtimes`: the values offered are the catalog's ids of that kind."""
    auto: bool = False
    """An `auto` entry comes first: the option not given (the advisor's choice, the runtime's default)."""
    initial: object = None
    """The value shown first when the option's default is None."""


@record
class OptionDef(Record):
    """One option."""

    dest: str
    """argparse's dest (the parsed namespace's attribute)."""
    flags: tuple[str, ...]
    """Its spellings on the command line, the advisor's first, then the runtimes' own (vLLM, SGLang)."""
    kind: str
    """One of KINDS."""
    help: str
    group: str
    """A key of GROUP_TITLES."""
    commands: tuple[str, ...] = COMMANDS
    field: str = ""
    """The Options field it sets (empty: the command reads it itself: a filter, a target, the rig)."""
    lo: float | None = None
    hi: float | None = None
    """Its bounds (a numeric option, or the number a `text` one is read as, e.g. images per prompt)."""
    lo_open: bool = False
    """`lo` itself is refused (a fraction or size above 0)."""
    default: object = None
    """Its default; for an Options field, None means the field's own default (Options is the one place)."""
    choices: tuple[str, ...] = ()
    strict: bool = False
    """The parser refuses a value outside `choices` (else the engine does, naming the option's `noun`)."""
    noun: str = ""
    """What the engine calls it in `unknown NOUN 'x'`."""
    metavar: str = ""
    const: str | None = None
    """The value of the bare flag (`--flash-attn` means on)."""
    convert: str = ""
    """A key of CONVERTERS: the text made into the value as it is parsed."""
    lower: bool = False
    """The value is lowercased into Options (`--runtime vLLM`)."""
    sets: object = None
    """A `flag`'s value in its Options field (None: True)."""
    marks: str = ""
    """An Options field set True when the option is given (`--kv-cache` fixes the KV type)."""
    cmd: tuple[str, ...] = ()
    """The `--cmd` settings (rules/launch.toml names) that set it, in order of precedence."""
    runtime_option: str = ""
    """The rules/runtimes.toml `option_names` key a runtime must have to take it (empty: every runtime)."""
    widget: Widget | None = None
    """The app's control for it (None: the app has none)."""


def _int(dest: str, flags: tuple[str, ...], hi: int, help: str, group: str = "model", **kw) -> OptionDef:
    return OptionDef(dest, flags, "int", help, group, field=kw.pop("field", dest), lo=kw.pop("lo", 1), hi=hi,
                     metavar=kw.pop("metavar", "N"), **kw)


def _choice(dest: str, flags: tuple[str, ...], choices: tuple[str, ...], help: str, **kw) -> OptionDef:
    return OptionDef(dest, flags, "choice", help, kw.pop("group", "model"), field=kw.pop("field", dest),
                     choices=choices, noun=kw.pop("noun", dest), **kw)


def _switch(dest: str, flags: tuple[str, ...], help: str, group: str, **kw) -> OptionDef:
    """A `flag` (off unless given) or an `off` switch (on unless given); `default=None`: unset unless given."""
    kind = kw.pop("kind", "flag")
    kw.setdefault("default", kind == "off")
    return OptionDef(dest, flags, kind, help, group, **kw)


_MIN_TPS = dict(lo=0.0, hi=MAX_TPS, lo_open=True, metavar="N")

OPTIONS: tuple[OptionDef, ...] = (
    # -- model options: the app's controls first, in the order it shows them
    OptionDef("quant", ("--quant",), "text", "quantization id, e.g. Q4_K_M, Q8_0, F16, fp8, awq, exl2-4.65 (default: "
              "the best quality that fits, said so)", "model", field="quant", metavar="Q",
              widget=Widget("quant", "quant", from_catalog="quants", auto=True)),
    _int("ctx", ("--ctx", "--max-model-len", "--context-length"), MAX_TOKENS,
         f"context tokens to allocate KV cache for (default {DEFAULT_CTX:,}, capped at the model's max)",
         cmd=("ctx_per_seq", "max_model_len"),
         widget=Widget("ctx", "context", presets=(2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144),
                       initial=DEFAULT_CTX)),
    _choice("kv_cache", ("--kv-cache", "--kv-cache-dtype"), KV_TYPES,
            "KV cache type: f16, q8_0, q4_0; fp8 for vLLM (default: f16, or q8_0 where that fits a better "
            "quantization)", field="kv_type", noun="KV cache type", metavar="TYPE", convert="kv_type", marks="kv_fixed",
            widget=Widget("kv", "KV cache", auto=True)),
    OptionDef("runtime", ("--runtime",), "text", "runtime id (default llama.cpp; `advisor runtimes` lists them and "
              "what each does)", "model", field="runtime", metavar="R", lower=True,
              widget=Widget("runtime", "runtime", from_catalog="runtimes")),
    OptionDef("runtime_version", ("--runtime-version",), "text", "the runtime's release, e.g. 0.8.1: its start-up "
              "defaults where they differ from today's (rules/runtimes.toml [[runtime.releases]]; default: today's)",
              "model", field="runtime_version", metavar="X.Y.Z"),
    _choice("split", ("--split",), SPLITS, "multi-GPU split (default: the runtime's: layer for llama.cpp/ollama/"
            "exllamav2, tensor for vllm); row: llama.cpp's older -sm row (gone from CUDA/ROCm builds since July 2026)",
            strict=True, widget=Widget("split", "split", presets=("layer", "tensor"), auto=True)),
    _int("concurrency", ("--concurrency",), MAX_REQUESTS, "sequences decoded at once (default 1)", cmd=("parallel",),
         widget=Widget("streams", "streams", presets=(1, 2, 4, 8, 16, 32, 64))),
    _choice("workload", ("--workload",), WORKLOADS, f"one of {', '.join(WORKLOADS)} (default inference)",
            metavar="W", lower=True, widget=Widget("workload", "workload")),
    # -- model options without a control in the app
    _int("prompt_tokens", ("--prompt-tokens",), MAX_TOKENS,
         f"prompt length for the prefill estimate (default {DEFAULT_PROMPT_TOKENS})", cmd=("n_prompt",)),
    _int("output_tokens", ("--output-tokens",), MAX_TOKENS,
         "tokens each request generates: with the prompt, a request's real length, what it holds of a paged KV pool "
         "(default: every request may reach the whole context)"),
    _int("ubatch", ("--ubatch",), MAX_TOKENS, "micro-batch tokens (llama.cpp -ub, default 512): it sizes the compute "
         "buffers", cmd=("ubatch",)),
    OptionDef("min_quality", ("--min-quality",), "text", "lowest quantization the automatic choice may pick (lowers "
              "the default quality floor, rules/quality.toml)", "model", field="min_quality", metavar="Q"),
    _switch("allow_low_bit", ("--allow-low-bit",), "no quality floor: 2-bit and 1-bit quantizations may be chosen",
            "model", field="allow_low_bit"),
    _choice("flash_attn", ("--flash-attn",), FLASH_ATTN, "flash attention as llama.cpp's -fa (default auto: on where "
            "the GPU's backend runs it, as llama.cpp does since 2025); a bare --flash-attn means on. A quantized V "
            "cache needs it", noun="flash attention setting", strict=True, const="on", metavar="auto|on|off"),
    # -- training
    _int("batch_size", ("--batch-size",), 1_000_000, "training: sequences per GPU per step", "training"),
    _int("seq_len", ("--seq-len",), MAX_TOKENS, "training: tokens per sequence", "training"),
    _int("lora_rank", ("--lora-rank",), 65_536, "training: LoRA rank on every linear layer (default 16)", "training",
         metavar="R"),
    _switch("gradient_checkpointing", ("--no-gradient-checkpointing",), "training: store every layer's activations "
            "(checkpointing is on by default, as in every trainer)", "training", kind="off",
            field="gradient_checkpointing"),
    OptionDef("optimizer", ("--optimizer",), "text", "training: adamw (default, fp32 state), adamw-8bit, adamw-bf16, "
              "sgd", "training", field="optimizer", metavar="OPT"),
    _choice("sharding", ("--sharding",), SHARDINGS, "training on several GPUs: auto (default: the least that fits), "
            "ddp, zero1, zero2, zero3 or fsdp (FSDP+QLoRA for qlora)", group="training", metavar="S", lower=True),
    # -- check's own
    OptionDef("cmd", ("--cmd",), "text", "answer for exactly this command line: llama-server, llama-cli, llama-bench "
              "(and ik_llama.cpp's flags), vllm serve MODEL; MODEL may then be left out when -m names a file or a "
              "catalog model with its quant (qwen3-32b-Q4_K_M.gguf). Unknown flags are named in the answer",
              "command", commands=("check",), metavar="COMMAND"),
    OptionDef("min_tps", ("--min-tps",), "float", "decode speed the automatic choice reaches first (default: reading "
              "speed, 5 tok/s)", "command", commands=("check",), field="min_tps", **_MIN_TPS),
    # -- serving (paged-KV runtimes: vLLM's names, then SGLang's)
    OptionDef("memory_fraction", ("--gpu-memory-utilization", "--mem-fraction-static"), "float",
              "fraction of each GPU the runtime reserves (vLLM default 0.92)", "serving", commands=("check",),
              field="memory_fraction", lo=0.05, hi=1.0, metavar="F", cmd=("memory_fraction",),
              runtime_option="memory_fraction"),
    OptionDef("request_mix", ("--request-mix",), "text", "traffic as a published trace's mix of request lengths "
              "instead of --prompt-tokens/--output-tokens: azure-conv or azure-code (the Azure LLM inference traces of "
              "2023, rules/traffic.toml); running, queued and time to first token follow its spread", "serving",
              commands=("check",), field="request_mix", metavar="MIX",
              runtime_option="max_num_seqs"),  # a runtime that batches requests (vLLM, SGLang) serves a mix
    _int("max_num_seqs", ("--max-num-seqs", "--max-running-requests"), 65_536, "most requests decoded at once",
         "serving", commands=("check",), cmd=("max_num_seqs",), runtime_option="max_num_seqs"),
    OptionDef("cpu_offload_gb", ("--cpu-offload-gb",), "float", "GiB of weights per GPU kept in system RAM (default 0)",
              "serving", commands=("check",), field="cpu_offload_gb", lo=0, hi=100_000, metavar="GB",
              cmd=("cpu_offload_gb",), runtime_option="cpu_offload_gb"),
    _int("max_num_batched_tokens", ("--max-num-batched-tokens", "--chunked-prefill-size"), MAX_TOKENS,
         "tokens per prefill step (vLLM's profile batch; SGLang's chunk, which also sets its default memory fraction)",
         "serving", commands=("check",), cmd=("max_num_batched_tokens",), runtime_option="max_num_batched_tokens"),
    _int("tensor_parallel", ("--tensor-parallel-size", "--tp-size", "--tp"), MAX_REQUESTS, "GPUs per layer", "serving",
         commands=("check",), cmd=("tensor_parallel",), runtime_option="tensor_parallel"),
    _int("pipeline_parallel", ("--pipeline-parallel-size", "--pp-size"), MAX_REQUESTS, "pipeline stages", "serving",
         commands=("check",), cmd=("pipeline_parallel",), runtime_option="pipeline_parallel"),
    _switch("enforce_eager", ("--enforce-eager", "--disable-cuda-graph"), "no CUDA graphs: their memory goes to the "
            "KV pool", "serving", commands=("check",), field="enforce_eager", runtime_option="eager"),
    _switch("no_async_scheduling", ("--no-async-scheduling",), "vLLM: one scheduler step in flight, not two: a "
            "sliding-window model's requests each hold one step's tokens fewer of the pool", "serving",
            commands=("check",), field="no_async_scheduling", runtime_option="no_async_scheduling"),
    # -- images (vision towers)
    OptionDef("mmproj", ("--mmproj",), "text", "llama.cpp: the mmproj GGUF (vision tower) the server loads beside the "
              "model (-mm): its weights and compute buffer on the first GPU", "images", commands=("check",),
              field="mmproj", metavar="FILE"),
    _switch("mmproj_offload", ("--no-mmproj-offload",), "llama.cpp: keep the mmproj on the CPU (its memory comes out "
            "of system RAM)", "images", kind="off", commands=("check",), field="mmproj_offload"),
    OptionDef("limit_mm_per_prompt", ("--limit-mm-per-prompt",), "text", "vLLM: images per prompt, e.g. "
              "'{\"image\":2}' (its encoder is profiled on that many); '{\"image\":0}' is text only", "images",
              commands=("check",), field="mm_limit", lo=0, hi=MAX_REQUESTS, metavar="JSON", convert="mm_limit"),
    _switch("no_mmproj", ("--no-mmproj", "--language-model-only"), "text only: no vision tower loaded (vLLM's "
            "--limit-mm-per-prompt '{\"image\":0}')", "images", commands=("check",), field="mm_limit", sets=0),
    # -- the rig (check, fit and the app; plan has its own --rig and --ram below)
    OptionDef("gpu", ("--gpu",), "list", "[Nx]GPU_ID, repeatable for a mixed rig: rtx-4090, 2xrtx-3090, "
              "'4x A100 SXM4 80GB'", "rig", commands=("check", "fit", "app"), metavar="SPEC"),
    _switch("nvlink", ("--nvlink",), "the GPUs are NVLink-joined as their hardware allows (bridge pairs; implicit "
            "for SXM)", "rig", commands=("check", "fit", "app")),
    OptionDef("pcie", ("--pcie",), "text", "each GPU's host link, e.g. 4x16, 4x8, 3x4, 3x1 (default: the card's own)",
              "rig", commands=("check", "fit", "app"), metavar="GxW"),
    OptionDef("ram", ("--ram",), "text", "system RAM for CPU offload (default: detected, or the rig file's)", "rig",
              commands=("check", "fit", "app"), metavar="GB"),
    OptionDef("ram_bw", ("--ram-bw",), "text", "system RAM bandwidth: GB/s, or type-speed x channels: ddr4-3200x2, "
              "ddr5-6000x2, ddr5-4800x8, ddr5-6400x12 (default: the rig file's, else dual-channel DDR4)", "rig",
              commands=("check", "fit", "app"), metavar="GBS|PRESET"),
    OptionDef("cpu", ("--cpu",), "text", "the CPU, [Nx]CPU_ID or its name: ryzen-9-7950x, 'Raspberry Pi 5', "
              "2xepyc-9175f; its cores bound CPU decode and its channels give the RAM bandwidth (default: the rig "
              "file's or the detected CPU, where the catalog has it)", "rig", commands=("check", "fit", "app"),
              metavar="NAME"),
    OptionDef("rig", ("--rig",), "path", "a rig file (TOML) as `advisor detect --save` writes it", "rig",
              commands=("check", "fit", "app"), metavar="FILE"),
    _switch("empty", ("--empty",), "with detected GPUs, plan for idle cards (total memory) instead of the memory free "
            "now", "rig", commands=("check", "fit", "app")),
    # -- fit's filters
    OptionDef("min_tps", ("--min-tps",), "float", "only models decoding at least N tokens/s", "filters",
              commands=("fit",), field="min_tps", **_MIN_TPS),
    OptionDef("family", ("--family",), "text", "only this family (llama, qwen, gemma, mistral, ...)", "filters",
              commands=("fit",), metavar="NAME"),
    _switch("moe", ("--moe",), "only mixture-of-experts models", "filters", commands=("fit",)),
    OptionDef("max_params", ("--max-params",), "float", "only models up to B billion parameters", "filters",
              commands=("fit",), lo=0.0, hi=1e5, lo_open=True, metavar="B"),
    _switch("all", ("--all",), "also list models that do not fit", "filters", commands=("fit",)),
    # -- plan's target and budget
    OptionDef("min_tps", ("--min-tps",), "float", "minimum single-stream decode tokens/s", "target",
              commands=("plan",), **_MIN_TPS),
    OptionDef("budget", ("--budget",), "float", "most you will spend", "target", commands=("plan",), lo=0.0, hi=1e12,
              lo_open=True, metavar="USD"),
    OptionDef("have", ("--have",), "list", "GPUs you own ([Nx]GPU_ID), or a platform (server, workstation): kept, cost "
              "nothing", "target",
              commands=("plan",), metavar="SPEC"),
    OptionDef("rig", ("--rig",), "path", "a rig file (advisor detect --save): its GPUs count as owned, its RAM as the "
              "rig's", "target", commands=("plan",), metavar="FILE"),
    OptionDef("ram", ("--ram",), "text", "system RAM of the rig (default 64)", "target", commands=("plan",),
              metavar="GB"),
    OptionDef("price", ("--price",), "list", "override a GPU's price", "target", commands=("plan",), metavar="ID=USD"),
    OptionDef("kwh_price", ("--kwh-price",), "float", "electricity price per kWh", "target", commands=("plan",),
              lo=0.0, hi=1e4, lo_open=True, metavar="USD"),
    OptionDef("top", ("--top",), "int", "options to show (default 5)", "target", commands=("plan",), lo=1, hi=10_000,
              default=5, metavar="N"),
    _switch("used", ("--used",), "also price GPUs at used-market prices where the catalog has them (the default with "
            "--have)", "target", commands=("plan",), default=None),
    _switch("used", ("--new",), "new/list prices only (the default without --have)", "target", kind="off",
            commands=("plan",), default=None),
    # -- check's and verify's: the calibration `advisor verify` stores
    _switch("no_calibration", ("--no-calibration",), "the plain model: ignore this rig's calibration from `advisor "
            "verify` runs", "command", commands=("check",)),
    # -- verify's own
    OptionDef("import_file", ("--import",), "path", "read results run elsewhere instead of running anything: "
              "llama-bench JSON/JSONL/CSV/markdown, a llama-server or vLLM log, `vllm bench serve` output, Ollama "
              "--verbose timings", "measuring", commands=("verify",), metavar="FILE"),
    OptionDef("export", ("--export",), "text", "write the runs as rows of the project's measurement format (tests/data/"
              "speed_measurements.csv) with the rig described; alone: every stored run", "measuring",
              commands=("verify",), const="-", metavar="FILE"),
    _switch("no_save", ("--no-save",), "compare only: do not store the runs", "measuring", commands=("verify",)),
    OptionDef("base_url", ("--base-url",), "text", "vLLM: measure the running server at URL with `vllm bench serve`",
              "measuring", commands=("verify",), metavar="URL"),
    OptionDef("served_model", ("--served-model",), "text", "vLLM / Ollama: the name the server knows the model by "
              "(default: MODEL)", "measuring", commands=("verify",), metavar="NAME"),
    OptionDef("repetitions", ("--repetitions",), "int", "repetitions of each test (llama-bench -r; requests for Ollama "
              "and vLLM; default 3)", "measuring", commands=("verify",), lo=1, hi=100, default=3, metavar="N"),
    OptionDef("timeout", ("--timeout",), "float", "stop the benchmark after S seconds (default 600)", "measuring",
              commands=("verify",), lo=0.0, hi=86400, lo_open=True, default=600, metavar="S"),
)

FIELD_DEFAULTS = {d.field: Options.__dataclass_fields__[d.field].default for d in OPTIONS if d.field}
"""Each Options field an option sets, with Options' own default (the table does not write it again)."""


def _by_field() -> dict[str, OptionDef]:
    out: dict[str, OptionDef] = {}
    for d in OPTIONS:
        if d.field and d.sets is None:
            out.setdefault(d.field, d)
    return out


BY_FIELD = _by_field()
"""The option the engine names for each Options field it checks (bounds, choices, the runtime option it needs), in
the table's order: the first that sets the field to its value (not a switch that sets a fixed one, --no-mmproj)."""
CONTROLS = tuple(d for d in OPTIONS if d.widget is not None)
"""The options the app shows a control for, in the order it shows them."""


def for_command(command: str) -> tuple[OptionDef, ...]:
    """The options `command` takes (check, fit, plan; `app`: the launcher's rig flags), in the order shown: what a
    front end (the argparse tree, an MCP tool's schema) builds its inputs from."""
    first = for_command(TAKES_ALSO[command]) if command in TAKES_ALSO else ()
    return first + tuple(d for d in OPTIONS if command in d.commands)


def option(dest: str, command: str = "check") -> OptionDef:
    """The option with this dest that `command` takes (a dest several commands spell differently: min_tps)."""
    return next(d for d in OPTIONS if d.dest == dest and command in d.commands)


def default_of(d: OptionDef):
    """The option's default: its own, or (None) its Options field's."""
    if d.default is None and d.field and d.kind not in ("flag", "off"):
        return FIELD_DEFAULTS[d.field]
    return d.default


def parser_default(d: OptionDef):
    """What the parser holds when the option is not given: its default, but None for one that marks its field as
    given (`--kv-cache` absent is the advisor's choice, not f16 asked for); a fresh list for a `list`."""
    if d.kind == "list":
        return []
    return None if d.marks else default_of(d)


def in_bounds(d: OptionDef, value: float) -> bool:
    return (d.lo < value if d.lo_open else d.lo <= value) and value <= d.hi


def bounds_text(d: OptionDef) -> str:
    """The hint for a value out of the option's bounds, worded as the number parser words it (advisor.numbers)."""
    from advisor.numbers import range_text

    return range_text(d.lo, d.hi, d.lo_open, whole=d.kind != "float")


def check_value(d: OptionDef, value: float, flag: str | None = None) -> None:
    """One line and exit 2 (AdvisorError) for a value outside the option's bounds, naming the flag as given."""
    if not in_bounds(d, value):
        raise AdvisorError(f"{flag or d.flags[0]} {value:g} is out of range", bounds_text(d))


def parse(d: OptionDef, text: str, flag: str | None = None):
    """`text` as the option's value: a number through the one bounded number parser (advisor.numbers), else
    through the option's converter, its number (images per prompt) held to its bounds."""
    what = flag or d.flags[0]
    if d.kind == "int":
        from advisor.numbers import parse_int

        return parse_int(text, what, int(d.lo), int(d.hi), suffixes=True)
    if d.kind == "float":
        from advisor.numbers import parse_float

        return parse_float(text, what, d.lo, d.hi, lo_open=d.lo_open)
    value = CONVERTERS[d.convert](text, what) if d.convert else text
    if d.hi is not None:
        check_value(d, value, what)
    return value


def given(d: OptionDef, value) -> bool:
    """Whether the user set the option (a value other than its default)."""
    return value is not None and value != default_of(d)


def options_changes(command: str, value_of) -> dict:
    """The Options fields the options `command` takes set, `value_of(d)` being each one's parsed value (None or a
    switch left off: not given). One mapping for every front end: the CLI's namespace, the app's controls."""
    changes: dict = {}
    for d in for_command(command):
        value = value_of(d)
        if not d.field or value is None or (d.kind == "flag" and not value):
            continue
        if d.kind == "flag":
            value = True if d.sets is None else d.sets
        changes[d.field] = value.lower() if d.lower and isinstance(value, str) else value
        if d.marks:
            changes[d.marks] = True
    return changes


def _kv_type(text: str, what: str = "--kv-cache") -> str:
    """--kv-cache / vLLM's --kv-cache-dtype: `auto` is the model's 16-bit type, `fp8_e4m3`/`fp8_e5m2` are fp8."""
    t = text.strip().lower()
    return "f16" if t in ("auto", "bf16", "fp16") else ("fp8" if t.startswith("fp8") else t)


def _mm_limit(text: str, what: str) -> int:
    from advisor.engine.vision import parse_mm_limit

    return parse_mm_limit(text, what)


CONVERTERS = {"kv_type": _kv_type, "mm_limit": _mm_limit}
"""How a `convert` option's text becomes its value."""
