"""`advisor check MODEL`: one model on one rig."""

from __future__ import annotations

import argparse

from advisor.commands.args import options_from, resolve_model, rig_from_args
from advisor.commands.output import EXIT_NO, EXIT_YES, emit, emit_json, fmt_of


def cmd_check(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.engine.check import evaluate

    catalog = load_catalog()
    rig = rig_from_args(args, catalog)
    report = evaluate(catalog, rig, resolve_model(catalog, args.model), options_from(args))
    fmt = fmt_of(args)
    if fmt == "json":
        from advisor.report.jsonout import check_json

        emit_json(check_json(report))
    elif fmt == "markdown":
        from advisor.report.text import render_markdown

        emit(render_markdown(report))
    else:
        from advisor.report.text import render_text, use_color

        emit(render_text(report, color=use_color()))
    return EXIT_YES if report.fits else EXIT_NO
