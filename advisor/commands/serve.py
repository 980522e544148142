"""`advisor serve`: the terminal app in a web browser, through textual-serve.

textual-serve runs one `advisor [MODEL] [rig options]` per page load, in a pseudo-terminal it streams to
the page over a websocket. It listens on 127.0.0.1 unless told otherwise (`--host`): the app shows this
machine's hardware and writes exports into its working folder, so reaching it from another machine is a
choice the user makes, not a default. The page's own links (its websocket, its scripts) follow the address
the browser used, so it works through an SSH tunnel or on a LAN address alike.

textual-serve is imported only here, when `advisor serve` runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from advisor.commands.argwords import actions_of, command_words, given
from advisor.errors import AdvisorError


def cmd_serve(args: argparse.Namespace) -> int:
    """`advisor serve [MODEL] [rig options]`: the app's own input checks (exit 2 before listening), then the
    app in a browser, each page running `advisor` with the options given here."""
    args.make_app(args)
    actions = actions_of(args.app_parser())
    serve(app_command(command_words(actions, given(actions, args))), args.host, args.port)
    return 0


def app_command(words: list[str]) -> str:
    """The shell command textual-serve runs per page: this interpreter's `advisor` with `words` (quoted)."""
    return shlex.join([sys.executable, "-m", "advisor", *words])


def serve(command: str, host: str, port: int) -> None:
    """Serve `command` (the app) on http://HOST:PORT until interrupted."""
    try:
        from textual_serve.server import Server
    except ImportError as exc:
        raise AdvisorError(f"advisor serve needs the `textual-serve` package ({exc.name} is missing)",
                           "pip install 'textual-serve>=1.1' (it is one of the advisor's dependencies)") from None

    class _Server(Server):
        async def handle_index(self, request):  # noqa: ANN001, ANN202 - aiohttp's handler
            # the page's websocket and scripts at the address the browser asked for (a tunnel, a LAN name)
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

    _Server(command, host=host, port=port, title="advisor").serve()
