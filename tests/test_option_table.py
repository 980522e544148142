"""Each option is declared once (advisor/engine/optiontable.py) and every front end is derived from it: the parser
(`advisor check --ctx`), Options (`options_from`), the engine's validation (`check_options`), the `--cmd` reader and
the app's controls. Its bounds hold at every door: before, `--ctx` was bounded at 100,000,000 by the parser, 16M by
the engine and again by the --cmd reader (issue 25)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from advisor.cli import build_parser
from advisor.commands.args import options_from
from advisor.engine.check import check_options, evaluate
from advisor.engine.launch import CommandTarget, options_from_command, parse_command
from advisor.engine.options import Options
from advisor.engine.optiontable import (BY_FIELD, COMMANDS, CONTROLS, GROUP_TITLES, KINDS, OPTIONS, TAKES_ALSO,
                                        bounds_text, default_of, for_command)
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags

ROOT = Path(__file__).resolve().parents[1]
NUMERIC = [d for d in OPTIONS if d.kind in ("int", "float")]
"""Every numeric option, once per command that takes it (`--min-tps` of check, fit and plan)."""
BOUNDED = [d for f, d in BY_FIELD.items() if d.hi is not None]
"""The option the engine checks each bounded Options field by."""
TAKES = [(c, d) for c in COMMANDS for d in for_command(c)]


def _id(d) -> str:
    return f"{d.commands[0]}:{d.flags[0]}"


def _value(d, edge: str):
    """A value just inside (`in`) or just outside (`out`) the option's upper bound."""
    hi = d.hi if edge == "in" else (d.hi + 1 if d.kind != "float" else d.hi * 1.01)
    return hi if d.kind == "float" else int(hi)


def _argv(command: str, *rest: str) -> list[str]:
    return [command, *(["llama-3.1-8b"] if command != "fit" else []), *rest]


def test_the_table_is_well_formed():
    names = {f.name for f in fields(Options)}
    for d in OPTIONS:
        assert d.kind in KINDS and d.group in GROUP_TITLES and d.flags and all(f.startswith("--") for f in d.flags)
        assert set(d.commands) <= {*COMMANDS, *TAKES_ALSO, "app"} and d.commands
        assert not d.field or d.field in names, d.dest
        assert (d.lo is None) == (d.hi is None) and (d.hi is None or d.lo < d.hi), d.dest
        assert d.kind != "choice" or d.choices, d.dest
        assert d.marks == "" or d.marks in names
    for command in (*COMMANDS, *TAKES_ALSO, "app"):  # a flag means one thing per command
        flags = [f for d in for_command(command) for f in d.flags]
        assert len(flags) == len(set(flags)), command


@pytest.mark.parametrize("command", COMMANDS)
def test_no_option_given_is_the_default_options(command):
    """The parser's defaults are Options' own (the table does not write them again)."""
    assert options_from(build_parser().parse_args(_argv(command))) == Options()


def _sample(d):
    """A value other than the default for option `d`, as typed and as parsed."""
    if d.kind in ("int", "float"):
        v = _value(d, "in")
        return str(v), v
    if d.kind == "choice":
        v = next(c for c in reversed(d.choices) if c != default_of(d))
        return v.upper() if d.lower or d.convert else v, v
    if d.field == "mm_limit":
        return '{"image":3}', 3
    if d.kind == "text":
        return "Some-Text", "some-text" if d.lower else "Some-Text"
    if d.kind == "path":
        return "rig.toml", Path("rig.toml")
    return "x", "x"


@pytest.mark.parametrize("command, d", TAKES, ids=[f"{c}:{d.flags[-1]}" for c, d in TAKES])
def test_every_option_round_trips_table_parser_options(command, d):
    """Typed under each of its spellings, each option lands where the table says: the parsed namespace, and its
    Options field (with the value a switch sets, lowercased where the table says so, the field it marks given)."""
    for flag in d.flags:
        if d.kind in ("flag", "off"):
            argv, want = [flag], (d.kind == "flag")
        else:
            typed, want = _sample(d)
            argv = [flag, typed]
        args = build_parser().parse_args(_argv(command, *argv))
        got = getattr(args, d.dest)
        assert (got == [typed] if d.kind == "list" else got == want or got == _sample(d)[0]), (flag, got)
        if not d.field:
            continue
        options = options_from(args)
        expect = d.sets if d.sets is not None else (want if d.kind in ("flag", "off") else _sample(d)[1])
        assert getattr(options, d.field) == expect, (flag, getattr(options, d.field))
        if d.marks:
            assert getattr(options, d.marks) is True


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_takes_only_its_options(command):
    others = {f for d in OPTIONS if command not in d.commands for f in d.flags} - \
        {f for d in for_command(command) for f in d.flags}
    for flag in sorted(others):
        with pytest.raises(AdvisorError, match="unrecognized arguments"):
            build_parser().parse_args(_argv(command, flag, "1"))


