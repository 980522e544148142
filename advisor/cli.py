"""The headless front end: the argument parser, one dispatch table to `advisor.commands`, and main().

stdout is data (text, markdown or JSON, written by `advisor.commands.output`); diagnostics go to
stderr. Exit codes are API: 0 yes, 1 no, 2 bad input (one line on stderr), 130 interrupted. Nothing
here imports textual: `advisor` with no command imports the app lazily.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any, Sequence

from advisor.commands.output import EXIT_INTERRUPT, EXIT_USAGE, EXIT_YES, say
from advisor.errors import AdvisorError, one_line

COMMANDS: dict[str, str] = {
    "check": "advisor.commands.check:cmd_check",
    "fit": "advisor.commands.fit:cmd_fit",
    "plan": "advisor.commands.plan:cmd_plan",
    "detect": "advisor.commands.detect:cmd_detect",
    "models": "advisor.commands.catalog:cmd_list",
    "gpus": "advisor.commands.catalog:cmd_list",
    "runtimes": "advisor.commands.catalog:cmd_list",
    "quants": "advisor.commands.catalog:cmd_list",
    "rules": "advisor.commands.catalog:cmd_rules",
    "catalog": "advisor.commands.catalog:cmd_catalog",
}
"""Each command and its handler (imported only when that command runs: a faster start)."""

EPILOG = """\
examples:
  advisor check llama-3.1-70b --gpu 2xrtx-3090              does it fit, how fast, NVLink?
  advisor check qwen3-32b --gpu rtx-4090 --ctx 32768 --kv-cache q8_0
  advisor check llama-3.1-8b --gpu rtx-3090 --json          the contract's JSON, for scripts
  advisor fit --gpu rtx-4090 --ctx 8192                     what runs on this rig, ranked
  advisor plan llama-3.1-70b --quant Q4_K_M --min-tps 10     cheapest rigs that reach the target
  advisor detect --save my-rig.toml                         capture this machine as a rig file
  advisor models llama / advisor gpus 3090                  search the catalog
  advisor runtimes / advisor rules                          runtimes and what each does; rule codes
  advisor quants                                            quantizations: bits per weight, quality, runtimes

