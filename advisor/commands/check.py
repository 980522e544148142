"""`advisor check MODEL`: one model on one rig."""

from __future__ import annotations

import argparse

from advisor.commands.args import model_inputs, rig_from_args
from advisor.commands.output import EXIT_NO, EXIT_YES, emit, emit_json, fmt_of, say


def cmd_check(args: argparse.Namespace) -> int:
    from advisor.catalog.load import load_catalog
    from advisor.engine.check import evaluate

    catalog = load_catalog()
    rig = rig_from_args(args, catalog)
    model, options = model_inputs(catalog, args, rig)
    from advisor.commands.args import with_mmproj

    report = calibrated(evaluate(catalog, rig, model, with_mmproj(catalog, options)), args)
    fmt = fmt_of(args)
    if fmt == "json":
        from advisor.report.jsonout import check_json

        emit_json(check_json(report))
    elif fmt == "markdown":
        from advisor.report.text import render_markdown

        emit(render_markdown(report))
    else:
        from advisor.report.text import render_text, use_color
        from advisor.report.wrap import terminal_width

        emit(render_text(report, color=use_color(), width=terminal_width()))
    return EXIT_YES if report.fits else EXIT_NO


def calibrated(report, args: argparse.Namespace):
    """The answer corrected by this rig's `advisor verify` runs (advisor/engine/calibration.py), unless
    --no-calibration; a store that cannot be read is said on stderr and the plain model answers."""
    if getattr(args, "no_calibration", False):
        return report
    from advisor.measure.store import load_calibration

    calibration = load_calibration(warn=say)
    if calibration is None:
        return report
    from advisor.engine.calibration import apply

    return apply(report, calibration)