@pytest.mark.parametrize("d", NUMERIC, ids=_id)
def test_the_parser_takes_the_table_and_options_carry_it(d):
    command = d.commands[0]
    args = build_parser().parse_args(_argv(command, d.flags[-1], str(_value(d, "in"))))
    assert getattr(args, d.dest) == _value(d, "in")
    if d.field:
        assert getattr(options_from(args), d.field) == _value(d, "in")
    with pytest.raises(AdvisorError, match="out of range") as err:
        build_parser().parse_args(_argv(command, d.flags[-1], str(_value(d, "out"))))
    assert d.flags[-1] in str(err.value) and bounds_text(d) in err.value.hint  # the flag as typed, the table's bound


@pytest.mark.parametrize("d", BOUNDED, ids=_id)
def test_the_engine_refuses_what_the_parser_refuses(catalog, d):
    rig = rig_from_flags(catalog, ["rtx-3090"], ram=64)
    with pytest.raises(AdvisorError) as err:
        evaluate(catalog, rig, catalog.models["llama-3.1-8b"], Options(**{d.field: _value(d, "out")}))
    assert str(err.value).startswith(f"{d.flags[0]} ") and bounds_text(d) in (err.value.hint or "")
    runtime = next(r.id for r in catalog.runtimes.values() if not d.runtime_option or d.runtime_option in r.option_names)
    check_options(catalog, Options(runtime=runtime, **{d.field: _value(d, "in")}))


@pytest.mark.parametrize("d", [d for d in BY_FIELD.values() if d.choices], ids=_id)
def test_the_engine_refuses_a_value_outside_the_choices(catalog, d):
    with pytest.raises(AdvisorError, match=f"unknown {d.noun} 'bogus'") as err:
        check_options(catalog, Options(**{d.field: "bogus"}))
    assert err.value.hint == f"use one of: {', '.join(d.choices)}"


@pytest.mark.parametrize("d", [d for d in OPTIONS if d.cmd and d.dest not in ("concurrency", "prompt_tokens")]
                         + [d for d in OPTIONS if d.field == "mm_limit" and d.hi is not None], ids=_id)
def test_the_cmd_reader_bounds_are_the_tables(catalog, d):
    flag = {"ctx": "--max-model-len", "ubatch": "--max-num-batched-tokens"}.get(d.dest)
    rt = catalog.runtimes["vllm"]
    spelled = flag or next((f for f in d.flags if f in rt.option_names.values()), d.flags[0])
    target = CommandTarget(32, (), 131072, 4)
    for edge, ok in (("in", True), ("out", False)):
        value = _value(d, edge) if d.kind != "text" else f"'{{\"image\":{_value(d, edge)}}}'"
        parsed = parse_command(catalog.rules.launch, f"vllm serve meta-llama/Llama-3.1-8B {spelled} {value}",
                               runtime="vllm")
        if ok:
            options_from_command(parsed, Options(), target)
        else:
            with pytest.raises(AdvisorError, match="out of range") as err:
                options_from_command(parsed, Options(), target)
            assert bounds_text(d) in err.value.hint


def test_each_runtime_spelling_of_an_option_is_one_the_parser_takes(catalog):
    """rules/runtimes.toml `option_names` (what a launch line writes) and the table's flags (what the advisor reads)
    name the same options: a runtime's own spelling typed to the advisor means the same option."""
    by_key = {d.runtime_option: d for d in OPTIONS if d.runtime_option}
    seen = 0
    for rt in catalog.runtimes.values():
        for key, spelled in rt.option_names.items():
            if key in by_key:
                assert spelled.split()[0] in by_key[key].flags, (rt.id, key, spelled)
                seen += 1
    assert seen >= 10


def test_the_apps_controls_are_the_tables(catalog):
    """Each control sets an Options field through the same mapping as the parser; its presets are in bounds."""
    ids = [d.widget.id for d in CONTROLS]
    assert len(ids) == len(set(ids)) and all(d.field for d in CONTROLS)
    for d in CONTROLS:
        for v in d.widget.presets:
            assert (d.lo <= v <= d.hi) if d.hi is not None else v in d.choices, (d.dest, v)