exit codes: 0 yes (fits / found), 1 no, 2 bad input, 130 interrupted.
Rig: --gpu SPEC (repeatable, [Nx]GPU_ID), --rig FILE, or the detected local GPUs (CPU-only when none).
"""


class Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise AdvisorError(f"{self.prog}: {message}", f"see `{self.prog} --help`")


def _whole(what: str, hi: int):
    """An argparse type: a whole number from 1 to `hi` (`8192`, `8k`), through the one bounded parser."""
    from advisor.numbers import parse_int

    return lambda text: parse_int(text, what, 1, hi, suffixes=True)


def _positive(what: str, hi: float):
    """An argparse type: a finite number above 0 and at most `hi`."""
    from advisor.numbers import parse_float

    return lambda text: parse_float(text, what, 0.0, hi, lo_open=True)


class _AsTyped(argparse.Action):
    """Stores the value `check(text, flag)` returns, `flag` being the spelling the user typed: an option with
    aliases (`--gpu-memory-utilization` / `--mem-fraction-static`) names in its error the one given."""

    check = staticmethod(lambda text, flag: text)

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        setattr(namespace, self.dest, self.check(values, option_string or self.option_strings[0]))


def _as_typed(make) -> type[argparse.Action]:
    """An argparse action whose check is `make(flag)` (one of the type factories above) for the flag as typed."""
    return type("_AsTyped", (_AsTyped,), {"check": staticmethod(lambda text, flag: make(flag)(text))})


def _output_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=("text", "json", "markdown"), default=None, help="output format (default text)")
    g.add_argument("--json", action="store_true", help="same as --format json")


def _rig_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("rig (default: the detected local GPUs; CPU-only when none)")
    g.add_argument("--gpu", action="append", metavar="SPEC", default=[],
                   help="[Nx]GPU_ID, repeatable for a mixed rig: rtx-4090, 2xrtx-3090, '4x A100 SXM4 80GB'")
    g.add_argument("--nvlink", action="store_true",
                   help="the GPUs are NVLink-joined as their hardware allows (bridge pairs; implicit for SXM)")
    g.add_argument("--pcie",
                   metavar="GxW", help="each GPU's host link, e.g. 4x16, 4x8, 3x4, 3x1 (default: the card's own)")
    g.add_argument("--ram", metavar="GB", help="system RAM for CPU offload (default: detected, or the rig file's)")
    g.add_argument("--ram-bw", metavar="GBS|PRESET",
                   help="system RAM bandwidth: GB/s, or type-speed x channels: ddr4-3200x2, ddr5-6000x2, "
                        "ddr5-4800x8, ddr5-6400x12 (default: the rig file's, else dual-channel DDR4)")
    g.add_argument("--rig", metavar="FILE", type=Path, help="a rig file (TOML) as `advisor detect --save` writes it")
    g.add_argument("--empty", action="store_true",
                   help="with detected GPUs, plan for idle cards (total memory) instead of the memory free now")


def _model_args(p: argparse.ArgumentParser, model: bool = True, optional: bool = False) -> None:
    from advisor.engine.options import DEFAULT_CTX, DEFAULT_PROMPT_TOKENS, WORKLOADS

    if model:
        p.add_argument("model", metavar="MODEL", nargs="?" if optional else None,
                       help="a catalog model id or name (see `advisor models`), a .gguf file, a model folder or "
                            "config.json, ollama:NAME[:TAG] or hf:ORG/NAME (read from the local caches)")
    g = p.add_argument_group("model options")
    g.add_argument("--quant", metavar="Q", help="quantization id, e.g. Q4_K_M, Q8_0, F16, fp8, awq, exl2-4.65 "
                                                  "(default: the best quality that fits, said so)")
    g.add_argument("--ctx", "--max-model-len", "--context-length", dest="ctx",
                   action=_as_typed(lambda flag: _whole(flag, 100_000_000)), metavar="N",
                   help=f"context tokens to allocate KV cache for (default {DEFAULT_CTX}, capped at the model's max)")
    g.add_argument("--prompt-tokens", type=_whole("--prompt-tokens", 100_000_000), default=DEFAULT_PROMPT_TOKENS,
                   metavar="N",
                   help=f"prompt length for the prefill estimate (default {DEFAULT_PROMPT_TOKENS})")
    g.add_argument("--kv-cache", "--kv-cache-dtype", dest="kv_cache", type=_kv_type, default=None,
                   metavar="TYPE", help="KV cache type: f16, q8_0, q4_0; fp8 for vLLM (default: f16, or q8_0 "
                                        "where that fits a better quantization)")
    g.add_argument("--min-quality", metavar="Q",
                   help="lowest quantization the automatic choice may pick (lowers the default quality floor, "
                        "rules/quality.toml)")
    g.add_argument("--allow-low-bit", action="store_true",
                   help="no quality floor: 2-bit and 1-bit quantizations may be chosen")
    g.add_argument("--runtime", default="llama.cpp", metavar="R",
                   help="runtime id (default llama.cpp; `advisor runtimes` lists them and what each does)")
    g.add_argument("--split", choices=("layer", "tensor", "row"), default=None,
                   help="multi-GPU split (default: the runtime's: layer for llama.cpp/ollama/exllamav2, tensor for vllm); "
                        "row: llama.cpp's older -sm row (gone from CUDA/ROCm builds since July 2026)")
    g.add_argument("--concurrency", type=_whole("--concurrency", 65_536), default=1,
                   metavar="N", help="sequences decoded at once (default 1)")
    g.add_argument("--workload", default="inference",
                   metavar="W", help=f"one of {', '.join(WORKLOADS)} (default inference)")
    g.add_argument("--batch-size", type=_whole("--batch-size", 1_000_000), default=1,
                   metavar="N", help="training: sequences per GPU per step")
    g.add_argument("--seq-len", type=_whole("--seq-len", 100_000_000), default=2048,
                   metavar="N", help="training: tokens per sequence")
    g.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false",
                   help="training: store every layer's activations (checkpointing is on by default, as in every trainer)")
    g.add_argument("--optimizer", metavar="OPT",
                   help="training: adamw (default, fp32 state), adamw-8bit, adamw-bf16, sgd")
    g.add_argument("--sharding", default="auto", metavar="S",
                   help="training on several GPUs: auto (default: the least that fits), ddp, zero1, zero2, "
                        "zero3 or fsdp (FSDP+QLoRA for qlora)")
    g.add_argument("--lora-rank", type=_whole("--lora-rank", 65_536), metavar="R",
                   help="training: LoRA rank on every linear layer (default 16)")
    g.add_argument("--flash-attn", nargs="?", const="on", default="auto", choices=("auto", "on", "off"),
                   metavar="auto|on|off",
                   help="flash attention as llama.cpp's -fa (default auto: on where the GPU's backend runs it, as "
                        "llama.cpp does since 2025); a bare --flash-attn means on. A quantized V cache needs it")
    g.add_argument("--ubatch", type=_whole("--ubatch", 1_000_000), default=None, metavar="N",
                   help="micro-batch tokens (llama.cpp -ub, default 512): it sizes the compute buffers")


def _image_args(p: argparse.ArgumentParser) -> None:
    """Vision towers: llama.cpp's mmproj file and vLLM's image limit (check only)."""
    g = p.add_argument_group("images (vision towers)")
    g.add_argument("--mmproj", metavar="FILE",
                   help="llama.cpp: the mmproj GGUF (vision tower) the server loads beside the model (-mm): its "
                        "weights and compute buffer on the first GPU")
    g.add_argument("--no-mmproj-offload", action="store_true",
                   help="llama.cpp: keep the mmproj on the CPU (its memory comes out of system RAM)")
    g.add_argument("--no-mmproj", "--language-model-only", dest="no_mmproj", action="store_true",
                   help="text only: no vision tower loaded (vLLM's --limit-mm-per-prompt '{\"image\":0}')")
    g.add_argument("--limit-mm-per-prompt", metavar="JSON",
                   help="vLLM: images per prompt, e.g. '{\"image\":2}' (its encoder is profiled on that many); "
                        "'{\"image\":0}' is text only")


def _kv_type(text: str) -> str:
    """--kv-cache / vLLM's --kv-cache-dtype: `auto` is the model's 16-bit type, `fp8_e4m3`/`fp8_e5m2` are fp8."""
    t = text.strip().lower()
    return "f16" if t in ("auto", "bf16", "fp16") else ("fp8" if t.startswith("fp8") else t)


def _serving_args(p: argparse.ArgumentParser) -> None:
    """Paged-KV runtimes' own options (vLLM's names; SGLang's equivalents), for check and the app."""
    g = p.add_argument_group("serving options (vLLM / SGLang)")
    g.add_argument("--gpu-memory-utilization", "--mem-fraction-static", dest="gpu_memory_utilization",
                   action=_as_typed(lambda flag: _positive(flag, 1.0)), metavar="F",
                   help="fraction of each GPU the runtime reserves (vLLM default 0.9)")
    g.add_argument("--max-num-seqs", "--max-running-requests", dest="max_num_seqs",
                   action=_as_typed(lambda flag: _whole(flag, 65_536)), metavar="N", help="most requests decoded at once")
    g.add_argument("--enforce-eager", "--disable-cuda-graph", dest="enforce_eager", action="store_true",
                   help="no CUDA graphs: their memory goes to the KV pool")
    g.add_argument("--cpu-offload-gb", type=_positive("--cpu-offload-gb", 100_000), metavar="GB",
                   help="GiB of weights per GPU kept in system RAM")
    g.add_argument("--max-num-batched-tokens", "--chunked-prefill-size", dest="max_num_batched_tokens",
                   action=_as_typed(lambda flag: _whole(flag, 1_048_576)), metavar="N",
                   help="tokens per prefill step (vLLM's profile batch; SGLang's chunk, which also sets its default memory fraction)")
    g.add_argument("--tensor-parallel-size", "--tp-size", "--tp", dest="tensor_parallel_size",
                   action=_as_typed(lambda flag: _whole(flag, 4096)), metavar="N", help="GPUs per layer")
    g.add_argument("--pipeline-parallel-size", "--pp-size", dest="pipeline_parallel_size",
                   action=_as_typed(lambda flag: _whole(flag, 4096)), metavar="N", help="pipeline stages")


