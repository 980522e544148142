"""The headless front end: `advisor check|fit|plan|detect|models|gpus|catalog`, and the app launcher.

stdout is data (text, markdown or JSON); diagnostics go to stderr. Exit codes are API:
0 yes, 1 no, 2 bad input (one line on stderr), 130 interrupted. Nothing here imports textual:
`advisor` with no command imports the app lazily.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any, Sequence

from advisor.errors import AdvisorError, one_line, terminal_safe

COMMANDS = ("check", "fit", "plan", "detect", "models", "gpus", "catalog")
EXIT_YES, EXIT_NO, EXIT_USAGE, EXIT_INTERRUPT = 0, 1, 2, 130

EPILOG = """\
examples:
  advisor check llama-3.1-70b --gpu 2xrtx-3090              does it fit, how fast, NVLink?
  advisor check qwen3-32b --gpu rtx-4090 --ctx 32768 --kv-cache q8_0
  advisor check llama-3.1-8b --gpu rtx-3090 --json          the contract's JSON, for scripts
  advisor fit --gpu rtx-4090 --ctx 8192                     what runs on this rig, ranked
  advisor plan llama-3.1-70b --quant Q4_K_M --min-tps 10     cheapest rigs that reach the target
  advisor detect --save my-rig.toml                         capture this machine as a rig file
  advisor models llama / advisor gpus 3090                  search the catalog

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
    g.add_argument("--pcie", metavar="GxW", help="each GPU's host link, e.g. 4x16, 4x8, 3x4, 3x1 (default: the card's own)")
    g.add_argument("--ram", metavar="GB", help="system RAM for CPU offload (default: detected, or the rig file's)")
    g.add_argument("--rig", metavar="FILE", type=Path, help="a rig file (TOML) as `advisor detect --save` writes it")
    g.add_argument("--empty", action="store_true",
                   help="with detected GPUs, plan for idle cards (total memory) instead of the memory free now")


def _model_args(p: argparse.ArgumentParser, model: bool = True) -> None:
    from advisor.engine.options import DEFAULT_CTX, DEFAULT_PROMPT_TOKENS, WORKLOADS

    if model:
        p.add_argument("model", metavar="MODEL",
                       help="a catalog model id or name (see `advisor models`), a .gguf file, a model folder or "
                            "config.json, ollama:NAME[:TAG] or hf:ORG/NAME (read from the local caches)")
    g = p.add_argument_group("model options")
    g.add_argument("--quant", metavar="Q", help="quantization id, e.g. Q4_K_M, Q8_0, F16, fp8, awq, exl2-4.65 "
                                                  "(default: the best quality that fits, said so)")
    g.add_argument("--ctx", type=_whole("--ctx", 100_000_000), metavar="N",
                   help=f"context tokens to allocate KV cache for (default {DEFAULT_CTX}, capped at the model's max)")
    g.add_argument("--prompt-tokens", type=_whole("--prompt-tokens", 100_000_000), default=DEFAULT_PROMPT_TOKENS, metavar="N",
                   help=f"prompt length for the prefill estimate (default {DEFAULT_PROMPT_TOKENS})")
    g.add_argument("--kv-cache", default="f16", metavar="TYPE", help="KV cache type: f16 (default), q8_0, q4_0; fp8 for vLLM")
    g.add_argument("--runtime", default="llama.cpp", metavar="R",
                   help="runtime id (default llama.cpp; `advisor runtimes` lists them and what each does)")
    g.add_argument("--split", choices=("layer", "tensor"), default=None,
                   help="multi-GPU split (default: the runtime's: layer for llama.cpp/ollama/exllamav2, tensor for vllm)")
    g.add_argument("--concurrency", type=_whole("--concurrency", 65_536), default=1, metavar="N", help="sequences decoded at once (default 1)")
    g.add_argument("--workload", default="inference", metavar="W", help=f"one of {', '.join(WORKLOADS)} (default inference)")
    g.add_argument("--batch-size", type=_whole("--batch-size", 1_000_000), default=1, metavar="N", help="training: sequences per GPU per step")
    g.add_argument("--seq-len", type=_whole("--seq-len", 100_000_000), default=2048, metavar="N", help="training: tokens per sequence")
    g.add_argument("--flash-attn", action="store_true",
                   help="plan with flash attention on (llama.cpp -fa on): smaller compute buffers at long context. "
                        "Default off, the side that never promises a fit that runs out of memory; implied by a "
                        "quantized --kv-cache")


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
    for name, what in (("models", "LLMs"), ("gpus", "GPUs and unified-memory machines")):
        if want(name):
            p = sub.add_parser(name, help=f"the catalog's {what}", description=f"List or search the catalog's {what}.")
            p.add_argument("query", nargs="?", help="filter by id, name or alias (substring)")
            _output_args(p)
    if want("catalog"):
        _catalog_parser(sub)
    return parser


