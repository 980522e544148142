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
    "mcp": "advisor.commands.mcp:cmd_mcp",
    "serve": "advisor.commands.serve:cmd_serve",
    "verify": "advisor.commands.verify:cmd_verify",
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
  advisor verify ./qwen3-8b-Q4_K_M.gguf                     run llama-bench here: predicted against measured
  advisor models llama / advisor gpus 3090                  search the catalog
  advisor runtimes / advisor rules                          runtimes and what each does; rule codes
  advisor quants                                            quantizations: bits per weight, quality, runtimes

exit codes: 0 yes (fits / found), 1 no, 2 bad input, 130 interrupted.
Rig: --gpu SPEC (repeatable, [Nx]GPU_ID), --rig FILE, or the detected local GPUs (CPU-only when none).
"""


class Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # printed after "advisor: " (main): the subcommand, not the program, names where the problem is
        where = self.prog.removeprefix("advisor").strip()
        raise AdvisorError(f"{where}: {message}" if where else message, f"see `{self.prog} --help`")


class _AsTyped(argparse.Action):
    """Stores `parse(d, text, flag)` of the option table (advisor/engine/optiontable.py), `flag` being the spelling
    the user typed: an option with aliases (`--gpu-memory-utilization` / `--mem-fraction-static`) names in its
    error the one given."""

    option = None

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        from advisor.engine.optiontable import parse

        setattr(namespace, self.dest, parse(self.option, values, option_string or self.option_strings[0]))


def _table_args(p: argparse.ArgumentParser, command: str) -> None:
    """The options `command` takes, as advisor/engine/optiontable.py declares them (flags, help, default, bounds,
    choices), in its groups: a number through the one bounded number parser, an error naming the flag as typed."""
    from advisor.engine.optiontable import GROUP_TITLES, for_command

    groups: dict[str, argparse._ActionsContainer] = {}
    for d in for_command(command):
        title = GROUP_TITLES[d.group]
        if title is None:
            g = p
        elif title not in groups:
            g = groups[title] = p.add_argument_group(title)
        else:
            g = groups[title]
        g.add_argument(*d.flags, **_argparse_kwargs(d)).option = d  # the record, for front ends built on the parser


def _argparse_kwargs(d) -> dict:
    from advisor.engine.optiontable import parser_default

    kw: dict = {"dest": d.dest, "default": parser_default(d), "help": d.help}
    if d.kind in ("flag", "off"):
        return {**kw, "action": "store_true" if d.kind == "flag" else "store_false"}
    kw.update(metavar=d.metavar or None, action="append" if d.kind == "list" else "store")
    if d.kind == "path":
        kw["type"] = Path
    if d.strict:
        kw["choices"] = d.choices
    if d.const is not None:
        kw.update(nargs="?", const=d.const)
    if d.kind in ("int", "float") or d.convert:
        kw["action"] = _AsTyped  # its `option` is set as the action is added (_table_args)
    return kw


def _output_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=("text", "json", "markdown"), default=None, help="output format (default text)")
    g.add_argument("--json", action="store_true", help="same as --format json")


def _model_arg(p: argparse.ArgumentParser, optional: bool = False) -> None:
    p.add_argument("model", metavar="MODEL", nargs="?" if optional else None,
                   help="a catalog model id or name (see `advisor models`), a .gguf file, a model folder or "
                        "config.json, ollama:NAME[:TAG] or hf:ORG/NAME (read from the local caches)")


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
    if want("mcp"):
        p = sub.add_parser("mcp", help="a Model Context Protocol server on stdin/stdout (check, fit, plan, ... as tools)",
                           description="Serve the advisor to MCP clients (assistants, chat apps) over stdio: one tool "
                                       "per command, its input schema the command's options, its answer the --json output.")
        p.set_defaults(tool_parser=build_parser, tool_commands=tuple(COMMANDS))
    if want("serve"):
        _serve_parser(sub)
    if want("verify"):
        _verify_parser(sub)
    return parser


def _serve_parser(sub) -> None:
    """`advisor serve`: the app's own arguments (MODEL, the rig), and where to listen."""
    p = sub.add_parser("serve", parents=[app_parser()], conflict_handler="resolve",
                       help="the terminal app in a web browser (textual-serve), on this machine by default",
                       description="Serve the app to a browser: each page load runs `advisor [MODEL] [rig options]` "
                                   "in a terminal the page shows. Bound to 127.0.0.1 unless --host says otherwise.")
    g = p.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every interface)")
    g.add_argument("--port", type=_port, default=8000, metavar="N", help="port (default 8000)")
    p.set_defaults(app_parser=app_parser, make_app=_make_app)


