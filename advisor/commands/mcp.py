"""`advisor mcp`: the advisor as a Model Context Protocol server on stdin/stdout, for coding assistants and
chat clients that ask "can my box run X?".

Its tools are the commands (check, fit, plan, detect, quants; verify where this build has it). Each tool's
input schema is read off that command's argparse subparser, action by action (`input_schema`), so a new
option is a new schema property without anything written here; numeric options carry the bounds of the
option table (advisor/engine/optiontable.py). A call runs `advisor COMMAND ... --json` as a child process
and answers with exactly what it printed: the JSON contract (../shared/docs/contract.md). Bad input (an
unknown id, a number out of range, an argument the schema does not have) is a tool error with the
command's one-line message; a child that crashes, hangs past CALL_TIMEOUT_S or is killed is a tool error
too, never the end of the server. Nothing a client sends is executed: it becomes argv words after `=`.

The `mcp` SDK is imported only here, when `advisor mcp` runs (the CLI and the app never load it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from advisor.commands.argwords import OUTPUT, actions_of, command_words
from advisor.errors import AdvisorError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

TOOLS = ("check", "fit", "plan", "detect", "quants", "verify")
"""The commands offered as tools, where the CLI has them."""
SKIP = OUTPUT | {"save", "export"}
"""Argparse dests no tool takes: the answer is always JSON, and no tool writes a file (`detect --save`, `verify
--export`)."""
CALL_TIMEOUT_S = 300.0
"""Longest one call may run: `plan` over every catalog GPU is the slowest command (seconds, not minutes);
a Hugging Face read is bounded by its own timeouts below this."""
INSTRUCTIONS = ("Answers whether an open-weights LLM runs on a GPU rig: fit, placement across GPUs, memory, "
                "speed, the NVLink verdict (check); what runs on a rig (fit); the cheapest rigs for a target "
                "(plan); this machine's GPUs (detect); quantization formats (quants). Rigs are --gpu specs "
                "such as 'rtx-4090' or '2xrtx-3090'; without one the machine running this server is used.")


def subparser(build_parser: Callable[[str], argparse.ArgumentParser], name: str) -> argparse.ArgumentParser:
    """The `advisor NAME` subparser as the CLI builds it."""
    parser = build_parser(name)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _property(a: argparse.Action) -> dict[str, Any]:
    """One action as a JSON Schema property: flags are booleans, repeatable options arrays, choices enums,
    the option table's numbers (the action's `option`) integers or numbers within its bounds, the rest
    strings."""
    words = (a.help or "").replace("%%", "%")
    described = {"description": f"{words} ({'/'.join(a.option_strings)})" if a.option_strings else words}
    if a.nargs == 0:
        return {"type": "boolean", **described}
    if isinstance(a, argparse._AppendAction):
        return {"type": "array", "items": {"type": "string"}, **described}
    if a.choices:
        return {"type": "string", "enum": list(a.choices), **described}
    d = getattr(a, "option", None)  # an option-table entry (advisor/engine/optiontable.py)
    if d is not None and getattr(d, "kind", None) in ("int", "float"):
        low = "exclusiveMinimum" if d.lo_open else "minimum"
        kind = "integer" if d.kind == "int" else "number"
        return {"type": kind, low: int(d.lo) if kind == "integer" else d.lo,
                "maximum": int(d.hi) if kind == "integer" else d.hi, **described}
    return {"type": "string", **described}  # what the CLI parses from text (a number given is passed as text)


def input_schema(sub: argparse.ArgumentParser) -> dict[str, Any]:
    """The tool's JSON Schema, from the subparser's actions."""
    actions = actions_of(sub, SKIP)
    required = [name for name, a in actions.items() if a.required]
    return {"type": "object", "properties": {name: _property(a) for name, a in actions.items()},
            **({"required": required} if required else {}), "additionalProperties": False}


def argv_for(name: str, sub: argparse.ArgumentParser, arguments: dict[str, Any]) -> list[str]:
    """The command line for a call of tool `name` (AdvisorError for an argument it lacks or a value of the
    wrong kind)."""
    return [name, *command_words(actions_of(sub, SKIP), arguments, f"advisor {name}")]


def run_tool(argv: list[str], timeout_s: float = CALL_TIMEOUT_S) -> tuple[int, str, str]:
    """`advisor ARGV --json` in a child: (exit code, stdout, stderr); 124 when it ran past `timeout_s`."""
    env = {**os.environ, "NO_COLOR": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "advisor", *argv[:1], "--json", *argv[1:]], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 124, "", f"advisor {argv[0]}: no answer within {timeout_s:g} s"
    return done.returncode, done.stdout, done.stderr


def answer(argv: list[str], timeout_s: float = CALL_TIMEOUT_S) -> tuple[bool, str, Any, str]:
    """A tool call's (is_error, text, structured JSON or None, stderr): exit 0 and 1 are answers (yes and
    no), anything else an error with the command's own message."""
    code, out, err = run_tool(argv, timeout_s)
    if code in (0, 1):
        try:
            return False, out, json.loads(out), err.strip()
        except ValueError:
            pass
    why = err.strip().splitlines()[-1] if err.strip() else f"advisor {argv[0]} ended with exit code {code}"
    return True, why, None, ""


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin."""
    try:
        import anyio
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError as exc:
        raise AdvisorError(f"advisor mcp needs the `mcp` package ({exc.name} is missing)",
                           "pip install 'mcp>=2.3' (it is one of the advisor's dependencies)") from None
    from advisor import __version__

    if not _readable(sys.stdin):
        raise AdvisorError("advisor mcp: standard input is closed or not readable",
                           "an MCP client starts `advisor mcp` with its stdin and stdout as pipes")
    server = Server("advisor", version=__version__, instructions=INSTRUCTIONS,
                    **handlers(args.tool_parser, args.tool_commands))

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0


def _readable(stream) -> bool:
    try:
        return stream is not None and not stream.closed and stream.readable()
    except (ValueError, OSError):
        return False


def handlers(build_parser: Callable[[str], argparse.ArgumentParser], commands) -> dict[str, Any]:
    """The server's tools/list and tools/call handlers over the commands this CLI has."""
    import anyio
    import mcp.types as types

    subs = {name: subparser(build_parser, name) for name in TOOLS if name in commands}
    tools = [types.Tool(name=name, description=sub.description or sub.format_usage(), input_schema=input_schema(sub))
             for name, sub in subs.items()]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        try:
            if params.name not in subs:
                raise AdvisorError(f"no tool {params.name!r}", f"the tools are {', '.join(subs)}")
            argv = argv_for(params.name, subs[params.name], dict(params.arguments or {}))
        except AdvisorError as exc:
            return types.CallToolResult(content=[types.TextContent(text=f"advisor: {exc}")], is_error=True)
        error, text, data, warnings = await anyio.to_thread.run_sync(answer, argv)
        content = [types.TextContent(text=text), *([types.TextContent(text=warnings)] if warnings else [])]
        return types.CallToolResult(content=content, structured_content=data if isinstance(data, dict) else None,
                                    is_error=error)

    return {"on_list_tools": list_tools, "on_call_tool": call_tool}
