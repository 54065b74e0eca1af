"""Shared pieces of collectors: bounded typed columns and the collector base class.

Columns are ``array.array`` while recording (cheap appends from the scheduling thread)
and numpy arrays once frozen. A cap on the number of rows drops the oldest rows in chunks
and counts them (``dropped``): memory stays bounded and nothing is lost silently.
Readers on other threads take consistent copies with :meth:`Columns.since`.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..hooks import Listener

#: array typecodes -> numpy dtypes
_DTYPES = {
    "d": np.float64,
    "f": np.float32,
    "B": np.uint8,
    "H": np.uint16,
    "I": np.uint32,
    "Q": np.uint64,
    "q": np.int64,
}


class Columns:
    """Named typed columns of equal length, appended row-wise, capped at ``max_rows``.

    Row indices are absolute (they keep counting when old rows are dropped), so a
    reader's cursor stays meaningful: ``since(cursor)`` returns the rows after it.
    """

    def __init__(self, spec: Mapping[str, str], max_rows: int | None = None) -> None:
        self.spec = dict(spec)
        self.cols: dict[str, array[Any]] = {name: array(code) for name, code in spec.items()}
        self.lock = threading.Lock()
        self.max_rows = max_rows
        #: rows kept before dropping (``max_rows`` or unbounded)
        self.cap = sys.maxsize if max_rows is None else max_rows
        self.first = 0  # absolute index of the oldest row kept
        self.n = 0  # absolute index one past the newest complete row
        self.on_drop: Callable[[int], None] | None = None

    @property
    def dropped(self) -> int:
        """How many of the oldest rows were dropped to stay under the cap."""
        return self.first

    def __len__(self) -> int:
        return self.n - self.first

    def commit(self) -> None:
        """Mark the row just appended (under ``lock``) as complete; drop old rows if full."""
        self.n += 1
        if self.n - self.first > self.cap:
            self.make_room()

    def make_room(self) -> None:
        """Drop the oldest eighth of the rows, or all beyond ``cap`` if more (call under
        ``lock`` when over ``cap``)."""
        self._drop(max(1, self.cap // 8, self.n - self.first - self.cap))

    def repair(self) -> None:
        """Drop a row left half-written (an interrupt between two column appends)."""
        with self.lock:
            keep = self.n - self.first
            for col in self.cols.values():
                if len(col) > keep:
                    del col[keep:]

    def _drop(self, k: int) -> None:
        k = min(k, self.n - self.first)
        if self.on_drop is not None:
            self.on_drop(k)
        for col in self.cols.values():
            del col[:k]
        self.first += k

    def since(self, cursor: int = 0) -> tuple[dict[str, np.ndarray], int]:
        """Copies of the rows from absolute index ``cursor`` on, and the next cursor."""
        with self.lock:
            return self.since_locked(cursor)

    def since_locked(self, cursor: int = 0) -> tuple[dict[str, np.ndarray], int]:
        """:meth:`since` for a caller that holds ``lock``."""
        lo = max(cursor, self.first) - self.first
        hi = self.n - self.first
        out = {name: _to_numpy(col, lo, hi) for name, col in self.cols.items()}
        return out, self.n

    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of all rows kept."""
        return self.since(0)[0]


def _to_numpy(col: array[Any], lo: int, hi: int) -> np.ndarray:
    dtype = _DTYPES[col.typecode]
    if hi <= lo:
        return np.empty(0, dtype=dtype)
    view = memoryview(col)[lo:hi]
    out: np.ndarray = np.frombuffer(view, dtype=dtype).copy()
    view.release()
    return out


class Collector(Listener):
    """Base of the scheduler-driven collectors: a name and an error sink.

    A collector is registered with :mod:`daskprofile.hooks` as a listener, which guards
    every call; when one raises it is switched off and ``errors`` receives the record.
    """

    name = "collector"

    def __init__(self) -> None:
        self.errors: list[dict[str, str]] = []
        self.failed = False

    def on_listener_error(self, exc: BaseException) -> None:
        self.failed = True
        self.errors.append({"collector": self.name, "error": repr(exc)})

    def snapshot(self) -> dict[str, Any]:
        """The collector's data so far, as plain values and numpy arrays."""
        raise NotImplementedError
