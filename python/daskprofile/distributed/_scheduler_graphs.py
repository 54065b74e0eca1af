"""Scheduler side when the workers measure the task rows: number graphs, nothing per task.

:class:`GraphProbe` is the scheduler plugin used when every worker runs daskprofile's
worker plugin (the usual case): the workers make the task rows (:mod:`._worker_rows`), so
this plugin has no ``transition`` hook at all (distributed calls the base class's no-op,
as for any plugin) and its per-task cost is that of reading a graph once, by C-level
``map``, in ``update_graph``. Per batch it reads per ``TaskGroup``, never per task:

* ``graphs``: each recorded graph numbered (its *compute*), with its tasks per group
  (``totals``), the keys of its tasks still to run (``run``: the client routes the
  workers' rows by them and counts what is left), its output keys' labels (``keys``) and
  spans, as :class:`~._scheduler.SchedulerProbe` sends them;
* ``quiet``: computes none of whose task groups has a task waiting, queued or processing
  any more, for at least :data:`QUIET_HOLD` seconds: tasks that never ran (released, or
  failed with a dependency) make no row, and the client stops waiting for them then;
* ``cache``: bytes in memory per group, from ``TaskGroup.nbytes_total``;
* ``worker_info``: each worker present, once.

Message: as the scheduler probe's (``tasks`` empty, ``pending`` empty), plus
``"mode": "graphs"``, ``run`` in each graph and ``quiet``; a graph's ``edges`` are
positions in its ``run`` followed by its ``edge_extra``.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import is_, not_
from time import monotonic
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from ._scheduler import (
    _DONE,
    _STATE,
    _TASK_GROUP,
    SchedulerProbe,
    _graph_keys,
    graph_edges,
)

__all__ = ["QUIET_HOLD", "GraphProbe"]

#: seconds a compute's task groups stay idle before it is called quiet: the workers' rows
#: of its last tasks (sent every ``flush``) pass the scheduler first
QUIET_HOLD = 0.6
#: task states of a group that still has work to do
_BUSY = ("waiting", "queued", "processing", "no-worker")


class GraphProbe(SchedulerProbe):
    """Numbers a run's graphs and follows their task groups; the workers make the rows."""

    transition = SchedulerPlugin.transition  # type: ignore[assignment]  # nothing per task

    def _reset(self) -> None:
        super()._reset()
        self._active: dict[int, tuple[set[Any], float | None]] = {}  # compute -> groups
        self._task_groups: dict[str, tuple[Any, int]] = {}  # name -> (TaskGroup, group id)
        self._described: set[str] = set()  # workers whose description was sent

    def _note_graph(self, scheduler: Any, client: str, tasks: list[Any], keys: Any) -> None:
        states = list(map(scheduler.tasks.get, tasks))
        if any(map(is_, states, repeat(None))):  # not expected (C-level: no __eq__ calls)
            tasks = list(compress(tasks, states))
            states = list(filter(None, states))
        gids = self._group_ids(states)
        finished = list(map(_DONE.__contains__, map(_STATE, states)))
        to_run, running = tasks, states
        if any(finished):
            to_run = list(compress(tasks, map(not_, finished)))
            running = list(compress(states, map(not_, finished)))
        self.computes += 1
        number = self.computes
        groups = set(map(_TASK_GROUP, states))
        by_name = self._by_task_group
        for tg in groups:
            self._task_groups[tg.name] = (tg, by_name[tg.name])
        if to_run:
            self._active[number] = (groups, None)
        if isinstance(gids, int):
            totals = [[gids, len(tasks)]] if tasks else []
        else:
            counts: dict[int, int] = {}
            for gid in gids:
                counts[gid] = counts.get(gid, 0) + 1
            totals = [[gid, n] for gid, n in sorted(counts.items())]
        graph = {"compute": number, "client": client, "keys": _graph_keys(keys)}
        spans = self._graph_spans.pop(number, None)
        if spans:  # [[group id, span names]]
            graph["spans"] = [[by_name[n], names] for n, names in spans if n in by_name]
        edges = graph_edges(to_run, running)
        if edges is not None:  # positions in ``run``, then in ``edge_extra``
            graph |= edges
        self._graphs.append(graph | {"totals": totals, "run": to_run})

    def _extras(self) -> dict[str, Any]:
        self._describe_workers()
        quiet = self._quiet()
        return {"quiet": quiet} if quiet else {}

    def _describe_workers(self) -> None:
        """Name, host, pid, threads and memory limit of the workers new since the last
        batch (the rows come without them)."""
        if self.scheduler is None:
            return
        described = self._described
        for address in self.scheduler.workers:  # (a SortedDict: its key views are slow)
            if address not in described:
                described.add(address)
                self._worker_info[address] = self._describe_worker(address)

    def _quiet(self) -> list[int]:
        """Computes whose groups have had nothing to do for ``QUIET_HOLD`` s (forgotten)."""
        now, out = monotonic(), []
        for number, (groups, since) in list(self._active.items()):
            busy = any(tg.states.get(state) for tg in groups for state in _BUSY)
            if busy:
                if since is not None:
                    self._active[number] = (groups, None)
            elif since is None:
                self._active[number] = (groups, now)
            elif now - since >= QUIET_HOLD:
                del self._active[number]
                out.append(number)
        return out

    def _cache_rows(self) -> dict[str, list[Any]]:
        """Bytes in memory per group, from the ``TaskGroup``s of the recorded graphs."""
        if self.record_cache and self.scheduler is not None:
            occupancy = [0] * len(self._occupancy)
            current = self.scheduler.task_groups
            for name, (tg, gid) in list(self._task_groups.items()):
                if current.get(name) is not tg:  # all its tasks forgotten
                    del self._task_groups[name]
                    continue
                occupancy[gid] += int(tg.nbytes_total)
            self._occupancy = occupancy
        return super()._cache_rows()

    def batch(self, force: bool = False) -> dict[str, Any] | None:
        msg = super().batch(force)
        if msg is not None:
            msg["mode"] = "graphs"
        return msg

    def _switch_off(self) -> None:
        super()._switch_off()
        self._active, self._task_groups = {}, {}