def _check_parser(sub) -> None:
    p = sub.add_parser("check", help="one model on one rig: fit, placement, memory, speed, NVLink verdict",
                       description="One model on one rig. Exit 0 when it fits fully in GPU memory, 1 when not "
                                   "(it may still run with offload: see `runs`), 2 on bad input.")
    _model_args(p)
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
    g.add_argument("--min-tps", type=_positive("--min-tps", 1e7), metavar="N", help="only models decoding at least N tokens/s")
    g.add_argument("--family", metavar="NAME", help="only this family (llama, qwen, gemma, mistral, ...)")
    g.add_argument("--moe", action="store_true", help="only mixture-of-experts models")
    g.add_argument("--max-params", type=_positive("--max-params", 1e5), metavar="B", help="only models up to B billion parameters")
    g.add_argument("--all", action="store_true", help="also list models that do not fit")


def _plan_parser(sub) -> None:
    p = sub.add_parser("plan", help="the cheapest rigs that reach a target, NVLink or not",
                       description="Enumerate candidate rigs (1-8 of each catalog GPU, mixes with what you own, "
                                   "unified-memory machines, with and without NVLink), keep those that reach the "
                                   "target, cheapest first. Exit 0 when an option exists, 1 when none does.")
    _model_args(p)
    _output_args(p)
    g = p.add_argument_group("target and budget")
    g.add_argument("--min-tps", type=_positive("--min-tps", 1e7), metavar="N", help="minimum single-stream decode tokens/s")
    g.add_argument("--budget", type=_positive("--budget", 1e12), metavar="USD", help="most you will spend")
    g.add_argument("--have", action="append", default=[], metavar="SPEC", help="GPUs you own ([Nx]GPU_ID): kept, cost nothing")
    g.add_argument("--rig", metavar="FILE", type=Path,
                   help="a rig file (advisor detect --save): its GPUs count as owned, its RAM as the rig's")
    g.add_argument("--ram", metavar="GB", help="system RAM of the rig (default 64)")
    g.add_argument("--price", action="append", default=[], metavar="ID=USD", help="override a GPU's price")
    g.add_argument("--kwh-price", type=_positive("--kwh-price", 1e4), default=None, metavar="USD", help="electricity price per kWh")
    g.add_argument("--top", type=_whole("--top", 10_000), default=5, metavar="N", help="options to show (default 5)")
    g.add_argument("--used", action="store_true", help="also price GPUs at used-market prices where the catalog has them")
    g.add_argument("--new", dest="used", action="store_false", help="new/list prices only (the default)")


def _detect_parser(sub) -> None:
    p = sub.add_parser("detect", help="the local hardware as the advisor sees it",
                       description="Read the GPUs through NVML (or a saved `nvidia-smi -q -x` XML / rig file with "
                                   "--from), system memory and CPU. Exit 0 whenever the machine (or file) was read, GPUs or "
                                   "not; 2 for an unreadable file.")
    p.add_argument("--from", dest="source", type=Path, metavar="FILE", help="an `nvidia-smi -q -x` XML or a rig file")
    p.add_argument("--save", type=Path, metavar="FILE", help="write what was found as a rig file (TOML)")
    _output_args(p)


