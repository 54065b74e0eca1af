"""``performance_report``: distributed's API, for the local schedulers, as one offline file.

::

    with daskprofile.performance_report(filename="dask-report.html"):
        x.compute()

Everything computed in the block, through the sync, threads or processes scheduler or on
the default ``distributed`` client's cluster, is profiled (tasks, resources, cache, stacks)
and written as a self-contained HTML snapshot with the calling code, like
``distributed.performance_report``. On a cluster it also has what distributed's report
shows: where it ran (scheduler, workers, threads, memory, versions), transfers and disk
reads/writes on the task stream, the workers' memory and the bandwidth by worker and by
type. If the cluster cannot be recorded, the report says so.
"""

from __future__ import annotations

import inspect
import os
import sys
from types import FrameType, TracebackType
from typing import Any

from .export._common import PathLike

REPORT_TITLE = "Dask Performance Report"
NO_CODE = "<Code not available>"


def _frame_code(frame: FrameType | None) -> str:
    """Source around ``frame``: its function or module, else the running IPython cell."""
    if frame is None:
        return NO_CODE
    try:
        return inspect.getsource(frame)
    except (OSError, TypeError):
        pass
    try:
        from IPython import get_ipython
    except ImportError:
        return NO_CODE
    shell = get_ipython()
    cell = getattr(getattr(shell, "history_manager", None), "_i00", None)
    return cell if isinstance(cell, str) and cell else NO_CODE


def calling_code(stacklevel: int) -> str:
    """The code of the frame ``stacklevel`` levels above the caller of this function."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(max(stacklevel, 1)):
        frame = frame.f_back if frame is not None else None
    return _frame_code(frame)


def distributed_client_active() -> bool:
    """Whether a ``distributed.Client`` is the default client (without importing it)."""
    if "distributed" not in sys.modules:
        return False
    try:
        import distributed

        getattr(distributed, "default_client")()  # noqa: B009 - untyped
    except (ImportError, ValueError):
        return False
    return True


class performance_report:
    """Profile the block and write an HTML performance report (distributed's API).

    ``filename``: where to write (a local path, or a URL with ``storage_options`` for
    fsspec). ``stacklevel``: which frame's code to show as the calling code (1: the code
    with the ``with`` statement). ``mode``: ``None``/``"inline"`` inlines BokehJS (the file
    works offline); ``"cdn"`` loads it from Bokeh's CDN instead, a smaller file.
    """

    def __init__(
        self,
        filename: PathLike = "dask-report.html",
        stacklevel: int = 1,
        mode: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        if mode not in (None, "inline", "cdn"):
            raise ValueError(f"mode must be None, 'inline' or 'cdn', not {mode!r}")
        self.filename = os.fspath(filename)
        self._stacklevel = stacklevel if stacklevel > 0 else 1
        self.mode = mode
        self.storage_options = storage_options or {}
        self._profile: Any = None
        self.run: Any = None

    def __enter__(self) -> performance_report:
        from .record.profile import profile

        self._client = distributed_client_active()
        self._profile = profile(tasks=True, resources=True, cache=True, stacks=True)
        self.run = self._profile.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close(calling_code(self._stacklevel), exc_type, exc, tb)

    async def __aenter__(self) -> performance_report:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close(calling_code(self._stacklevel), exc_type, exc, tb)

    def _close(self, code: str, *exc_info: Any) -> None:
        try:
            self._profile.__exit__(*exc_info)
        finally:
            self._profile = None
        self._write(code)

    def _write(self, code: str) -> None:
        from .export.html import to_html

        notes = []
        recorded = "distributed" in self.run.meta.schedulers
        if (self._client or distributed_client_active()) and not recorded:
            notes.append(
                "A distributed Client was active but its cluster could not be recorded "
                "(see the errors below): tasks run on it are not in this report."
            )
        to_html(
            self.run,
            self.filename,
            REPORT_TITLE,
            code=code,
            notes=notes,
            resources="cdn" if self.mode == "cdn" else "inline",
            storage_options=self.storage_options,
        )
