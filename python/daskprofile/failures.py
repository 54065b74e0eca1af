"""A failed task's exception as text: its message and traceback, bounded.

Made where the task ran (a worker thread, a worker process) only for tasks that raise, so
a compute without failures pays nothing; what travels back is cut to a few KB
(:data:`MESSAGE_CHARS`, :data:`TRACEBACK_CHARS`). The leading frames of dask's (and our)
task running machinery are left out of the traceback: it starts at the user's code.
A cluster's scheduler hands us ``repr(exception)`` instead of the message:
:func:`message_from_repr` recovers it.
"""

from __future__ import annotations

import ast
import os
import traceback
from types import TracebackType

__all__ = ["EXTRA", "MESSAGE_CHARS", "TRACEBACK_CHARS", "cut", "describe", "message_from_repr"]

#: key of a failed task's ``(message, traceback)`` in ``TaskEvent.extra``
EXTRA = "exception"
#: longest message kept (characters)
MESSAGE_CHARS = 1_000
#: longest traceback text kept (characters)
TRACEBACK_CHARS = 4_000


def _package_dir(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:  # pragma: no cover - dask is a dependency
        return None
    path = getattr(module, "__file__", None)
    return os.path.dirname(path) + os.sep if path else None


#: frames in these directories that come before the user's code are left out
_MACHINERY = tuple(d for d in (_package_dir("dask"), os.path.dirname(__file__) + os.sep) if d)


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a note of
    how much was cut (the tail is longer: a traceback ends with the failing line)."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit:,} characters cut] ...\n{text[-tail:]}"


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the first frame outside dask's and daskprofile's machinery (all of it
    if every frame is inside)."""
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename.startswith(_MACHINERY):
        first = first.tb_next
    return first if first is not None else tb


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        try:
            return repr(exc)
        except Exception:
            return f"<unprintable {type(exc).__name__}>"


def describe(exc: BaseException) -> tuple[str, str]:
    """``(message, traceback)`` of an exception, each cut to its bound; never raises."""
    try:
        lines = traceback.format_exception(type(exc), exc, _user_frames(exc.__traceback__))
        trace = "".join(lines)
    except Exception:
        trace = ""
    return cut(_text(exc), MESSAGE_CHARS), cut(trace, TRACEBACK_CHARS)


def message_from_repr(text: str) -> str:
    """The message ``str(exc)`` would give, from ``repr(exc)`` (``"ValueError('x')"`` ->
    ``"x"``); ``text`` itself when it is not of that form."""
    open_at = text.find("(")
    if open_at <= 0 or not text.endswith(")"):
        return text
    try:
        args = ast.literal_eval(f"({text[open_at + 1 : -1]},)") if text[open_at + 1 : -1] else ()
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if not isinstance(args, tuple):
        return text
    if len(args) == 1:
        return str(args[0])
    return "" if not args else str(args)
