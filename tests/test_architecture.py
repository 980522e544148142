"""The shape of the code: no module imports a module that imports it (import-linter's layers contract,
run by tests/test_cli.py, keeps the direction between packages)."""

from __future__ import annotations

import grimp


def test_no_module_imports_a_module_that_imports_it():
    graph = grimp.build_graph("advisor")
    mutual = sorted({tuple(sorted((m, j))) for m in graph.modules
                     for j in graph.find_modules_directly_imported_by(m)
                     if m in graph.find_modules_directly_imported_by(j)})
    assert mutual == []


def test_every_command_is_a_module_of_advisor_commands():
    from advisor.cli import COMMANDS

    assert COMMANDS and all(target.startswith("advisor.commands.") for target in COMMANDS.values())
