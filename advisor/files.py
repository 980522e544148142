"""The one way the advisor reads and writes the user's files.

Reading: only a regular file is read (a FIFO, a device such as /dev/zero, a directory or a socket
is refused by name before a byte is read, so nothing blocks or grows without bound), and never more
than the caller's limit. Writing: a temporary file beside the target, flushed, then renamed over it,
so a full disk or an interrupted run leaves the old file whole; the file replaced keeps its
permissions (a 0600 file stays 0600). Before a command replaces a file, `check_overwrite` refuses a
symbolic link, a read-only file and a file the advisor did not write, unless the user said
`--force`. Every failure is an `AdvisorError` naming the file, on one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import BinaryIO, Callable

from advisor.errors import AdvisorError, one_line

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _where(path: str | os.PathLike[str]) -> str:
    text = one_line(os.fspath(path))
    return text if len(text) <= 300 else f"{text[:150]}…{text[-100:]}"


def open_regular(path: str | os.PathLike[str], hint: str = "") -> BinaryIO:
    """`path` opened for binary reading, if it is a regular file (symlinks to one are fine).

    The open itself cannot block: O_NONBLOCK makes opening a FIFO return at once, and the file's
    type is checked on the open descriptor (no race between a check and the open)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise AdvisorError(f"{_where(path)}: cannot read: {exc.strerror or exc}", hint) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise AdvisorError(f"{_where(path)}: is {kind}, not a file", hint or "pass a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def file_size(path: str | os.PathLike[str], hint: str = "") -> int:
    """The size of a regular file (checked as `open_regular` checks it)."""
    with open_regular(path, hint) as f:
        return os.fstat(f.fileno()).st_size


def read_limited(path: str | os.PathLike[str], limit: int, what: str = "file", hint: str = "") -> bytes:
    """The whole of a regular file of at most `limit` bytes; a larger one is refused unread."""
    with open_regular(path, hint) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise AdvisorError(f"{_where(path)}: {size} bytes, larger than the {limit} accepted for {what}", hint)
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise AdvisorError(f"{_where(path)}: cannot read: {exc.strerror or exc}", hint) from None
    if len(data) > limit:  # grew while read (or a file system that reports no size)
        raise AdvisorError(f"{_where(path)}: larger than the {limit} bytes accepted for {what}", hint)
    return data


def check_overwrite(path: str | os.PathLike[str], flag: str, ours: Callable[[bytes], bool], force: bool) -> None:
    """Refuse (one line, `AdvisorError`) to replace what is at `path` when it is a symbolic link, a
    read-only file or a file `ours(first 4 KiB)` does not recognise as the advisor's; `force` (the
    user's `--force`) allows each of those. Nothing there, or the advisor's own writable file: fine."""
    where = _where(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise AdvisorError(f"{flag} {where}: cannot look at it: {exc.strerror or exc}", "save to another file") from None
    if stat.S_ISLNK(st.st_mode):
        if not force:
            raise AdvisorError(f"{flag} {where}: is a symbolic link (to {_where(os.readlink(path))}); not replacing it",
                               "save to the file it points to, or add --force to replace the link with a file")
        return
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise AdvisorError(f"{flag} {where}: is {kind}; not replacing it", "save to a file")
    if force:
        return
    if not st.st_mode & 0o200 or not os.access(path, os.W_OK):
        raise AdvisorError(f"{flag} {where}: the file is read-only; not overwriting it",
                           "make it writable first, or add --force to replace it; it stays read-only")
    with open_regular(path) as f:
        head = f.read(4096)
    if not ours(head):
        raise AdvisorError(f"{flag} {where}: the file exists and was not written by the advisor; not overwriting it",
                           "save to a new file, or add --force to overwrite it")


def replace_file(path: str | os.PathLike[str], data: bytes) -> None:
    """`data` into `path` through a temporary file in the same folder and a rename (OSError on
    failure, nothing changed). A regular file replaced keeps its permission bits; the temporary
    file is private (0600) until it has them, so a 0600 file's new text is never readable by others."""
    target = Path(path)
    try:
        st = os.lstat(target)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            if mode is not None:
                os.chmod(f.fileno() if os.chmod in os.supports_fd else tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path` as `replace_file` does; a failure is one line (`AdvisorError`)."""
    try:
        replace_file(path, text.encode("utf-8"))
    except OSError as exc:
        raise AdvisorError(f"{_where(path)}: cannot write: {exc.strerror or exc}",
                           "nothing was changed; check the folder, its permissions and free space") from None
