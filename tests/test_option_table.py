"""Each numeric option is declared once (advisor/engine/optiontable.py) and its bounds hold at every door: the
parser (`advisor check --ctx`), the engine (`evaluate` with Options) and the `--cmd` reader. Before, `--ctx` was
bounded at 100,000,000 by the parser, 16M by the engine and again by the --cmd reader (issue 25)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from advisor.cli import build_parser
from advisor.commands.args import options_from
from advisor.engine.check import evaluate
from advisor.engine.launch import CommandTarget, options_from_command, parse_command
from advisor.engine.options import Options
from advisor.engine.optiontable import OPTIONS, bounds_text
from advisor.errors import AdvisorError
from advisor.probe.flags import rig_from_flags

ROOT = Path(__file__).resolve().parents[1]


def _value(d, edge: str):
    """A value just inside (`in`) or just outside (`out`) the option's upper bound."""
    hi = d.hi if edge == "in" else (d.hi + 1 if d.kind == "int" else d.hi * 1.01)
    return int(hi) if d.kind == "int" else hi


def test_every_option_is_an_options_field_with_a_flag():
    names = {f.name for f in fields(Options)}
    assert all(d.dest in names and d.flags and d.flags[0].startswith("--") for d in OPTIONS)
    assert len({d.dest for d in OPTIONS}) == len(OPTIONS)


@pytest.mark.parametrize("d", OPTIONS, ids=[d.dest for d in OPTIONS])
def test_the_parser_takes_the_table_and_options_carry_it(d):
    args = build_parser().parse_args(["check", "llama-3.1-8b", d.flags[-1], str(_value(d, "in"))])
    assert getattr(options_from(args), d.dest) == _value(d, "in")
    with pytest.raises(AdvisorError, match="out of range") as err:
        build_parser().parse_args(["check", "llama-3.1-8b", d.flags[-1], str(_value(d, "out"))])
    assert d.flags[-1] in str(err.value)  # the flag as typed


@pytest.mark.parametrize("d", OPTIONS, ids=[d.dest for d in OPTIONS])
def test_the_engine_refuses_what_the_parser_refuses(catalog, d):
    rig = rig_from_flags(catalog, ["rtx-3090"], ram=64)
    with pytest.raises(AdvisorError) as err:
        evaluate(catalog, rig, catalog.models["llama-3.1-8b"], Options(**{d.dest: _value(d, "out")}))
    assert str(err.value).startswith(f"{d.flags[0]} ") and bounds_text(d) in (err.value.hint or "")


@pytest.mark.parametrize("d", [d for d in OPTIONS if d.cmd and (d.group == "serving" or d.dest in ("ubatch", "ctx"))],
                         ids=lambda d: d.dest)
def test_the_cmd_reader_bounds_are_the_tables(catalog, d):
    flag = {"ctx": "--max-model-len", "ubatch": "--max-num-batched-tokens"}.get(d.dest)
    rt = catalog.runtimes["vllm"]
    spelled = flag or next((f for f in d.flags if f in rt.option_names.values()), d.flags[0])
    target = CommandTarget(32, (), 131072, 4)
    for edge, ok in (("in", True), ("out", False)):
        parsed = parse_command(catalog.rules.launch, f"vllm serve meta-llama/Llama-3.1-8B {spelled} "
                                                     f"{_value(d, edge)}", runtime="vllm")
        if ok:
            options_from_command(parsed, Options(), target)
        else:
            with pytest.raises(AdvisorError, match="out of range"):
                options_from_command(parsed, Options(), target)


def test_no_bound_of_the_table_is_written_again():
    """The literals the three doors used to carry each their own copy of."""
    stale = re.compile(r"_whole\([^)]*,\s*(100_000_000|65_536|1_048_576|4096)\)|MAX_CTX|MAX_CONCURRENCY|MAX_PROMPT")
    hits = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in sorted((ROOT / "advisor").rglob("*.py"))
            for line in p.read_text(encoding="utf-8").splitlines() if stale.search(line)]
    assert hits == []


@pytest.mark.parametrize("text", ["1e308k", ".e5k", "1e308", ".e5", "nan", "infk", "-1k"])
@pytest.mark.parametrize("d", OPTIONS, ids=[d.dest for d in OPTIONS])
def test_a_malformed_or_huge_number_is_one_line(d, text):
    """Issue 30 item 3: `--ctx 1e308k` and `--ctx .e5k` were tracebacks (OverflowError, ValueError)."""
    with pytest.raises(AdvisorError) as err:
        build_parser().parse_args(["check", "llama-3.1-8b", d.flags[0], text])
    assert "\n" not in str(err.value) and d.flags[0] in str(err.value)


@pytest.mark.parametrize("text", ["1e308k", ".e5k"])
def test_a_malformed_number_inside_cmd_is_one_line(catalog, text):
    parsed = parse_command(catalog.rules.launch, f"llama-server -m x.gguf -c {text}")
    with pytest.raises(AdvisorError) as err:
        options_from_command(parsed, Options(), CommandTarget(32, (), 131072, 1))
    assert "\n" not in str(err.value)
