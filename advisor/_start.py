"""The `advisor` console script's entry: Ctrl-C is answered quietly from the first instant.

Importing the CLI takes tens of milliseconds; a SIGINT in that window would print a
KeyboardInterrupt traceback. Only the console script imports this module, so the handler is not
installed for anyone who imports `advisor` as a library (or for the test-suite).
"""

import os
import sys

import _signal  # the C module: `signal` would import enum first, widening the window


def _interrupted(signum, frame):  # noqa: ANN001 - a signal handler's fixed signature
    try:
        os.write(2, b"advisor: interrupted\n")
    except OSError:
        pass
    os._exit(130)


_signal.signal(_signal.SIGINT, _interrupted)


def main() -> int:
    from advisor.cli import main as cli_main

    _signal.signal(_signal.SIGINT, _signal.default_int_handler)  # from here on cli.main answers Ctrl-C
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
