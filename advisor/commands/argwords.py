"""A command line from argparse's own description of it: named values (an MCP tool call's arguments, the
options `advisor serve` passes on to the app) become the argv words the CLI parses.

Each option is named by its first long flag with `-` as `_` (`--kv-cache` is `kv_cache`), a positional by its
dest. Values always follow `=` or `--`, so no value is read as an option, and nothing is run through a shell.
"""

from __future__ import annotations

import argparse
import json

from advisor.errors import AdvisorError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OUTPUT = frozenset({"help", "version", "format", "json", "command"})
"""Dests that shape the output or pick the command: no caller names them."""


def actions_of(parser: argparse.ArgumentParser, skip: frozenset[str] = OUTPUT) -> dict[str, argparse.Action]:
    """The parser's actions by name, less `skip` and help/version."""
    out = {}
    for a in parser._actions:
        if a.dest in skip or isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        flag = next((s for s in a.option_strings if s.startswith("--")), None)
        out[flag[2:].replace("-", "_") if flag else a.dest] = a
    return out


def command_words(actions: dict[str, argparse.Action], arguments: dict[str, Any], what: str = "advisor") -> list[str]:
    """`--flag=value ... -- POSITIONAL` for `arguments`: a flag is given as true, a repeatable option as a list,
    None leaves an option out. AdvisorError names an argument `actions` lacks or a value of the wrong kind."""
    unknown = sorted(set(arguments) - set(actions))
    if unknown:
        raise AdvisorError(f"{what} takes no argument {', '.join(unknown)}",
                           f"its arguments are {', '.join(actions)}")
    options, positional = [], []
    for key, value in arguments.items():
        a = actions[key]
        if value is None:
            continue
        if a.nargs == 0:
            if not isinstance(value, bool):
                raise AdvisorError(f"{key} is true or false, not {_shown(value)}", f"e.g. {key}: true")
            options += [a.option_strings[0]] if value else []
            continue
        values = value if isinstance(a, argparse._AppendAction) and isinstance(value, list) else [value]
        words = [_word(key, v) for v in values]
        if a.option_strings:
            options += [f"{a.option_strings[0]}={w}" for w in words]
        else:
            positional += words
    return options + (["--", *positional] if positional else [])


def given(actions: dict[str, argparse.Action], namespace: argparse.Namespace) -> dict[str, Any]:
    """What a parsed command line set, as `command_words` arguments: every value other than its default
    (a flag as true, a path as text)."""
    out: dict[str, Any] = {}
    for key, a in actions.items():
        value = getattr(namespace, a.dest, a.default)
        if value == a.default or value is None:
            continue
        out[key] = True if a.nargs == 0 else ([str(v) for v in value] if isinstance(value, list) else str(value))
    return out


def _word(key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AdvisorError(f"{key} is a string or a number, not {_shown(value)}", "see the input schema")
    return value if isinstance(value, str) else repr(value)


def _shown(value: Any) -> str:
    return json.dumps(value, default=str)[:60]