def _make_app(args: argparse.Namespace):
    """The app for these arguments (AdvisorError on bad input), for `advisor serve` to check them first."""
    from advisor.app_entry import make_app

    return make_app(args)


def _port(text: str) -> int:
    from advisor.numbers import parse_int

    return parse_int(text, "--port", 1, 65_535)


def _check_parser(sub) -> None:
    p = sub.add_parser("check", help="one model on one rig: fit, placement, memory, speed, NVLink verdict",
                       description="One model on one rig. Exit 0 when it fits fully in GPU memory, 1 when not "
                                   "(it may still run with offload: see `runs`), 2 on bad input.")
    _model_arg(p, optional=True)
    _table_args(p, "check")
    _output_args(p)


def _fit_parser(sub) -> None:
    p = sub.add_parser("fit", help="every catalog model on the rig: the best quant that fits, ranked",
                       description="Every catalog model on the rig, ranked by the quality that fits, then speed. "
                                   "Exit 0 when at least one model fits, 1 when none does.")
    _table_args(p, "fit")
    _output_args(p)


def _plan_parser(sub) -> None:
    p = sub.add_parser("plan", help="the cheapest rigs that reach a target, NVLink or not",
                       description="Enumerate candidate rigs (1-8 of each catalog GPU, mixes with what you own, "
                                   "unified-memory machines, with and without NVLink), keep those that reach the "
                                   "target, cheapest first. Exit 0 when an option exists, 1 when none does.")
    _model_arg(p)
    _table_args(p, "plan")
    _output_args(p)


def _detect_parser(sub) -> None:
    p = sub.add_parser("detect", help="the local hardware as the advisor sees it",
                       description="Read the GPUs through NVML (or a saved `nvidia-smi -q -x` XML / rig file with "
                                   "--from), system memory and CPU. Exit 0 whenever the machine (or file) was read, GPUs or "
                                   "not; 2 for an unreadable file.")
    p.add_argument("--from", dest="source", type=Path, metavar="FILE", help="an `nvidia-smi -q -x` XML or a rig file")
    p.add_argument("--save", type=Path, metavar="FILE", help="write what was found as a rig file (TOML)")
    p.add_argument("--measure", action="store_true",
                   help="measure the RAM bandwidth here (a copy test of about 3 s); used when SMBIOS is unreadable")
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


def _verify_parser(sub) -> None:
    """`advisor verify`: check's model, rig and option groups, plus what to measure and where it goes."""
    p = sub.add_parser("verify", help="measure this rig (or read results run elsewhere): predicted against measured",
                       description="Run your own benchmark for the answer (llama-bench on PATH with the answer's "
                                   "flags, the local Ollama, or `vllm bench serve` against --base-url), or read one "
                                   "with --import; print predicted against measured for decode, prefill and memory, "
                                   "and whether the fit verdict held. Each comparison is stored beside the user "
                                   "catalog; later answers on the same rig are calibrated from them. Exit 0, 1 when "
                                   "the fit verdict did not hold, 2 on bad input or a benchmark that fails.")
    _model_arg(p, optional=True)
    _table_args(p, "verify")
    _output_args(p)


def dispatch(args: argparse.Namespace) -> int:
    module, _, name = COMMANDS[args.command].partition(":")
    return getattr(importlib.import_module(module), name)(args)


def app_parser() -> Parser:
    p = Parser(prog="advisor", description="The terminal app: the whole answer on one screen.", epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", metavar="MODEL", help="open on this model")
    _table_args(p, "app")
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
