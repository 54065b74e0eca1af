"""Writing a file whole or not at all: what every saved run, snapshot and export goes through.

A write that fails half-way (disk full, quota, an exporter raising mid-stream) must not
leave a truncated file where the user asked for one, nor destroy the file that was there:
the content goes to a temporary file beside the destination, which replaces it only once
complete (``os.replace``, atomic on POSIX). A destination that is not a regular file
(``/dev/stdout``, a FIFO, ``/dev/full``) is written directly: it cannot be replaced.
Errors are ``OSError`` of the same errno naming the destination, not the temporary file.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any

__all__ = ["atomic_open", "write_whole"]


def write_whole(
    path: str | os.PathLike[str], write: Callable[[IO[Any]], object], *, binary: bool = False
) -> str:
    """Call ``write(f)`` on a file that becomes ``path`` only if it returns; returns ``path``."""
    target = os.fspath(path)
    with atomic_open(target, binary=binary) as f:
        write(f)
    return target


@contextmanager
def atomic_open(path: str | os.PathLike[str], *, binary: bool = False) -> Iterator[IO[Any]]:
    """A file opened for writing that replaces ``path`` when the block ends without error;
    on error it is removed and ``path`` is left as it was (errors name ``path``)."""
    target = os.fspath(path)
    mode = _mode_of(target)
    if mode is not None and not stat.S_ISREG(mode):  # a device or a FIFO: written in place
        with _named(target), open(target, "wb" if binary else "w", **_text(binary)) as f:
            yield f
        return
    final = os.path.realpath(target)  # through a symlink, as open() would write
    head, tail = os.path.split(final)
    temporary = os.path.join(head, f".{tail}.{secrets.token_hex(4)}.tmp")
    with _named(target):
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
    try:
        with _named(target):
            if mode is not None:  # an existing file keeps its permissions
                os.chmod(fd, stat.S_IMODE(mode))
            with open(fd, "wb" if binary else "w", **_text(binary)) as f:
                yield f
            os.replace(temporary, final)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def _mode_of(target: str) -> int | None:
    """``st_mode`` of what ``target`` names (through symlinks), None if nothing is there."""
    try:
        return os.stat(target).st_mode
    except OSError:
        return None


def _text(binary: bool) -> dict[str, Any]:
    return {} if binary else {"encoding": "utf-8"}


@contextmanager
def _named(target: str) -> Iterator[None]:
    """Re-raise an ``OSError`` as the same error about ``target``."""
    try:
        yield
    except OSError as exc:
        if exc.filename == target and exc.filename2 is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), target) from exc