def _catalog_parser(sub) -> None:
    p = sub.add_parser("catalog", help="validate the catalog, show where user files go, print JSON Schemas",
                       description="validate: check built-in and user files, every problem at once (exit 1 if any). "
                                   "path: the user catalog folder ($ADVISOR_CONFIG_DIR overrides). schema: JSON Schemas.")
    p.add_argument("action", choices=("validate", "path", "schema"))
    _output_args(p)


def _fmt(args: argparse.Namespace) -> str:
    return "json" if getattr(args, "json", False) else (getattr(args, "format", None) or "text")


def _emit(text: str) -> None:
    text = terminal_safe(text, keep_color=sys.stdout.isatty())
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _emit_text(args: argparse.Namespace, title: str, text: str) -> None:
    """Plain text, or for --format markdown the same under a heading in a fenced block."""
    _emit(f"## {title}\n\n```\n{text.rstrip()}\n```" if _fmt(args) == "markdown" else text)


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool = False) -> str:
    """Columns for a terminal (first and last left-aligned, numbers right-aligned), or a markdown table."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    last = len(header) - 1
    return "\n".join("  ".join(c.ljust(w) if i in (0, last) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in [header, *rows])


def _emit_json(obj: Any) -> None:
    _emit(json.dumps(obj, indent=2, ensure_ascii=False))


def options_from(args: argparse.Namespace):
    from advisor.engine.options import Options

    return Options(quant=args.quant, ctx=args.ctx, prompt_tokens=args.prompt_tokens, kv_type=args.kv_cache.lower(),
                   runtime=args.runtime.lower(), split=args.split, concurrency=args.concurrency,
                   workload=args.workload.lower(), flash_attention=args.flash_attn,
                   batch_size=args.batch_size, seq_len=args.seq_len)


def rig_from_args(args: argparse.Namespace, catalog):
    from advisor.probe.build import build_rig

    return build_rig(catalog, gpus=args.gpu, nvlink=args.nvlink, pcie=args.pcie, ram=args.ram,
                     rig_file=args.rig, empty=args.empty)


def model_from_arg(text: str):
    """A catalog id/name stays a string; a file, folder, `ollama:` or `hf:` reference is read."""
    import os

    if not (text.startswith(("ollama:", "hf:")) or text.endswith((".gguf", ".json", ".safetensors"))
            or os.path.exists(os.path.expanduser(text))):
        return text  # the common case: no need to import the file readers
    from advisor.modelfile import read_model

    return read_model(text)


def cmd_check(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.engine.check import evaluate

    catalog = load_catalog()
    rig = rig_from_args(args, catalog)
    report = evaluate(catalog, rig, model_from_arg(args.model), options_from(args))
    fmt = _fmt(args)
    if fmt == "json":
        from advisor.report.jsonout import check_json

        _emit_json(check_json(report))
    elif fmt == "markdown":
        from advisor.report.text import render_markdown

        _emit(render_markdown(report))
    else:
        from advisor.report.text import render_text, use_color

        _emit(render_text(report, color=use_color()))
    return EXIT_YES if report.fits else EXIT_NO


def cmd_catalog_list(args: argparse.Namespace) -> int:
    from advisor.catalog.load import as_dict, load_catalog
    from advisor.catalog.resolve import normal

    catalog = load_catalog()
    entries = catalog.models if args.command == "models" else catalog.gpus
    rows = list(entries.values())
    if args.query:
        q = "-" + normal(args.query)  # match from a word boundary: "m2" finds the M2s, not "sxm2"
        rows = [e for e in rows if any(q in "-" + normal(n) for n in (e.id, e.name, *e.aliases))]
    if _fmt(args) == "json":
        out = []
        for e in rows:
            d = as_dict(e)
            if args.command == "gpus":
                d.update(vram_bytes=e.vram_bytes, nvlink_gb_s=e.nvlink_gb_s,
                         price_usd=e.price.usd if e.price else None)
            out.append(d)
        _emit_json(out)
    else:
        from advisor.catalog.types import GIB

        if args.command == "models":
            header = ("id", "params", "active", "layers", "ctx", "name")
            table = [(m.id, f"{m.params_total / 1e9:.1f}B", f"{m.params_active / 1e9:.1f}B", str(m.layers),
                      str(m.max_context), m.name) for m in rows]
        else:
            header = ("id", "memory", "GB/s", "TFLOPS", "link", "price", "name")
            table = [(g.id, f"{g.vram_bytes / GIB:.0f}GB", f"{g.memory_bandwidth_gb_s:.0f}", f"{g.fp16_tflops:.1f}",
                      f"NVL{g.nvlink.generation}" if g.nvlink else (f"PCIe{g.pcie_gen}x{g.pcie_lanes}" if g.pcie_gen else "SoC"),
                      (f"${g.price.usd:,.0f}" + (" used" if g.price.condition == "used" else "")) if g.price else "—",
                      g.name) for g in rows]
        _emit(format_table(header, table, markdown=_fmt(args) == "markdown"))
    return EXIT_YES if rows else EXIT_NO


def cmd_catalog(args: argparse.Namespace) -> int:
    from advisor.catalog import load

    if args.action == "path":
        folder = load.user_dir()
        if _fmt(args) == "json":
            db, rules = load.builtin_dirs()
            _emit_json({"user_dir": str(folder), "builtin_hardware_db": str(db), "builtin_rules": str(rules)})
        else:
            _emit(f"{folder}\n(put *.toml files with [[gpu]], [[model]], [[quant]], [[runtime]] or [[preset]] "
                  f"tables there; entries override the built-in ones by id; set $ADVISOR_CONFIG_DIR to move it)")
        return EXIT_YES
    if args.action == "schema":
        _emit_json(load.schemas())
        return EXIT_YES
    problems = load.validate_all()
    if _fmt(args) == "json":
        _emit_json({"ok": not problems, "problems": problems})
    else:
        _emit("\n".join(problems) if problems else "catalog OK: built-in and user files validate")
    return EXIT_NO if problems else EXIT_YES


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "check":
        return cmd_check(args)
    if args.command in ("models", "gpus"):
        return cmd_catalog_list(args)
    if args.command == "catalog":
        return cmd_catalog(args)
    if args.command == "detect":
        from advisor.commands.detect import cmd_detect

        return cmd_detect(args)
    if args.command == "fit":
        from advisor.commands.fit import cmd_fit

        return cmd_fit(args)
    if args.command == "plan":
        from advisor.commands.plan import cmd_plan

        return cmd_plan(args)
    raise AssertionError(args.command)


def app_parser() -> Parser:
    p = Parser(prog="advisor", description="The terminal app: the whole answer on one screen.", epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", metavar="MODEL", help="open on this model")
    _rig_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure is one line on stderr and an exit code, never a traceback."""
    _prepare_streams()
    try:
        code = _run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at interpreter exit
        return code
    except AdvisorError as exc:
        _say(f"advisor: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say("advisor: interrupted")
        return EXIT_INTERRUPT
    except BrokenPipeError:  # the reader went away (`advisor gpus | head -1`): nothing left to say
        _silence_stdout()
        return EXIT_YES
    except OSError as exc:  # a file named on the command line that cannot be read or written
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _say(f"advisor: {one_line(where + str(exc.strerror or exc))}")
        return EXIT_USAGE
    except RecursionError:
        _say("advisor: input nested too deeply to be real")
        return EXIT_USAGE


def _run(argv: list[str]) -> int:
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version")):
        only = argv[0] if argv[0] in COMMANDS else None
        args = build_parser(only).parse_args(argv)
        return dispatch(args)
    args = app_parser().parse_args(argv)
    from advisor.app_entry import run_app

    return run_app(args)


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


def _say(line: str) -> None:
    """One line on stderr, if there is a stderr to write to."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
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
