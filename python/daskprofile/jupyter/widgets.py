"""Progress bars as ipywidgets: an overall bar, a bar per task group, erred count, elapsed.

Nothing is done per task. A timer thread wakes every ``dt`` seconds (0.1 by default)
and reads dask's scheduler state: ``len(state["finished"])`` moves the overall bar (one
comm message per tick at most); every ``GROUP_PERIOD`` seconds or more, the keys finished
since the last look (a C-level set difference, O(finished tasks)) are counted into groups
by key name and the header and the group table (one ``HTML`` widget) are redrawn. The
group refresh backs off so that it takes at most ``GROUP_BUDGET`` of wall time, however
many tasks there are. Group names reach the page escaped.

Graphs sent to a ``dask.distributed`` cluster in the block are counted from the
scheduler's batches (:mod:`daskprofile.record.cluster_progress`) and shown in the same
bars, merged with the local computes by group: the timer also reads those counts, keeps
running while a cluster graph has not finished, and draws the final state once every
graph has (or when the block ends: leaving it waits a moment for the last batch).

Outside an IPython kernel, or with ``out=`` given, it is the text bar of
:mod:`daskprofile.diagnostics` (which it subclasses, so ``isinstance`` checks hold).
"""

from __future__ import annotations

import contextlib
import contextvars
import html
import sys
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import IO, Any

from dask.utils import format_time

from ..diagnostics import ProgressBar as TextProgressBar
from ..keys import GroupIndex, group_color, key_name
from ..record.cluster_progress import ClusterCounts

__all__ = ["ProgressBar", "in_kernel"]

#: group rows shown; the rest are summed into one "other groups" row
MAX_GROUPS = 12
#: the share of wall time that refreshing group bars (and the header) may take
GROUP_BUDGET = 0.05
#: the shortest period between two refreshes of the group bars and the header (s)
GROUP_PERIOD = 0.25


