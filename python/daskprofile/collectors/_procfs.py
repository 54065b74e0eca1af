"""Small ``/proc`` reads that keep the GIL.

Python's own file and directory calls give the GIL up around every system call. A sampler
thread that does so while a compute keeps the GIL busy hands it back and forth once per
call, and on a virtual machine each hand-over costs the computing thread a few hundred
microseconds (two thread wake-ups). ``/proc`` files are generated in memory and read in
microseconds, so here they are read through libc with the GIL held (``ctypes.PyDLL``):
a whole resource sample then costs the computation one hand-over, when the sampler wakes.

Without libc symbols (not Linux) the standard library reads instead; either way ``None``
means the file or directory cannot be read (gone, or no ``/proc``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

__all__ = ["available", "listdir", "read"]

_BUF = 4096
#: offset of ``d_name`` in glibc's and musl's ``struct dirent`` on 64-bit Linux
_D_NAME = 19


def _load() -> Any:
    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    try:
        libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: called with the GIL held
        libc.open.argtypes = [ctypes.c_char_p, ctypes.c_int]
        libc.open.restype = ctypes.c_int
        libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        libc.read.restype = ctypes.c_ssize_t
        libc.close.argtypes = [ctypes.c_int]
        libc.close.restype = ctypes.c_int
        libc.opendir.argtypes = [ctypes.c_char_p]
        libc.opendir.restype = ctypes.c_void_p
        libc.readdir.argtypes = [ctypes.c_void_p]
        libc.readdir.restype = ctypes.c_void_p
        libc.closedir.argtypes = [ctypes.c_void_p]
        libc.closedir.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


_libc = _load()
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def available() -> bool:
    """Whether reads here keep the GIL (Linux with libc symbols)."""
    return _libc is not None


def read(path: str) -> bytes | None:
    """The content of a small file (``/proc/<pid>/stat`` and the like), or None if it
    cannot be read."""
    if _libc is None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None
    fd = _libc.open(path.encode(), _FLAGS)
    if fd < 0:
        return None
    try:
        buf = ctypes.create_string_buffer(_BUF)
        parts = []
        while True:
            n = _libc.read(fd, buf, _BUF)
            if n <= 0:
                break
            parts.append(buf.raw[:n])
            if n < _BUF:
                break
        return None if n < 0 else b"".join(parts)
    finally:
        _libc.close(fd)


def listdir(path: str) -> list[str] | None:
    """The names in a directory (without ``.`` and ``..``), or None if it cannot be
    listed."""
    if _libc is None:
        try:
            return os.listdir(path)
        except OSError:
            return None
    d = _libc.opendir(path.encode())
    if not d:
        return None
    try:
        names = []
        while True:
            entry = _libc.readdir(d)
            if not entry:
                break
            name = ctypes.string_at(entry + _D_NAME).decode(errors="replace")
            if name not in (".", ".."):
                names.append(name)
        return names
    finally:
        _libc.closedir(d)
