"""The exceptions table: one row per task that raised, with its message and traceback.

Filled by the task collector from the rows it records (local schedulers: the text made
where the task ran, :mod:`daskprofile.failures`; clusters: the scheduler's
``exception_text``/``traceback_text``). Bounded: the first :data:`MAX_ROWS` failures of a
run are kept (the first is usually the cause, later ones its echoes), the others counted
in ``dropped``; texts are cut to a few KB each. Plain lists: it is small, and saved as JSON.
"""

from __future__ import annotations

import threading
from typing import Any

from ..failures import MESSAGE_CHARS, TRACEBACK_CHARS, cut

__all__ = ["COLUMNS", "MAX_ROWS", "ExceptionTable", "empty"]

#: columns of the table (``time``: perf_counter seconds the task stopped; ``span``: the
#: span's names or None)
COLUMNS = (
    "key",
    "group",
    "worker",
    "time",
    "type",
    "message",
    "traceback",
    "compute",
    "span",
)
#: failures kept per run
MAX_ROWS = 1_000


def empty() -> dict[str, Any]:
    """A table without rows."""
    table: dict[str, Any] = {name: [] for name in COLUMNS}
    table["dropped"] = 0
    return table


class ExceptionTable:
    """Rows of failed tasks (see the module docstring); thread-safe appends."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows
        self.table = empty()
        self.lock = threading.Lock()

    def add(  # noqa: PLR0917 - one row's columns
        self,
        key: str,
        group: str,
        worker: str,
        time: float,
        kind: str,
        message: str,
        trace: str,
        compute: int,
        span: tuple[str, ...] | None = None,
    ) -> None:
        """One failed task (``kind``: the exception's type name); texts are cut here too."""
        row = (
            key,
            group,
            worker,
            float(time),
            kind,
            cut(message, MESSAGE_CHARS),
            cut(trace, TRACEBACK_CHARS),
            int(compute),
            list(span) if span else None,
        )
        table = self.table
        with self.lock:
            if len(table["key"]) >= self.max_rows:
                table["dropped"] += 1
                return
            for name, value in zip(COLUMNS, row, strict=True):
                table[name].append(value)

    def __len__(self) -> int:
        return len(self.table["key"])

    def snapshot(self) -> dict[str, Any]:
        """A copy of the rows and the count of dropped ones."""
        with self.lock:
            out = {name: list(self.table[name]) for name in COLUMNS}
            out["dropped"] = self.table["dropped"]
        return out
