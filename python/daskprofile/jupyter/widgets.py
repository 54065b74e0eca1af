"""Progress bars as ipywidgets: an overall bar, a bar per task group, erred count, elapsed.

Nothing is done per task. A timer thread wakes every ``dt`` seconds (0.1 by default),
reads dask's scheduler state (``len(state["finished"])`` for the overall bar; the keys
finished since the previous tick for the group bars) and updates two widgets: one
``IntProgress`` and one ``HTML`` table, so at most ~2 comm messages per tick whatever
the number of tasks or groups. The work of a tick is O(finished tasks) in C (a set copy
and difference); when it gets long, group bars are refreshed less often than the
overall bar, so the timer never takes more than ~10% of a core.

Outside an IPython kernel, or with ``out=`` given, it is the text bar of
:mod:`daskprofile.diagnostics` (which it subclasses, so ``isinstance`` checks hold).
"""

from __future__ import annotations

import contextvars
import html
import sys
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import IO, Any

from dask.utils import format_time

from ..diagnostics import ProgressBar as TextProgressBar
from ..keys import GroupIndex, group_color

__all__ = ["ProgressBar", "in_kernel"]

#: group rows shown; the rest are summed into one "other groups" row
MAX_GROUPS = 12
#: the share of the timer thread's time that group refreshes may take
GROUP_BUDGET = 0.1


