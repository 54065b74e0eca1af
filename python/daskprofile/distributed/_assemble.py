"""Client side: the task rows the workers measured, joined to the graphs the scheduler numbered.

When the workers make the task rows (:mod:`._worker_rows`) the scheduler's plugin
(:mod:`._scheduler_graphs`) sends only graphs: for each, its number (*compute*) and the
keys of its tasks still to run. A :class:`RowAssembler` joins the two streams here, in the
client, and hands the collector batches in the scheduler probe's format (task rows with
their compute, ``pending`` per compute, ``graphs``, ``cache``, ``exceptions``), so what
reads those batches does not know which side measured the rows.

* A row goes to the latest compute waiting for its key; every compute waiting for that
  key counts it off (a task shared by two graphs finishes both). A key that ran already
  (a result lost with its worker and computed again) keeps its compute.
* Rows may come before their graph (workers and scheduler send on their own timers):
  they wait, at most :data:`HOLD` seconds; then they are dropped, or, when every client
  is recorded, kept as compute 0 (tasks of graphs submitted before recording began).
* A compute is done when all its tasks have a row, or when the scheduler calls it quiet
  (its task groups idle: the tasks left never ran, released or failed with a dependency).
* Tasks failed with ``KilledWorker`` (their workers died) make no worker row: the
  scheduler's ``members`` events name them, and they get a row there.

Group and worker ids of the batches are the collector's own lookups; the scheduler's and
each worker process's group ids are translated by name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from time import monotonic
from typing import Any

from ..keys import key_group, key_label
from ._common import exception_name, killed_message, worker_label
from ._tables import Lookup

__all__ = ["HOLD", "RowAssembler"]

#: seconds a row waits for its graph
HOLD = 5.0
#: rows waiting for their graph, at most (the oldest go first)
MAX_HELD = 500_000
#: keys remembered after their row (re-runs and late rows keep their compute), at most
MAX_RAN = 1_000_000
#: failed tasks' texts waiting for their row, at most
MAX_TEXTS = 10_000
TASK_FIELDS = ("key", "group", "worker", "submit", "start", "stop", "error", "compute")


def as_label(key: Any) -> str:
    """The label of a key as it came through distributed's messages (tuples may arrive as
    lists)."""
    if type(key) is list:
        key = _as_tuple(key)
    return key_label(key)


def _as_tuple(value: Any) -> Any:
    return tuple(_as_tuple(v) for v in value) if type(value) is list else value


class RowAssembler:
    """Joins worker rows and scheduler graphs into the scheduler probe's batch format."""

    def __init__(self, groups: Lookup, workers: Lookup, keep_unseen: bool) -> None:
        self.groups = groups  # the collector's: ids of the batches made here
        self.workers = workers
        self.keep_unseen = keep_unseen
        self.computes = 0
        self.dropped = 0
        self._scheduler_groups: list[str] = []  # the scheduler's group names, by its ids
        self._process_groups: dict[str, list[str]] = {}  # worker process -> its names
        self._owner: dict[str, list[int]] = {}  # key -> computes waiting for its row
        self._keys_of: dict[int, list[str]] = {}  # compute -> its keys still waiting
        self._left: dict[int, int] = {}
        self._ran: dict[str, int] = {}  # key -> compute of its row
        self._held: dict[str, tuple[float, tuple[Any, ...]]] = {}  # key -> (since, row)
        self._worker_drops: dict[str, int] = {}  # worker process -> rows it dropped
        self._texts: dict[str, Any] = {}  # failed tasks' texts until their row is made

    # ------------------------------------------------------------ the scheduler
    def scheduler(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """A graph-mode scheduler batch as a full one: graphs translated and numbered here,
        the waiting rows of their keys, cache rows, ``KilledWorker`` rows."""
        self._scheduler_groups.extend(msg.get("groups") or ())
        names = self._scheduler_groups
        out = _empty(self)
        out["worker_info"] = dict(msg.get("worker_info") or {})
        out["graphs"] = [self._graph(graph, names, out) for graph in msg.get("graphs") or ()]
        for number in msg.get("quiet") or ():
            self._quiet(int(number), out)
        cache = msg.get("cache") or {}
        out["cache"] = {
            "time": list(cache.get("time") or ()),
            "group": [self.groups.id(names[g]) for g in cache.get("group") or ()],
            "metric": list(cache.get("metric") or ()),
        }
        for member in msg.get("members") or ():
            if member.get("event") == "left" and member.get("killed"):
                self._killed(member, out)
        self.computes = max(self.computes, int(msg.get("computes") or 0))
        self._expire(out)
        return _finish(self, out)

    def _graph(self, graph: Mapping[str, Any], names: list[str], out: dict[str, Any]) -> Any:
        number = int(graph["compute"])
        keys = [as_label(k) for k in graph.get("run") or ()]
        owner = self._owner
        for key in keys:
            owner.setdefault(key, []).append(number)
        self._left[number] = len(keys)
        out["pending"][number] = len(keys)
        if keys:
            self._keys_of[number] = keys
        held = self._held
        if held:  # rows that came before their graph
            for key in [k for k in keys if k in held]:
                self._route(key, held.pop(key)[1], out)
        translated = {k: v for k, v in graph.items() if k not in ("run", "edge_extra")}
        if graph.get("edges"):  # positions in ``run``, then in ``edge_extra``: their labels
            translated["edge_keys"] = keys + [as_label(k) for k in graph.get("edge_extra") or ()]
        translated["totals"] = [[self.groups.id(names[g]), n] for g, n in graph["totals"]]
        if graph.get("spans"):
            translated["spans"] = [[self.groups.id(names[g]), s] for g, s in graph["spans"]]
        return translated

    def _quiet(self, number: int, out: dict[str, Any]) -> None:
        """Compute ``number``'s tasks without a row will not make one: it is done."""
        if number not in self._left:
            return
        for key in self._keys_of.pop(number, ()):
            waiting = self._owner.get(key)
            if waiting is not None and number in waiting:
                waiting.remove(number)
                if not waiting:
                    del self._owner[key]
                self._remember(key, number)  # a late row still finds its compute
        del self._left[number]
        out["pending"][number] = 0

    def _killed(self, member: Mapping[str, Any], out: dict[str, Any]) -> None:
        """Rows of the tasks failed with ``KilledWorker`` when ``member`` left."""
        address, t = str(member.get("address")), float(member.get("time") or 0.0)
        worker = self.workers.id(worker_label(address, 0))
        for key in member["killed"]:
            text = killed_message(key, address)
            row = (self.groups.id(key_group(key)), worker, t, t, t, exception_name(text))
            self._texts[key] = [text, ""]
            self._route(key, row, out)

    # ------------------------------------------------------------ the workers
    def worker(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """A worker process's rows (``rows``, ``row_groups``, ``row_texts``) as a batch."""
        src = str(msg["src"])
        names = self._process_groups.setdefault(src, [])
        names.extend(msg.get("row_groups") or ())
        out = _empty(self)
        for key, text in (msg.get("row_texts") or {}).items():
            _bounded(self._texts, key, text, MAX_TEXTS)
        gid = [self.groups.id(name) for name in names]
        for address, rows in (msg.get("rows") or {}).items():
            labels = {n: self.workers.id(worker_label(address, n)) for n in set(rows["thread"])}
            for key, g, n, submit, start, stop, error in zip(
                rows["key"],
                rows["group"],
                rows["thread"],
                rows["submit"],
                rows["start"],
                rows["stop"],
                rows["error"],
                strict=True,
            ):
                arrived = start if submit is None else submit
                row = (gid[g], labels[n], arrived, start, stop, error)
                self._route(key, row, out)
        self.dropped += int(msg.get("rows_dropped") or 0) - self._worker_drops.get(src, 0)
        self._worker_drops[src] = int(msg.get("rows_dropped") or 0)
        self._expire(out)
        return _finish(self, out)

    # ------------------------------------------------------------ routing
    def _route(self, key: str, row: tuple[Any, ...], out: dict[str, Any]) -> None:
        waiting = self._owner.pop(key, None)
        if waiting is not None:
            number = waiting[-1]  # the latest graph that wants it
            left, pending = self._left, out["pending"]
            for other in waiting:
                if other in left:
                    left[other] -= 1
                    pending[other] = left[other]
                    if left[other] <= 0:
                        del left[other]
                        self._keys_of.pop(other, None)
        else:
            number = self._ran.get(key, -1)
            if number < 0:
                self._hold(key, row)
                return
        self._remember(key, number)
        self._append(out, key, row, number)

    def _append(self, out: dict[str, Any], key: str, row: tuple[Any, ...], number: int) -> None:
        _append(out["tasks"], key, row, number)
        if row[-1] is not None:  # failed: its texts go with its row
            text = self._texts.pop(key, None)
            if text is not None:
                out["exceptions"][key] = text

    def _hold(self, key: str, row: tuple[Any, ...]) -> None:
        held = self._held
        held[key] = (monotonic(), row)
        if len(held) > MAX_HELD:
            for old in list(itertools.islice(held, len(held) - MAX_HELD)):
                del held[old]
                self.dropped += 1

    def _expire(self, out: dict[str, Any], everything: bool = False) -> None:
        """Rows that waited ``HOLD`` s (all, with ``everything``) for a graph that did not
        come: compute 0 when every client is recorded, else dropped."""
        held = self._held
        if not held:
            return
        limit = monotonic() - HOLD
        expired = []
        for key, (since, _) in held.items():  # oldest first
            if since > limit and not everything:
                break
            expired.append(key)
        for key in expired:
            _, row = held.pop(key)
            if self.keep_unseen:
                self._remember(key, 0)
                self._append(out, key, row, 0)
            else:
                self._texts.pop(key, None)

    def _remember(self, key: str, number: int) -> None:
        _bounded(self._ran, key, number, MAX_RAN)

    def finish(self) -> dict[str, Any]:
        """The last batch: rows still waiting for a graph are let go (see ``_expire``)."""
        out = _empty(self)
        self._expire(out, everything=True)
        return _finish(self, out)

    def waiting(self) -> Iterable[int]:
        """Computes some of whose tasks have no row yet."""
        return list(self._left)


def _empty(assembler: RowAssembler) -> dict[str, Any]:
    return {
        "groups": [],
        "workers": [],
        "worker_info": {},
        "tasks": {f: [] for f in TASK_FIELDS},
        "cache": {"time": [], "group": [], "metric": []},
        "graphs": [],
        "pending": {},
        "computes": assembler.computes,
        "dropped": assembler.dropped,
        "exceptions": {},
        "corrected": True,  # the workers took distributed's clock correction off
    }


def _finish(assembler: RowAssembler, out: dict[str, Any]) -> dict[str, Any]:
    out["computes"], out["dropped"] = assembler.computes, assembler.dropped
    return out


def _bounded(table: dict[str, Any], key: str, value: Any, cap: int) -> None:
    """``table[key] = value``, forgetting the oldest quarter beyond ``cap`` entries."""
    table[key] = value
    if len(table) > cap:
        for old in list(itertools.islice(table, cap // 4)):
            del table[old]


def _append(tasks: dict[str, list[Any]], key: str, row: tuple[Any, ...], number: int) -> None:
    group, worker, submit, start, stop, error = row
    tasks["key"].append(key)
    tasks["group"].append(group)
    tasks["worker"].append(worker)
    tasks["submit"].append(submit)
    tasks["start"].append(start)
    tasks["stop"].append(stop)
    tasks["error"].append(error)
    tasks["compute"].append(number)