def test_every_command_lists_its_options_for_other_front_ends():
    """`for_command` is what an MCP tool's schema is built from: every option of the command's parser is there."""
    for command in COMMANDS:
        parser = build_parser(command)._subparsers._group_actions[0].choices[command]
        typed = {f for a in parser._actions for f in a.option_strings} - {"-h", "--help", "--format", "--json"}
        assert typed == {f for d in for_command(command) for f in d.flags}, command
        assert all(a.option.flags == tuple(a.option_strings) for a in parser._actions  # each action carries its record
                   if a.option_strings and a.dest not in ("help", "format", "json"))


def _spellings(n: float) -> set[str]:
    """How a bound may be written in Python: 16777216, 16_777_216, 1e7, 1e+07, 0.05."""
    out = {f"{n:g}", repr(n), f"{n:.0e}".replace("e+0", "e").replace("e+", "e")}
    return out | ({str(int(n)), f"{int(n):_}"} if n == int(n) else set())


def _written_again(lines: list[tuple[str, str]]) -> list[str]:
    """(`where`, line) pairs that write an option's bound next to its flag or --cmd setting, or an old literal."""
    stale = re.compile(r"_whole\(|_positive\(|MAX_CTX|MAX_CONCURRENCY|MAX_PROMPT|100_000_000|1_048_576")
    hits = [f"{where}: {line.strip()}" for where, line in lines if stale.search(line)]
    for d in OPTIONS:
        if d.hi is None:
            continue
        names = [f'"{n}"' for n in (*d.flags, *d.cmd, *(f"--cmd {c}" for c in d.cmd))]
        bound = re.compile(r"(?<![\w.])(" + "|".join(re.escape(s) for s in _spellings(d.hi) | (
            _spellings(d.lo) if d.lo not in (0, 1) else set())) + r")(?![\w.])")
        hits += [f"{where}: {line.strip()}" for where, line in lines
                 if any(n in line for n in names) and bound.search(line)]
    return hits


def test_no_bound_of_the_table_is_written_again():
    """No module that reads the table (the parser, options_from, the engine's checks, the --cmd reader, the app)
    writes an option's bound next to its flag or --cmd setting again, nor the literals the doors used to carry each
    their own copy of (`_whole("--ctx", 100_000_000)`, MAX_CTX)."""
    doors = [ROOT / "advisor" / p for p in ("cli.py", "commands/args.py", "commands/check.py", "commands/fit.py",
                                           "commands/plan.py", "engine/check.py", "engine/validate.py",
                                           "engine/launch.py", "tui/widgets/controls.py")]
    assert _written_again([(str(p.relative_to(ROOT)), line) for p in doors
                           for line in p.read_text(encoding="utf-8").splitlines()]) == []


@pytest.mark.parametrize("line", [
    'g.add_argument("--min-tps", type=float_in("--min-tps", 0, 1e7), metavar="N")',
    'return parse_int(text, "--ctx", 1, 16_777_216)',
    'np_ = _int(parsed, "parallel", 1, 4096)',
    'fraction = parse_float(text, "--gpu-memory-utilization", 0.05, 1.0)',
])
def test_the_literal_check_finds_a_bound_written_again(line):
    """The check above is not vacuous: lines like the ones the table replaced are caught."""
    assert _written_again([("x.py", line)])


@pytest.mark.parametrize("text", ["1e308k", ".e5k", "1e308", ".e5", "nan", "infk", "-1k"])
@pytest.mark.parametrize("d", NUMERIC, ids=_id)
def test_a_malformed_or_huge_number_is_one_line(d, text):
    """Issue 30 item 3: `--ctx 1e308k` and `--ctx .e5k` were tracebacks (OverflowError, ValueError)."""
    with pytest.raises(AdvisorError) as err:
        build_parser().parse_args(_argv(d.commands[0], d.flags[0], text))
    assert "\n" not in str(err.value) and d.flags[0] in str(err.value)


@pytest.mark.parametrize("text", ["1e308k", ".e5k"])
def test_a_malformed_number_inside_cmd_is_one_line(catalog, text):
    parsed = parse_command(catalog.rules.launch, f"llama-server -m x.gguf -c {text}")
    with pytest.raises(AdvisorError) as err:
        options_from_command(parsed, Options(), CommandTarget(32, (), 131072, 1))
    assert "\n" not in str(err.value)