def build_parser(only: str | None = None) -> Parser:
    """The CLI's parser; `only` builds just that command's subparser (a faster start)."""
    parser = Parser(prog="advisor", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
                    description="Can my rig run this open-weights model? Fit, placement, memory, speed and "
                                "the NVLink verdict, with the arithmetic shown. With no command: the terminal app.")
    from advisor import __version__

    parser.add_argument("--version", action="version", version=f"advisor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def want(name: str) -> bool:
        return only is None or only == name

    if want("check"):
        _check_parser(sub)
    if want("fit"):
        _fit_parser(sub)
    if want("plan"):
        _plan_parser(sub)
    if want("detect"):
        _detect_parser(sub)
    for name, what in (("models", "LLMs"), ("gpus", "GPUs and unified-memory machines"),
                       ("runtimes", "inference runtimes (rules/runtimes.toml and yours)"),
                       ("quants", "quantization formats: bits per weight, quality loss, runtimes (rules/quants.toml)")):
        if want(name):
            p = sub.add_parser(name, help=f"the catalog's {what}", description=f"List or search the catalog's {what}.")
            p.add_argument("query", nargs="?", help="filter by id, name or alias (substring)")
            _output_args(p)
    if want("rules"):
        p = sub.add_parser("rules", help="the rule codes findings carry (FIT001, NVL001, ...), with what each checks",
                           description="Every rule the findings come from, in the order they are shown.")
        p.add_argument("query", nargs="?", help="only codes containing this (e.g. NVL)")
        _output_args(p)
    if want("catalog"):
        _catalog_parser(sub)
    return parser


def _check_parser(sub) -> None:
    p = sub.add_parser("check", help="one model on one rig: fit, placement, memory, speed, NVLink verdict",
                       description="One model on one rig. Exit 0 when it fits fully in GPU memory, 1 when not "
                                   "(it may still run with offload: see `runs`), 2 on bad input.")
    _model_args(p, optional=True)
    p.add_argument("--cmd", metavar="COMMAND",
                   help="answer for exactly this command line: llama-server, llama-cli, llama-bench (and "
                        "ik_llama.cpp's flags), vllm serve MODEL; MODEL may then be left out when -m names a file or a catalog "
                        "model with its quant (qwen3-32b-Q4_K_M.gguf). Unknown flags are named in the answer")
    p.add_argument("--min-tps", type=_positive("--min-tps", 1e7), metavar="N",
                   help="decode speed the automatic choice reaches first (default: reading speed, 5 tok/s)")
    _serving_args(p)
    _image_args(p)
    _rig_args(p)
    _output_args(p)


def _fit_parser(sub) -> None:
    p = sub.add_parser("fit", help="every catalog model on the rig: the best quant that fits, ranked",
                       description="Every catalog model on the rig, ranked by the quality that fits, then speed. "
                                   "Exit 0 when at least one model fits, 1 when none does.")
    _model_args(p, model=False)
    _rig_args(p)
    _output_args(p)
    g = p.add_argument_group("filters")
    g.add_argument("--min-tps", type=_positive("--min-tps", 1e7),
                   metavar="N", help="only models decoding at least N tokens/s")
    g.add_argument("--family", metavar="NAME", help="only this family (llama, qwen, gemma, mistral, ...)")
    g.add_argument("--moe", action="store_true", help="only mixture-of-experts models")
    g.add_argument("--max-params", type=_positive("--max-params", 1e5),
                   metavar="B", help="only models up to B billion parameters")
    g.add_argument("--all", action="store_true", help="also list models that do not fit")


def _plan_parser(sub) -> None:
    p = sub.add_parser("plan", help="the cheapest rigs that reach a target, NVLink or not",
                       description="Enumerate candidate rigs (1-8 of each catalog GPU, mixes with what you own, "
                                   "unified-memory machines, with and without NVLink), keep those that reach the "
                                   "target, cheapest first. Exit 0 when an option exists, 1 when none does.")
    _model_args(p)
    _output_args(p)
    g = p.add_argument_group("target and budget")
    g.add_argument("--min-tps", type=_positive("--min-tps", 1e7),
                   metavar="N", help="minimum single-stream decode tokens/s")
    g.add_argument("--budget", type=_positive("--budget", 1e12), metavar="USD", help="most you will spend")
    g.add_argument("--have", action="append", default=[],
                   metavar="SPEC", help="GPUs you own ([Nx]GPU_ID): kept, cost nothing")
    g.add_argument("--rig", metavar="FILE", type=Path,
                   help="a rig file (advisor detect --save): its GPUs count as owned, its RAM as the rig's")
    g.add_argument("--ram", metavar="GB", help="system RAM of the rig (default 64)")
    g.add_argument("--price", action="append", default=[], metavar="ID=USD", help="override a GPU's price")
    g.add_argument("--kwh-price", type=_positive("--kwh-price", 1e4), default=None,
                   metavar="USD", help="electricity price per kWh")
    g.add_argument("--top", type=_whole("--top", 10_000), default=5, metavar="N", help="options to show (default 5)")
    g.add_argument("--used", action="store_true", default=None,
                   help="also price GPUs at used-market prices where the catalog has them (the default with --have)")
    g.add_argument("--new", dest="used", action="store_false",
                   help="new/list prices only (the default without --have)")


def _detect_parser(sub) -> None:
    p = sub.add_parser("detect", help="the local hardware as the advisor sees it",
                       description="Read the GPUs through NVML (or a saved `nvidia-smi -q -x` XML / rig file with "
                                   "--from), system memory and CPU. Exit 0 whenever the machine (or file) was read, GPUs or "
                                   "not; 2 for an unreadable file.")
    p.add_argument("--from", dest="source", type=Path, metavar="FILE", help="an `nvidia-smi -q -x` XML or a rig file")
    p.add_argument("--save", type=Path, metavar="FILE", help="write what was found as a rig file (TOML)")
    p.add_argument("--force", action="store_true", help="--save over a read-only file, a symlink or a file not written by the advisor")
    _output_args(p)


def _catalog_parser(sub) -> None:
    p = sub.add_parser("catalog", help="validate the catalog, show where user files go, print JSON Schemas, add a model",
                       description="validate: check built-in and user files, every problem at once (exit 1 if any). "
                                   "path: the user catalog folder ($ADVISOR_CONFIG_DIR overrides). schema: JSON Schemas. "
                                   "add REFERENCE: read a model (ORG/NAME, ORG/NAME-GGUF:TAG, a .gguf URL or file, "
                                   "ollama:NAME:TAG) and write it into the user catalog, named like a built-in afterwards.")
    p.add_argument("action", choices=("validate", "path", "schema", "add"))
    p.add_argument("reference", nargs="?", metavar="REFERENCE", help="add: the model to read")
    p.add_argument("--id", help="add: the id to give it (default: from the reference's name)")
    p.add_argument("--name", help="add: the display name (default: the repo's name)")
    p.add_argument("--alias", action="append", default=[], metavar="NAME",
                   help="add: another name it answers to (repeatable; the reference itself is always one)")
    p.add_argument("--replace", action="store_true", help="add: write an entry this command added before again")
    _output_args(p)


def dispatch(args: argparse.Namespace) -> int:
    module, _, name = COMMANDS[args.command].partition(":")
    return getattr(importlib.import_module(module), name)(args)


def app_parser() -> Parser:
    p = Parser(prog="advisor", description="The terminal app: the whole answer on one screen.", epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", metavar="MODEL", help="open on this model")
    _rig_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure is one line on stderr and an exit code, never a traceback."""
    try:
        _prepare_streams()
        code = _run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at interpreter exit
        return code
    except AdvisorError as exc:
        say(f"advisor: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        say("advisor: interrupted")
        return EXIT_INTERRUPT
    except BrokenPipeError:  # the reader went away (`advisor gpus | head -1`): nothing left to say
        _silence_stdout()
        return EXIT_YES
    except OSError as exc:  # a file named on the command line that cannot be read or written
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        say(f"advisor: {one_line(where + str(exc.strerror or exc))}")
        return EXIT_USAGE
    except RecursionError:
        say("advisor: input nested too deeply to be real")
        return EXIT_USAGE


def _run(argv: list[str]) -> int:
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version")):
        only = argv[0] if argv[0] in COMMANDS else None
        args = build_parser(only).parse_args(argv)
        return dispatch(args)
    args = app_parser().parse_args(argv)
    from advisor.app_entry import run_app

    return run_app(args, headless=main)


def _prepare_streams() -> None:
    """Output that cannot fail on its own account: characters the terminal's encoding lacks
    (`PYTHONIOENCODING=latin-1`) become `?`; a closed stdout discards the data (the exit code
    still answers); a closed stderr drops the one-line diagnostics."""
    import os

    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="replace")
            except (ValueError, OSError):
                pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
