"""The one exception family the advisor raises on purpose.

Anything the user can fix (an unknown id, a bad number, a malformed file) is an `AdvisorError`
with a message and a hint; the CLI prints it as one line on stderr and exits 2. Anything else
escaping is a bug.
"""

from __future__ import annotations


class AdvisorError(Exception):
    """Bad input, described in words a person can act on."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message
