"""`advisor [MODEL] [rig options]`: check the input, then start the terminal app.

Bad input (an unknown model, a malformed rig option) is exit 2 with one line on stderr, before
any UI starts. Textual is imported only here, lazily, so the headless commands never load it.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

from advisor.errors import AdvisorError

EXIT_USAGE = 2


def make_app(args: argparse.Namespace):
    """The app for these arguments; raises AdvisorError on bad input. With no rig options the
    rig is detected inside the app, in a worker (default probe: `advisor.probe.detect`)."""
    from advisor.catalog.load import load_catalog
    from advisor.catalog.resolve import resolve
    from advisor.probe.flags import parse_ram

    from advisor.commands.args import model_from_arg, recorded_controls, wants_mmproj

    catalog = load_catalog()
    ref = model_from_arg(args.model, catalog, mmproj=wants_mmproj(args)) if args.model else None
    loaded = ref if ref is not None and not isinstance(ref, str) else None
    model = resolve(catalog.models, ref, "model") if isinstance(ref, str) else None
    rig = None
    if args.gpu or args.rig or getattr(args, "cpu", None):
        from advisor.commands.args import rig_from_args

        rig = rig_from_args(args, catalog)
    elif args.nvlink or args.pcie:
        raise AdvisorError("--nvlink and --pcie describe GPUs given with --gpu", "add --gpu SPEC")
    elif args.ram is not None:
        parse_ram(args.ram)

    from advisor.tui.app import AdvisorApp

    return AdvisorApp(catalog, model=model, rig=rig, ram=args.ram, empty=args.empty, loaded=loaded,
                      initial=recorded_controls(catalog, args.model, model))


def run_app(args: argparse.Namespace, headless: Callable[[list[str]], int]) -> int:
    """The app in a terminal (or a browser's, under `advisor serve`); elsewhere `headless` (the CLI's main)
    answers the same question in text."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()) and not os.environ.get("TEXTUAL_DRIVER"):
        return _headless(args, headless)
    try:
        app = make_app(args)
    except AdvisorError as exc:
        sys.stderr.write(f"advisor: {exc}\n")
        return EXIT_USAGE
    app.run()
    return 0


def _headless(args: argparse.Namespace, main: Callable[[list[str]], int]) -> int:
    """Not a terminal (a pipe, a script, CI): answer in text instead of starting the app.

    With a MODEL that is `advisor check MODEL`, without one `advisor fit`, on the same rig options.
    """
    rig = [*(f"--gpu={g}" for g in args.gpu), *(["--nvlink"] if args.nvlink else []),
           *([f"--pcie={args.pcie}"] if args.pcie else []), *([f"--ram={args.ram}"] if args.ram else []),
           *([f"--rig={args.rig}"] if args.rig else []), *(["--empty"] if args.empty else [])]
    command = ["check", args.model, *_recorded_runtime(args.model), *rig] if args.model else ["fit", *rig]
    code = main(command)
    if code != EXIT_USAGE:  # bad input stays one line
        sys.stderr.write(f"advisor: not a terminal, so no app: this was `advisor {' '.join(command)}` "
                         f"(run `advisor` in a terminal for the app)\n")
    return code


def _recorded_runtime(ref: str) -> list[str]:
    """`--runtime R` for a MODEL naming a recorded checkpoint (the runtime the app opens on), else nothing."""
    if "/" not in ref:  # checkpoints are Hugging Face repo ids: no catalog to load for anything else
        return []
    from advisor.catalog.load import load_catalog
    from advisor.catalog.resolve import exact
    from advisor.commands.args import recorded_controls

    catalog = load_catalog()
    runtime = recorded_controls(catalog, ref, exact(catalog.models, ref)).get("runtime")
    return ["--runtime", runtime] if runtime else []
