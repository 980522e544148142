"""Text that fits the terminal: lines wrapped to its width (80 columns when it has none), tables whose
text columns wrap instead of running off the edge, shell commands continued with a backslash.

The width is the terminal's (`COLUMNS` first, as `shutil.get_terminal_size` reads it), 80 when stdout is
not a terminal, and never under `MIN_WIDTH`. Words are never cut: a single word longer than the line
(a path, a URL, a regular expression) stays whole, so what is copied from the output still works.
Markdown and JSON are not wrapped.
"""

from __future__ import annotations

import re
import shutil

DEFAULT_WIDTH = 80
"""What a pipe or a file gets: the classic terminal, and what the tests hold every line to."""
MIN_WIDTH = 40
"""Narrower than this nothing reads as a table: the text is laid out for 40 columns and the terminal wraps it."""
MIN_HANG = 20
"""A continuation line hangs under its column only when that leaves at least this many characters."""

_GAP = re.compile(r" {2,}(?=\S)")
"""The gap before a cell of an aligned row (`key  value`, `code sev  message`): two spaces or more."""


def terminal_width() -> int:
    """The width to wrap to: `COLUMNS`, else the terminal's, else 80; at least MIN_WIDTH."""
    return max(shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, MIN_WIDTH)


def _pieces(word: str, room: int) -> list[str]:
    """A word as it may be broken: whole when it fits `room`, else after its commas and slashes
    (`llama.cpp,ollama,vllm`), never inside a name."""
    if len(word) <= room:
        return [word]
    return [p for p in re.findall(r"[^,/]*[,/]?", word) if p]


def fill(text: str, width: int, indent: int) -> list[str]:
    """`text`'s words packed greedily into lines of `width`, each starting with `indent` spaces."""
    room = max(width - indent, 1)
    lines: list[str] = []
    cur = ""
    for word in text.split():
        for k, piece in enumerate(_pieces(word, room)):
            joined = piece if not cur else (cur + piece if k else f"{cur} {piece}")
            if len(joined) <= room or not cur:
                cur = joined
            else:
                lines.append(cur)
                cur = piece
    if cur:
        lines.append(cur)
    return [" " * indent + line for line in lines]


def wrap_line(line: str, width: int) -> list[str]:
    """One line as lines of at most `width`: the first keeps its layout up to the break, the rest hang
    under the last aligned cell that starts before the break (a value, a finding's message), or under the
    line's own indent."""
    line = line.rstrip()
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    hang = lead
    for gap in _GAP.finditer(line, 0, width):
        if width - gap.end() >= MIN_HANG:
            hang = gap.end()
    cut = line.rfind(" ", hang + 1, width + 1)
    if cut <= hang:  # one word from the hang to the edge: break after it
        cut = line.find(" ", width)
        if cut < 0:
            return [line]
    first, rest = line[:cut].rstrip(), line[cut:].strip()
    return [first, *fill(rest, width, hang)] if rest else [first]


def wrap_text(text: str, width: int) -> str:
    """Every line of `text` wrapped to `width` (a trailing newline kept)."""
    out = [w for line in text.split("\n") for w in wrap_line(line, width)]
    return "\n".join(out)


def shell_lines(command: str, width: int, indent: int = 2) -> list[str]:
    """A command line as lines of at most `width`, continued with ` \\` (a POSIX shell reads it as one line):
    each option stays with its values, quoted words stay whole."""
    words = re.findall(r"(?:[^\s'\"]+|'[^']*'|\"(?:\\.|[^\"\\])*\")+", command)
    units: list[str] = []
    for word in words:  # `-c 8192` and `--n-cpu-moe 58` move as one
        if units and not word.startswith("-") and units[-1].startswith("-") and " " not in units[-1]:
            units[-1] += " " + word
        else:
            units.append(word)
    pad, more = " " * indent, " " * (indent + 4)
    lines: list[str] = []
    cur = pad
    for unit in units:
        if cur.strip() and len(cur) + 1 + len(unit) + 2 > width:
            lines.append(cur + " \\")
            cur = more + unit
        else:
            cur = cur + unit if not cur.strip() else f"{cur} {unit}"
    lines.append(cur)
    return lines


def table_lines(rows: list[tuple[str, ...]], right: tuple[bool, ...], width: int | None, indent: int = 2,
                gap: int = 2) -> list[str]:
    """Aligned columns (`right[i]`: right-aligned) within `width`: when the row is too wide, the widest
    column whose cells hold several words wraps them onto more lines of the same row, as often as needed;
    a column that wraps is left-aligned; when that is not enough, the last column leaves the table for a line of its own under each row
    (`also called: ...`). Ids and numbers are never cut. `width=None`: no limit."""
    return [line for block in _blocks(rows, right, width, indent, gap) for line in block]


def _blocks(rows: list[tuple[str, ...]], right: tuple[bool, ...], width: int | None, indent: int,
            gap: int) -> list[list[str]]:
    """Each row's lines (the header's first)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if width is not None and not _narrow(rows, widths, width - indent - gap * (len(widths) - 1)) \
            and len(widths) > 2:
        inner = _blocks([r[:-1] for r in rows], right[:-1], width, indent, gap)
        name = rows[0][-1]
        return [inner[0], *(block + (fill(f"{name}: {row[-1]}", width, indent + 4) if row[-1] else [])
                             for block, row in zip(inner[1:], rows[1:]))]
    natural = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = tuple(r and w == n for r, w, n in zip(right, widths, natural))  # wrapped text reads left-aligned
    out = []
    for row in rows:
        cells = [fill(c, w, 0) or [""] if len(c) > w else [c] for c, w in zip(row, widths)]
        out.append([(" " * indent + (" " * gap).join((c[k] if k < len(c) else "").rjust(w) if r else
                                                      (c[k] if k < len(c) else "").ljust(w)
                                                      for c, w, r in zip(cells, widths, right))).rstrip()
                    for k in range(max(len(c) for c in cells))])
    return out


def _narrow(rows: list[tuple[str, ...]], widths: list[int], room: int) -> bool:
    """Shrink `widths` in place until they sum to `room`: one character at a time from the widest column
    that can still wrap, so the wrapped columns end up about as wide as each other. False when they cannot."""
    least = [max(max((len(p) for w in r[i].split() for p in _pieces(w, 0)), default=0) for r in rows)
             for i in range(len(widths))]
    while sum(widths) > room:
        can = [i for i in range(len(widths)) if widths[i] > max(least[i], 8)]
        if not can:
            return False
        widths[max(can, key=lambda j: widths[j])] -= 1
    return True
