"""`advisor mcp`: the server spoken to by the MCP SDK's own client over stdio, as an assistant would.

The server is `python -m advisor mcp` in a child process; each test opens one session (initialize, then
its calls) and is bounded in time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from advisor.cli import build_parser
from advisor.commands.mcp import SKIP, subparser

SESSION_S = 180
CHECK = {"model": "llama-3.1-70b", "gpu": ["2xrtx-3090"], "quant": "Q4_K_M", "ram": "64"}
CHECK_ARGV = ["check", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--quant", "Q4_K_M", "--ram", "64"]


def session(body):
    """Run `body(session)` against a fresh `advisor mcp` child; returns what it returns."""

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "advisor", "mcp"], env=dict(os.environ))
        with anyio.fail_after(SESSION_S):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return await body(s)

    return anyio.run(main)


def cli_json(*argv: str):
    out = subprocess.run([sys.executable, "-m", "advisor", *argv, "--json"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_lists_one_tool_per_command_with_schemas_read_off_the_parser():
    async def body(s):
        return (await s.list_tools()).tools

    tools = {t.name: t for t in session(body)}
    assert set(tools) == {"check", "fit", "plan", "detect", "quants", "verify"}
    assert "export" not in tools["verify"].input_schema["properties"]  # no tool writes a file
    check = tools["check"].input_schema
    assert check["additionalProperties"] is False and "required" not in check  # MODEL may be left out for --cmd
    props = check["properties"]
    assert props["gpu"]["type"] == "array" and props["nvlink"]["type"] == "boolean"
    assert props["ctx"] == {**props["ctx"], "type": "integer", "minimum": 1}  # the option table's bounds
    assert props["gpu_memory_utilization"]["type"] == "number" and props["gpu_memory_utilization"]["maximum"] == 1.0
    assert props["split"]["enum"] == ["layer", "tensor", "row"]
    assert tools["plan"].input_schema["required"] == ["model"]
    assert "save" not in tools["detect"].input_schema["properties"]  # no tool writes files
    # every option of `advisor check` is a property: a new option needs nothing written for the server
    flags = {s[2:].replace("-", "_") for a in subparser(build_parser, "check")._actions if a.dest not in SKIP
             for s in a.option_strings[:1] if s.startswith("--")}
    assert flags and flags <= set(props)


def test_check_answers_what_check_json_prints():
    async def body(s):
        return await s.call_tool("check", CHECK)

    result = session(body)
    assert not result.is_error
    expected = cli_json(*CHECK_ARGV)
    assert json.loads(result.content[0].text) == expected
    assert result.structured_content == expected
    assert expected["fits"] is True and expected["quant"] == "Q4_K_M"


def test_bad_input_is_a_tool_error_and_the_server_keeps_answering():
    async def body(s):
        calls = [("check", {"model": "llama-9-70b", "gpu": ["rtx-3090"]}),  # an unknown id: the closest named
                 ("check", {"model": "llama-3.1-8b", "ctx": 0}),  # out of the option table's bounds
                 ("check", {"model": "llama-3.1-8b", "ctx": "lots"}),
                 ("check", {"model": "llama-3.1-8b", "colour": "red"}),  # not an argument of check
                 ("check", {"model": "llama-3.1-8b", "nvlink": "yes"}),
                 ("check", {"model": {"id": "x"}}),
                 ("check", {"model": "--help"}),  # a value is never an option
                 ("nope", {}),
                 ("quants", {})]
        return [await s.call_tool(name, args) for name, args in calls]

    *bad, quants = session(body)
    for r in bad:
        assert r.is_error and r.content and r.content[0].text.strip(), r
        assert "Traceback" not in r.content[0].text
    texts = [r.content[0].text for r in bad]
    assert "llama-3.1-70b" in texts[0]
    assert "--ctx" in texts[1] and "--ctx" in texts[2]
    assert "colour" in texts[3] and "nvlink" in texts[4]
    assert not quants.is_error and any(q["id"] == "Q4_K_M" for q in json.loads(quants.content[0].text))


@pytest.mark.parametrize("name, args, argv", [
    ("fit", {"gpu": ["rtx-4090"], "family": "qwen", "ram": "64"}, ["fit", "--gpu", "rtx-4090", "--family", "qwen",
                                                                     "--ram", "64"]),
])
def test_a_json_array_answer_comes_back_as_text(name, args, argv):
    async def body(s):
        return await s.call_tool(name, args)

    result = session(body)
    assert not result.is_error and result.structured_content is None  # an array is not a structured object
    assert json.loads(result.content[0].text) == cli_json(*argv)


def test_the_cli_never_imports_mcp():
    code = "import sys\nfrom advisor.cli import main\nmain(['quants', '--json'])\nprint('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip().splitlines()[-1] == "False"


def test_a_closed_stdin_is_one_line_and_exit_2():
    out = subprocess.run([sys.executable, "-m", "advisor", "mcp"], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=60, close_fds=True, preexec_fn=lambda: os.close(0))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "standard input" in out.stderr, out.stderr
