"""The one exception family the advisor raises on purpose, and the one-line rule for what it prints.

Anything the user can fix (an unknown id, a bad number, a malformed file) is an `AdvisorError`
with a message and a hint; the CLI prints it as one line on stderr and exits 2. Anything else
escaping is a bug.
"""

from __future__ import annotations


def one_line(text: str, limit: int = 2000) -> str:
    """`text` safe to print on a terminal: control characters (newlines, ESC sequences that would
    retitle or clear the terminal) shown as `?`, and at most `limit` characters."""
    text = str(text)
    if text.isprintable() and len(text) <= limit:
        return text
    out = "".join(c if c.isprintable() else "?" for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def terminal_safe(text: str, keep_color: bool = False) -> str:
    """Text for stdout with every control character but newline and tab shown as `?`, so a name
    read from a file cannot move the cursor, clear the screen or retitle the terminal. With
    `keep_color`, the colour codes (SGR, `ESC [ ... m`) the report itself adds are kept."""
    if text.isprintable() or all(c.isprintable() or c in "\n\t" for c in text):
        return text
    import re

    parts = re.split(r"(\x1b\[[0-9;]*m)", text) if keep_color else [text]
    return "".join(p if keep_color and i % 2 else "".join(c if c.isprintable() or c in "\n\t" else "?" for c in p)
                   for i, p in enumerate(parts))


class AdvisorError(Exception):
    """Bad input, described in words a person can act on."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return one_line(f"{self.message} ({self.hint})" if self.hint else self.message)