def in_kernel() -> bool:
    """Whether this runs in an IPython kernel, where a frontend may show widgets."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


# ---------------------------------------------------------------- counting (no widgets)
def _names(keys: Iterable[Hashable]) -> list[Any]:
    """The name part of each key (``('x-1', 0)`` -> ``'x-1'``), in C-speed loops."""
    names = [k[0] if type(k) is tuple and k else k for k in keys]
    if all(type(n) is str for n in names):
        return names
    return [n if type(n) is str else key_name(n) for n in names]


@dataclass
class _Watch:
    """One compute being watched: its scheduler state and what was counted of it."""

    dsk: Mapping[Any, Any]
    state: dict[str, Any]
    keys: list[Hashable]  # the tasks (not data) of the compute, until grouped
    counted: set[Hashable] = field(default_factory=set)
    gid: dict[Any, int] = field(default_factory=dict)  # key name -> group id
    totals_known: bool = False


class Tally:
    """Progress of the computes of one bar: task and per-group counts, erred, computes.

    ``add``/``update``/``finish`` are called under the bar's lock; ``update`` reads dask's
    live state without locking it (set operations are atomic under the GIL). Keys are
    grouped by name: one group lookup per distinct name, then C-level counting.
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

    def _gids(self, watch: _Watch, keys: Iterable[Hashable]) -> Counter[int]:
        """How many of ``keys`` fall in each group (new names are looked up once)."""
        names = _names(keys)
        gid = watch.gid
        for name, key in dict(zip(names, keys, strict=True)).items():
            if name not in gid:
                gid[name] = self.index.index(key, watch.dsk.get(key))
        missing = len(self.index.groups) - len(self.group_total)
        self.group_total.extend([0] * missing)
        self.group_done.extend([0] * missing)
        return Counter(map(gid.__getitem__, names))

    def _count_totals(self, watch: _Watch) -> None:
        for g, n in self._gids(watch, watch.keys).items():
            self.group_total[g] += n
        watch.keys = []
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
            new = watch.state.get("finished", set()) - watch.counted
            if not new:
                continue
            watch.counted |= new
            keys = list(new)
            for g, n in self._gids(watch, keys).items():
                self.group_done[g] += n
            self.done += len(keys)

    def finish(self, ident: int, failed: bool) -> None:
        """A compute ended: count it completely and forget its state."""
        self.update()
        self.watches.pop(ident, None)
        if failed:
            self.erred += 1

    def rows(
        self, limit: int = MAX_GROUPS, extra: Mapping[str, tuple[int, int]] | None = None
    ) -> list[tuple[str, int, int]]:
        """(group, done, total), largest groups first; the rest summed as one row.
        ``extra``: ``{group: (done, total)}`` counted elsewhere (a cluster), added in."""
        merged = {
            g: (d, t)
            for g, d, t in zip(self.index.groups, self.group_done, self.group_total, strict=False)
        }
        for g, (d, t) in (extra or {}).items():
            d0, t0 = merged.get(g, (0, 0))
            merged[g] = (d0 + d, t0 + t)
        rows = sorted(((g, d, t) for g, (d, t) in merged.items()), key=lambda r: (-r[2], r[0]))
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

    def show(
        self, header: str | None, done: int, total: int, style: str, groups: str | None
    ) -> None:
        with self.bar.hold_sync():
            self.bar.max = max(total, 1)
            self.bar.value = min(done, max(total, 1))
            self.bar.bar_style = style
        if header is not None:
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
        self._display_lock = threading.Lock()
        self._active: dict[int, float] = {}  # id(dask state) -> start
        self._first_start: float | None = None
        self._wbar_timer: threading.Thread | None = None
        self._stop = threading.Event()  # the running timer's (each timer has its own)
        self._group_due = 0.0
        self._cpu: dict[str, float] = {}

    @property
    def own_cpu(self) -> float:
        """CPU seconds this bar spent (its timer thread and its dask callbacks)."""
        return sum(self._cpu.values())

    @contextlib.contextmanager
    def _metered(self, where: str) -> Iterator[None]:
        """Add the CPU time of the block to ``own_cpu`` (one counter per thread role)."""
        start = time.thread_time()
        try:
            yield
        finally:
            self._cpu[where] = self._cpu.get(where, 0.0) + time.thread_time() - start

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
        with self._metered("compute"), self._lock:
            if self._first_start is None:
                self._first_start = perf_counter()
            if self._view is None:
                self._view = _View()

    def _start_state(self, dsk: Any, state: dict[str, Any]) -> None:
        if self.text:
            super()._start_state(dsk, state)
            return
        with self._metered("compute"):
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
        with self._metered("compute"):
            with self._lock:
                self._tally.finish(id(state), errored)
                self._active.pop(id(state), None)
                last = not self._busy()
            if last:
                self._stop_timer()
            self.last_duration = self._elapsed()
            if self._shown or self.last_duration >= self._minimum:
                self._display()
                self._refresh(final=last)

    # ------------------------------------------------------------ cluster graphs
    def _cluster_graph(self) -> None:
        """A graph was sent to a cluster (submitting thread): show the widget, tick."""
        if self.text:
            super()._cluster_graph()
            return
        with self._metered("compute"):
            with self._lock:
                if self._first_start is None:
                    self._first_start = perf_counter()
                if self._view is None:
                    self._view = _View()
            if self._minimum <= 0:
                self._display()
            self._ensure_timer()

    def _cluster_done(self, finished: bool) -> None:
        """The block ends: the final state (``finished``: every cluster graph ended)."""
        if self.text:
            super()._cluster_done(finished)
            return
        with self._metered("compute"):
            with self._lock:
                idle = not self._active  # (a compute of another thread may still run)
            if idle:
                self._stop_timer()
            if self._view is None:
                return
            self.last_duration = self._elapsed()
            if idle and (self._shown or self.last_duration >= self._minimum):
                self._display()
                self._refresh(final=True, left=not finished)

    def _busy(self) -> bool:
        """A local compute runs or a cluster graph has not finished."""
        return bool(self._active) or self._cluster.busy

    def _cluster_counts(self) -> ClusterCounts:
        try:
            return self._cluster.counts()
        except Exception:  # never let the cluster part break the bar
            return ClusterCounts()

    # ------------------------------------------------------------ timer
    def _ensure_timer(self) -> None:
        with self._lock:
            if self._wbar_timer is not None and self._wbar_timer.is_alive():
                return
            stop = self._stop = threading.Event()
            context = contextvars.copy_context()  # display/output go to the cell computing
            self._wbar_timer = threading.Thread(
                target=context.run,
                args=(self._tick, stop),
                name="daskprofile-progress",
                daemon=True,
            )
            self._wbar_timer.start()

    def _stop_timer(self) -> None:
        with self._lock:
            self._stop.set()
            timer, self._wbar_timer = self._wbar_timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.join()

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(self._dt):
            if self._elapsed() >= self._minimum:
                with self._metered("timer"):
                    self._display()
                    self._refresh(final=False)
            if self._end_when_idle(stop):
                return

    def _end_when_idle(self, stop: threading.Event) -> bool:
        """Nothing left running (the last cluster graph ended between local computes):
        this timer stops after drawing the final state. True if it did."""
        with self._lock:
            if (
                self._wbar_timer is not threading.current_thread()
                or self._busy()
                or self._leaving  # the block's end draws the final state
            ):
                return False
            self._wbar_timer = None
            stop.set()
        if self._shown or self._elapsed() >= self._minimum:
            with self._metered("timer"):
                self._display()
                self._refresh(final=True)
        return True

    def _elapsed(self) -> float:
        return perf_counter() - (self._first_start or perf_counter())

    # ------------------------------------------------------------ drawing
    def _display(self) -> None:
        with self._display_lock:  # the timer and the scheduling thread may both get here
            if self._shown or self._view is None:
                return
            self._shown = True
        from IPython.display import display

        display(self._view.box)  # type: ignore[no-untyped-call]

    def _refresh(self, final: bool, left: bool = False) -> None:
        """Draw the current counts; group rows only when due (or on the final draw).
        ``left``: the block ended with cluster graphs still running (drawn as stopped)."""
        view = self._view
        if view is None:
            return
        cluster = self._cluster_counts()
        cluster_done, cluster_total = cluster.tasks()
        now = perf_counter()
        with self._lock:
            groups = None
            if final or now >= self._group_due:
                self._tally.update()
                cost = perf_counter() - now
                self._group_due = now + max(self._dt, GROUP_PERIOD, cost / GROUP_BUDGET)
                groups = groups_html(self._tally.rows(extra=cluster.groups()))
            t = self._tally
            counts = {
                "done": t.overall() + cluster_done,
                "total": t.total + cluster_total,
                "erred": t.erred + cluster.erred,
            }
            computes = t.computes + cluster.graphs
        if not final:
            style, word = "info", "Running:"
        elif counts["erred"]:
            style, word = "danger", "Failed after"
        elif left:
            style, word = "warning", "Stopped at"
        else:
            style, word = "success", "Completed"
        text = None
        if groups is not None:  # the header (elapsed time) changes with the group bars
            text = header_text(**counts, computes=computes, elapsed=self._elapsed(), end=word)
        view.show(text, counts["done"], counts["total"], style, groups)