def in_kernel() -> bool:
    """Whether this runs in an IPython kernel, where a frontend may show widgets."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


# ---------------------------------------------------------------- counting (no widgets)
@dataclass
class _Watch:
    """One compute being watched: its scheduler state and what was counted of it."""

    dsk: Mapping[Any, Any]
    state: dict[str, Any]
    keys: list[Hashable]  # the tasks (not data) of the compute
    counted: set[Hashable] = field(default_factory=set)
    totals_known: bool = False


class Tally:
    """Progress of the computes of one bar: task and per-group counts, erred, computes.

    ``add``/``update``/``finish`` are called under the bar's lock; ``update`` reads dask's
    live state without locking it (set copies are atomic under the GIL).
    """

    def __init__(self) -> None:
        self.index = GroupIndex()
        self.group_done: list[int] = []
        self.group_total: list[int] = []
        self.done = 0
        self.total = 0
        self.erred = 0
        self.computes = 0
        self.watches: dict[int, _Watch] = {}

    def add(self, ident: int, dsk: Mapping[Any, Any], state: dict[str, Any]) -> None:
        """A compute starts: remember its tasks (counted into groups by the next update)."""
        keys = [*state.get("waiting", ()), *state.get("ready", ())]
        self.watches[ident] = _Watch(dsk, state, keys)
        self.total += len(keys)
        self.computes += 1

    def _group(self, key: Hashable, dsk: Mapping[Any, Any]) -> int:
        gid = self.index.index(key, dsk.get(key))
        while gid >= len(self.group_total):
            self.group_total.append(0)
            self.group_done.append(0)
        return gid

    def _count_totals(self, watch: _Watch) -> None:
        for key in watch.keys:
            self.group_total[self._group(key, watch.dsk)] += 1
        watch.totals_known = True

    def overall(self) -> int:
        """Tasks finished, all computes together (cheap: one len per compute)."""
        running = sum(
            len(w.state.get("finished", ())) - len(w.counted) for w in self.watches.values()
        )
        return self.done + max(running, 0)

    def update(self) -> None:
        """Count into groups the tasks finished since the last update."""
        for watch in list(self.watches.values()):
            if not watch.totals_known:
                self._count_totals(watch)
            finished = set(watch.state.get("finished", ()))
            new = finished - watch.counted
            for key in new:
                self.group_done[self._group(key, watch.dsk)] += 1
            watch.counted = finished
            self.done += len(new)

    def finish(self, ident: int, failed: bool) -> None:
        """A compute ended: count it completely and forget its state."""
        self.update()
        self.watches.pop(ident, None)
        if failed:
            self.erred += 1

    def rows(self, limit: int = MAX_GROUPS) -> list[tuple[str, int, int]]:
        """(group, done, total), largest groups first; the rest summed as one row."""
        rows = sorted(
            zip(self.index.groups, self.group_done, self.group_total, strict=False),
            key=lambda r: (-r[2], r[0]),
        )
        if len(rows) <= limit:
            return rows
        head, tail = rows[: limit - 1], rows[limit - 1 :]
        other = (f"{len(tail)} other groups", sum(r[1] for r in tail), sum(r[2] for r in tail))
        return [*head, other]


# ---------------------------------------------------------------- rendering
_STYLE = (
    "<style>.dp-pb{font-size:12px;border-collapse:collapse}.dp-pb td{padding:1px 6px}"
    ".dp-pb .dp-g{max-width:22em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}"
    ".dp-pb .dp-bar{width:16em;height:10px;background:var(--jp-layout-color3,#e0e0e0);"
    "border-radius:2px}.dp-pb .dp-fill{height:100%;border-radius:2px}"
    ".dp-pb .dp-n{text-align:right;font-variant-numeric:tabular-nums}</style>"
)


def groups_html(rows: list[tuple[str, int, int]]) -> str:
    """The per-group bars as an HTML table; group names are escaped text."""
    lines = []
    for group, done, total in rows:
        pct = 100.0 * done / total if total else 0.0
        lines.append(
            f'<tr><td class="dp-g" title="{html.escape(group)}">{html.escape(group)}</td>'
            f'<td><div class="dp-bar"><div class="dp-fill" style="width:{pct:.1f}%;'
            f'background:{group_color(group)}"></div></div></td>'
            f'<td class="dp-n">{done:,} / {total:,}</td></tr>'
        )
    return f'{_STYLE}<table class="dp-pb">{"".join(lines)}</table>' if lines else ""


def header_text(
    *, done: int, total: int, erred: int, computes: int, elapsed: float, end: str
) -> str:
    """``"Completed 10 / 20 tasks · 1 compute · erred 0 · 1.2s"`` (plain text)."""
    plural = "s" if computes != 1 else ""
    return (
        f"{end} {done:,} / {total:,} tasks · {computes} compute{plural} · "
        f"erred {erred} · {format_time(elapsed)}"
    )


class _View:
    """The widgets; every update is one batch of trait changes per widget."""

    def __init__(self) -> None:
        import ipywidgets as w

        self.header = w.HTML(value="Starting…")
        self.bar = w.IntProgress(value=0, min=0, max=1, bar_style="info")
        self.bar.layout.width = "32em"
        self.groups = w.HTML(value="")
        self.box = w.VBox([self.header, self.bar, self.groups])

    def show(self, header: str, done: int, total: int, style: str, groups: str | None) -> None:
        with self.bar.hold_sync():
            self.bar.max = max(total, 1)
            self.bar.value = min(done, max(total, 1))
            self.bar.bar_style = style
        self.header.value = html.escape(header)
        if groups is not None:
            self.groups.value = groups


# ---------------------------------------------------------------- the callback
class ProgressBar(TextProgressBar):
    """Progress of the computes in a block, as a widget in a notebook.

    Same arguments as dask's ``ProgressBar``: ``minimum`` seconds before the bar is
    shown, ``dt`` between updates (at most ~10 a second by default); ``width`` and ``out``
    apply to the text bar, used outside a kernel or when ``out`` is given. One widget
    shows every compute of the block (``with`` or ``register()``), with its totals.
    """

    def __init__(
        self, minimum: float = 0, width: int = 40, dt: float = 0.1, out: IO[str] | None = None
    ) -> None:
        super().__init__(minimum=minimum, width=width, dt=dt, out=out)
        self.text = out is not None or not in_kernel()
        self._lock = threading.Lock()
        self._tally = Tally()
        self._view: _View | None = None
        self._shown = False
        self._active: dict[int, float] = {}  # id(dask state) -> start
        self._first_start: float | None = None
        self._wbar_timer: threading.Thread | None = None
        self._stop = threading.Event()
        self._group_due = 0.0

    @property
    def tally(self) -> Tally:
        """The counts shown (read-only use)."""
        return self._tally

    @property
    def widget(self) -> Any:
        """The ipywidgets ``VBox`` (None until a compute started)."""
        return self._view.box if self._view is not None else None

    # ------------------------------------------------------------ dask callbacks
    def _start(self, dsk: Any) -> None:
        if self.text:
            super()._start(dsk)
            return
        with self._lock:
            if self._first_start is None:
                self._first_start = perf_counter()
            if self._view is None:
                self._view = _View()

    def _start_state(self, dsk: Any, state: dict[str, Any]) -> None:
        if self.text:
            super()._start_state(dsk, state)
            return
        with self._lock:
            self._tally.add(id(state), dsk, state)
            self._active[id(state)] = perf_counter()
        if self._minimum <= 0:
            self._display()
        self._ensure_timer()

    def _finish(self, dsk: Any, state: dict[str, Any], errored: bool) -> None:
        if self.text:
            super()._finish(dsk, state, errored)
            return
        with self._lock:
            self._tally.finish(id(state), errored)
            self._active.pop(id(state), None)
            last = not self._active
        if last:
            self._stop_timer()
        self.last_duration = self._elapsed()
        if self._shown or self.last_duration >= self._minimum:
            self._display()
            self._refresh(final=last)

    # ------------------------------------------------------------ timer
    def _ensure_timer(self) -> None:
        if self._wbar_timer is not None and self._wbar_timer.is_alive():
            return
        self._stop.clear()
        context = contextvars.copy_context()  # display/output go to the cell that computes
        self._wbar_timer = threading.Thread(
            target=context.run, args=(self._tick,), name="daskprofile-progress", daemon=True
        )
        self._wbar_timer.start()

    def _stop_timer(self) -> None:
        self._stop.set()
        timer, self._wbar_timer = self._wbar_timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.join()

    def _tick(self) -> None:
        while not self._stop.wait(self._dt):
            if self._elapsed() >= self._minimum:
                self._display()
                self._refresh(final=False)

    def _elapsed(self) -> float:
        return perf_counter() - (self._first_start or perf_counter())

    # ------------------------------------------------------------ drawing
    def _display(self) -> None:
        if self._shown or self._view is None:
            return
        self._shown = True
        from IPython.display import display

        display(self._view.box)  # type: ignore[no-untyped-call]

    def _refresh(self, final: bool) -> None:
        """Draw the current counts; group rows only when due (or on the final draw)."""
        view = self._view
        if view is None:
            return
        now = perf_counter()
        with self._lock:
            groups = None
            if final or now >= self._group_due:
                self._tally.update()
                cost = perf_counter() - now
                self._group_due = now + max(self._dt, cost / GROUP_BUDGET)
                groups = groups_html(self._tally.rows())
            t = self._tally
            counts = {"done": t.overall(), "total": t.total, "erred": t.erred}
            computes = t.computes
        if final:
            style, word = ("danger", "Failed after") if t.erred else ("success", "Completed")
        else:
            style, word = "info", "Running:"
        text = header_text(**counts, computes=computes, elapsed=self._elapsed(), end=word)
        view.show(text, counts["done"], counts["total"], style, groups)
