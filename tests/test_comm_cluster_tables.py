"""Protocol 1.2 in-process: a cluster run's actions, memory, transfers, workers and failed
tasks, read live from a cluster log (incrementally) or from a finished run, turned into
messages by the feed and sent only to panels that speak 1.2; the type of the data each
transfer moved (1.3), checked on a real LocalCluster too."""

from __future__ import annotations

import time
from time import perf_counter
from typing import Any

import numpy as np
import pytest

from daskprofile.collectors.exceptions import ExceptionTable
from daskprofile.collectors.tasks import RemoteRows, TaskCollector
from daskprofile.distributed._cluster_log import ClusterLog, attach_tables
from daskprofile.jupyter import encode, feed
from daskprofile.jupyter.feed import Feed
from daskprofile.jupyter.publisher import Connection, _cost
from daskprofile.record.cursors import Cursors, frozen_cursors, live_exceptions, live_tasks
from daskprofile.record.recording import _wire_cluster_tables
from daskprofile.run import Run

A, B, C = "tcp://10.0.0.1:4001", "tcp://10.0.0.2:4002", "tcp://10.0.0.3:4003"
T0 = 100.0
NEW = {"actions", "memory", "transfers", "exceptions", "cluster_workers"}


def _actions(keys: list[str], starts: list[float], action: str = "transfer") -> dict[str, Any]:
    n = len(keys)
    return {
        "key": keys,
        "group": [k.split("-")[0].strip("('") for k in keys],
        "action": [action] * n,
        "start": starts,
        "stop": [s + 0.01 for s in starts],
        "peer": [B] * n,
        "bytes": [1000] * n if action == "transfer" else [-1] * n,
    }


def _transfers(starts: list[float], direction: str, peer: str) -> dict[str, Any]:
    n = len(starts)
    return {
        "direction": [direction] * n,
        "start": starts,
        "stop": [s + 0.01 for s in starts],
        "peer": [peer] * n,
        "bytes": [4_000_000] * n,
        "compressed": [-1] * n,
        "keys": [1] * n,
        "type": ["numpy.ndarray"] * n,
    }


def _memory(times: list[float], process: int, managed: int, spilled: int = 0) -> dict[str, Any]:
    n = len(times)
    counts = ("spilled_keys", "spill_count", "spill_bytes", "unspill_count", "unspill_bytes")
    return {
        "time": times,
        "process": [process] * n,
        "managed": [managed] * n,
        "spilled": [spilled] * n,
        **{c: [0] * n for c in counts},
    }


def _filled_log(shift: float = 0.0) -> ClusterLog:
    """A log of rows from ``T0 + shift`` on (``shift``: to the kernel's clock)."""
    log = ClusterLog()
    log.scheduler_tables(
        {
            "members": [
                {"event": "present", "time": None, "address": A, "name": "a", "nthreads": 2},
                {"event": "present", "time": None, "address": B, "name": "b", "nthreads": 1},
                {"event": "joined", "time": T0 + 1.0, "address": C, "name": "c", "nthreads": 1},
            ]
        },
        to_perf=shift,
    )
    log.worker_tables(
        {
            A: {
                # x-1: a task of thread 1 on A; y-9: no task row; z-3 ran on B
                "actions": _actions(["x-1", "y-9", "z-3"], [T0 + 0.1, T0 + 0.2, T0 + 0.3]),
                "transfers": _transfers([T0 + 0.1, T0 + 0.2], "incoming", B),
                "memory": _memory([T0 + 0.0, T0 + 0.5], 300, 100),
                "limit": 8_000,
            },
            B: {"transfers": _transfers([T0 + 0.1], "outgoing", A)},
            C: {  # a worker none of whose threads ran a task of the run
                "actions": _actions(["w-5"], [T0 + 1.5], "disk-read"),
                "memory": _memory([T0 + 1.2], 50, 80, spilled=7),
            },
        },
        to_perf=shift,
    )
    return log


def _task_rows(shift: float = 0.0) -> RemoteRows:
    labels = [f"{A} thread 0", f"{A} thread 1", f"{B} thread 0"]
    t0 = T0 + shift
    return RemoteRows(
        key=["x-0", "x-1", "z-3"],
        group=["x", "x", "z"],
        worker=labels,
        submit=[t0 + 0.05] * 3,
        start=[t0 + 0.15, t0 + 0.15, t0 + 0.35],
        stop=[t0 + 0.4, t0 + 0.4, t0 + 0.5],
        error=[None, None, "ZeroDivisionError"],
        compute=[1, 1, 1],
        exception=[None, None, ("division by zero", "Traceback ...")],
    )


def _finished_run() -> Run:
    """A cluster-like run made from tables, as a finished run holds them."""
    log = _filled_log()
    tasks = TaskCollector()
    tasks.add_rows(_task_rows())
    data = {name: log.table(name, T0, T0 + 2.0) for name in ("actions", "transfers", "memory")}
    data["workers"] = log.table("workers", T0, T0 + 2.0)
    data["tasks"] = tasks.snapshot_compact()
    data["exceptions"] = tasks.exceptions.snapshot()
    meta = {"id": "c1", "t0": T0, "t1": T0 + 2.0, "finished": True}
    return Run(meta, data)


def _of(messages: list[encode.Message], kind: str) -> list[dict[str, Any]]:
    return [encode.decode(d, b) for d, b in messages if d["type"] == kind]


def _lanes(messages: list[encode.Message]) -> dict[int, str]:
    return {
        i: label
        for m in _of(messages, "workers")
        for i, label in zip(m["ids"], m["labels"], strict=True)
    }


def test_a_replay_sends_a_cluster_runs_tables_on_the_lanes_of_their_tasks() -> None:
    run = _finished_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    lanes = _lanes(messages)
    ((actions,),) = [_of(messages, "actions")]
    assert actions["first"] == 0
    on = [lanes[w] for w in actions["arrays"]["worker"].tolist()]
    # its task's thread; no task row: A's first lane; ran elsewhere: A's; C: a lane of C
    assert on == [f"{A} thread 1", f"{A} thread 0", f"{A} thread 0", C]
    assert actions["arrays"]["action"].tolist() == [0, 0, 0, 1]
    assert np.allclose(actions["times"]["start"], [0.1, 0.2, 0.3, 1.5], atol=1e-6)
    assert actions["arrays"]["bytes"][:3].tolist() == [1000.0] * 3
    assert np.isnan(actions["arrays"]["bytes"][3])
    groups = {
        i: n for m in _of(messages, "groups") for i, n in zip(m["ids"], m["names"], strict=True)
    }
    assert [groups[g] for g in actions["arrays"]["group"].tolist()] == ["x", "y", "z", "w"]
    # the lane only actions use comes apart, before the rows using it
    kinds = [d["type"] for d, _ in messages]
    (apart,) = [d for d, _ in messages if d["type"] == "workers" and d["labels"] == [C]]
    assert encode.needs(apart) == encode.TABLES_VERSION
    assert kinds.index("actions") > [d for d, _ in messages].index(apart)


def test_a_replay_sends_memory_per_worker_transfers_workers_and_exceptions() -> None:
    run = _finished_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    memory = {m["source"]: m for m in _of(messages, "memory")}
    assert set(memory) == {A, C}
    assert memory[A]["limit"] == 8_000
    assert memory[C]["limit"] == 0
    assert memory[A]["arrays"]["managed"].tolist() == [100.0, 100.0]
    assert memory[A]["arrays"]["unmanaged"].tolist() == [200.0, 200.0]
    assert memory[C]["arrays"]["managed"].tolist() == [50.0]  # no more than the process
    assert memory[C]["arrays"]["spilled"].tolist() == [7.0]
    assert np.allclose(memory[A]["times"]["time"], [0.0, 0.5], atol=1e-6)
    (transfers,) = _of(messages, "transfers")
    addresses = transfers["addresses"]
    pairs = [
        (addresses[s], addresses[d])
        for s, d in zip(
            transfers["arrays"]["source"], transfers["arrays"]["destination"], strict=True
        )
    ]
    assert sorted(pairs) == [(B, A)] * 3
    assert sorted(transfers["arrays"]["incoming"].tolist()) == [0, 1, 1]
    (members,) = _of(messages, "cluster_workers")
    assert [w["address"] for w in members["workers"]] == [A, B, C]
    assert [w["joined"] for w in members["workers"]] == [None, None, 1.0]
    assert members["workers"][0]["threads"] == 2
    (failed,) = _of(messages, "exceptions")
    assert (failed["first"], failed["dropped"]) == (0, 0)
    (row,) = failed["rows"]
    assert row["key"] == "z-3"
    assert (row["type"], row["message"]) == ("ZeroDivisionError", "division by zero")
    assert row["worker"] == f"{B} thread 0"
    assert row["time"] == pytest.approx(0.5)
    kinds = [d["type"] for d, _ in messages]
    assert kinds[0] == "run_start"
    assert kinds[-1] == "run_end"


def _sent_to(protocol: str, messages: list[encode.Message]) -> list[dict[str, Any]]:
    conn = Connection(comm=None, max_queue=10_000, rate=20, protocol=protocol)
    conn.push(messages)
    return [d for d, _ in conn.outbox]


def test_a_panel_older_than_1_2_is_sent_exactly_what_it_was_sent_before() -> None:
    run = _finished_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    for old in ("1.0", "1.1"):
        sent = _sent_to(old, messages)
        assert not {d["type"] for d in sent} & NEW
        labels = [label for d in sent if d["type"] == "workers" for label in d["labels"]]
        assert sorted(labels) == [f"{A} thread 0", f"{A} thread 1", f"{B} thread 0"]
    assert {d["type"] for d in _sent_to("1.2", messages)} >= NEW
    assert len(_sent_to("1.2", messages)) == len(messages)


def test_exceptions_and_cluster_workers_are_structure_and_never_dropped() -> None:
    run = _finished_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    conn = Connection(comm=None, max_queue=2, rate=20, protocol="1.2")
    conn.push(messages)
    kept = {d["type"] for d, _ in conn.outbox}
    assert {"exceptions", "cluster_workers"} <= kept
    assert not kept & {"actions", "memory"}  # droppable data, dropped first
    # but a transfers batch naming new addresses or types: later batches' ids need them
    (transfers,) = [d for d, _ in conn.outbox if d["type"] == "transfers"]
    assert transfers["addresses"]
    assert "types" not in transfers  # a 1.2 panel: no type column, no type names
    costs = {d["type"]: _cost((d, b)) for d, b in messages}
    assert costs["tasks"] == 1.0
    # the cluster's tables ride along with the task rows of their poll: no token of the rate
    assert costs["actions"] == costs["memory"] == costs["transfers"] == 0.0
    assert costs["exceptions"] == 0.0


def test_a_local_run_sends_its_failed_tasks_and_no_cluster_tables() -> None:
    table = ExceptionTable(max_rows=1)
    table.add("('inc-1', 0)", "inc", "thread 1", T0 + 0.25, "ValueError", "bad", "tb", 1)
    table.add("('inc-1', 1)", "inc", "thread 2", T0 + 0.5, "ValueError", "bad", "tb", 1)
    run = Run({"id": "l1", "t0": T0}, {})
    messages = Feed(run, Cursors(exceptions=live_exceptions(table))).poll()
    ((data, _),) = messages
    assert data["type"] == "exceptions"
    assert data["dropped"] == 1
    assert [r["worker"] for r in data["rows"]] == ["thread 1"]
    assert data["rows"][0]["time"] == pytest.approx(0.25)


# ---------------------------------------------------------------- live


class _Live:
    """A live cluster run: a task collector and a cluster log, read through cursors."""

    def __init__(self, log: ClusterLog, t0: float = T0) -> None:
        self.log = log
        self.run = Run({"id": "live", "t0": t0, "finished": False})
        self.tasks = TaskCollector()
        self.cursors = Cursors(
            tasks=live_tasks(self.tasks),
            keys=self.tasks.keys_at,
            exceptions=live_exceptions(self.tasks.exceptions),
        )
        self.calls: list[tuple[str, int]] = []
        since = log.since

        def counted(name: str, cursor: int) -> Any:
            self.calls.append((name, cursor))
            return since(name, cursor)

        log.since = counted  # type: ignore[method-assign]
        _wire_cluster_tables(self.cursors, log, self.run)


def test_live_readers_copy_only_the_new_rows_of_the_runs_window() -> None:
    log = ClusterLog()
    old = {A: {"memory": _memory([T0 - 5.0], 1, 1)}}  # before the run: not its rows
    log.worker_tables(old, to_perf=0.0)
    live = _Live(log)
    reader = live.cursors.memory
    assert reader is not None
    for i in range(3):
        log.worker_tables({A: {"memory": _memory([T0 + i], 10, 5)}}, to_perf=0.0)
        read = reader(i)
        assert (read.first, read.cursor) == (i, i + 1)
        assert read.cols["time"].tolist() == [T0 + i]
    cursors = [c for name, c in live.calls if name == "memory"]
    assert cursors == [0, 2, 3]  # where the log's new rows began (the first: the run's)
    whole = reader(0)  # a panel catching up: from the start
    assert whole.cols["time"].tolist() == [T0, T0 + 1, T0 + 2]
    live.run.meta.t1 = T0 + 2.5
    log.worker_tables({A: {"memory": _memory([T0 + 2.4, T0 + 3.0], 10, 5)}}, to_perf=0.0)
    assert reader(3).cols["time"].tolist() == [T0 + 2.4]  # not after the run's end
    assert reader(0).n == 4


def test_live_actions_wait_a_little_for_their_task_row() -> None:
    log = ClusterLog()
    live = _Live(log, t0=perf_counter() - 10.0)
    now = perf_counter()
    f = Feed(live.run, live.cursors)
    log.worker_tables({A: {"actions": _actions(["x-1"], [now - 0.1])}}, to_perf=0.0)
    assert not _of(f.poll(), "actions")  # its task row has not come yet
    live.tasks.add_rows(
        RemoteRows(
            key=["x-0", "x-1"],
            group=["x", "x"],
            worker=[f"{A} thread 0", f"{A} thread 1"],
            submit=[now] * 2,
            start=[now] * 2,
            stop=[now] * 2,
            error=[None, None],
            compute=[1, 1],
        )
    )
    messages = f.poll()
    (actions,) = _of(messages, "actions")
    assert _lanes(messages)[actions["arrays"]["worker"][0]] == f"{A} thread 1"
    # a row whose task never comes goes on its worker's first lane after ACTION_WAIT
    log.worker_tables({A: {"actions": _actions(["q-7"], [now - feed.ACTION_WAIT - 1])}}, 0.0)
    (late,) = _of(f.poll(), "actions")
    assert late["first"] == 1
    assert late["arrays"]["worker"].tolist() == [0]  # A thread 0


def test_a_panel_joining_mid_run_gets_the_same_lanes_and_addresses() -> None:
    log = ClusterLog()
    live = _Live(log, t0=T0)
    live.tasks.add_rows(_task_rows())
    main = Feed(live.run, live.cursors)
    log.worker_tables({A: {"transfers": _transfers([T0 + 0.1], "incoming", C)}}, 0.0)
    sent = main.poll(final=True)
    log.worker_tables({B: {"transfers": _transfers([T0 + 0.2], "incoming", A)}}, 0.0)
    log.worker_tables({C: {"actions": _actions(["w-5"], [T0 + 0.3], "disk-read")}}, 0.0)
    sent += main.poll(final=True)
    log.worker_tables({A: {"actions": _actions(["x-1"], [T0 + 0.4])}}, 0.0)  # not polled yet
    caught = main.catch_up()
    assert _lanes(caught) == _lanes(sent)
    addresses = [a for m in _of(sent, "transfers") for a in m["addresses"]]
    assert [a for m in _of(caught, "transfers") for a in m["addresses"]] == addresses
    assert main.addresses == addresses == [C, A, B]
    assert sum(m["n"] for m in _of(caught, "actions")) == 1  # up to where the feed is
    (later,) = main.poll(final=True)
    assert (later[0]["type"], later[0]["first"], later[0]["n"]) == ("actions", 1, 1)


def test_live_action_rows_read_in_pieces_are_the_rows_the_run_keeps() -> None:
    log = ClusterLog(max_records=64)  # the cap drops old rows and their key text
    live = _Live(log, t0=10.0)
    reader = live.cursors.actions
    assert reader is not None
    keys: list[str] = []
    cursor = 0
    for lo in range(0, 200, 20):
        chunk = [f"('load-abcdef12', {i})" for i in range(lo, lo + 20)]
        log.worker_tables(
            {A: {"actions": _actions(chunk, [float(i) for i in range(lo, lo + 20)])}}, 0.0
        )
        read = reader(cursor)
        keys += read.cols["key"].tolist()
        cursor = read.cursor
    assert keys == [f"('load-abcdef12', {i})" for i in range(10, 200)]  # from t0 on
    assert read.cols["groups"][read.cols["group"][0]] == "load"


def test_the_publisher_streams_the_tables_to_1_2_panels_only_live_and_replayed() -> None:
    import uuid

    from daskprofile.jupyter.publisher import Publisher
    from daskprofile.options import ProfileOptions
    from daskprofile.record import history
    from daskprofile.record.recording import Recording

    class Comm:
        def __init__(self) -> None:
            self.comm_id = uuid.uuid4().hex
            self.sent: list[dict[str, Any]] = []

        def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
            self.sent.append(encode.decode(data, list(buffers or [])))

    options = ProfileOptions(
        tasks=True,
        resources=False,
        cache=False,
        stacks=False,
        dt=0.1,
        interval=0.01,
        max_records=None,
    )
    publisher = Publisher(tick=0.05)
    new, old = Comm(), Comm()
    recording = Recording(options, title="cluster", auto=True)
    recording.run.meta.t0 -= 3.0  # began 3 s ago: the log's rows are its first 2 seconds
    shift = recording.run.t0 - T0
    log = _filled_log(shift)
    _wire_cluster_tables(recording.cursors, log, recording.run)
    attach_tables(log, recording.run)
    publisher.start()
    try:
        publisher.attach(new, "1.2")
        publisher.attach(old, "1.1")
        run = recording.start()
        rid = str(run.meta.id)
        assert recording.tasks is not None
        recording.tasks.add_rows(_task_rows(shift))
        deadline = perf_counter() + 10
        # (panels attached get the finished runs the history keeps, earlier tests' too:
        # every wait is for this run's messages)
        while perf_counter() < deadline and not _sent(new, "actions", rid):
            recording.cursors.arrived()
            time.sleep(0.05)
        recording.finish()
        ended = perf_counter() + 10
        while perf_counter() < ended and not _sent(old, "run_end", rid):
            time.sleep(0.05)
        live_types = {m["type"] for m in new.sent if m.get("run") == rid}
        assert live_types >= NEW
        assert not {m["type"] for m in old.sent} & NEW
        assert _sent(old, "run_end", rid)
        late, late_old = Comm(), Comm()  # replayed, finished
        publisher.attach(late, "1.2")
        publisher.attach(late_old, "1.0")
        ended = perf_counter() + 10
        while perf_counter() < ended and not all(
            _sent(c, "run_end", rid) for c in (late, late_old)
        ):
            time.sleep(0.05)
        assert {m["type"] for m in late.sent if m.get("run") == rid} >= NEW
        assert not {m["type"] for m in late_old.sent} & NEW
        assert not [m for m in late_old.sent if m["type"] == "resources" and m.get("source")]
    finally:
        publisher.stop()
        history.clear_history()


def _sent(comm: Any, kind: str, run: str) -> bool:
    """Whether ``comm`` was sent a ``kind`` message of ``run``."""
    return any(m["type"] == kind and m.get("run") == run for m in comm.sent)


def test_a_panel_joining_mid_run_gets_each_failed_task_once() -> None:
    table = ExceptionTable()
    run = Run({"id": "l2", "t0": T0}, {})
    main = Feed(run, Cursors(exceptions=live_exceptions(table)))
    table.add("a", "g", "thread 1", T0 + 0.1, "ValueError", "one", "", 1)
    assert [m["first"] for m in _of(main.poll(), "exceptions")] == [0]
    table.add("b", "g", "thread 1", T0 + 0.2, "ValueError", "two", "", 1)
    caught = [r["key"] for m in _of(main.catch_up(), "exceptions") for r in m["rows"]]
    assert caught == ["a"]  # "b": the live feed's next poll sends it, to every panel
    (later,) = _of(main.poll(), "exceptions")
    assert (later["first"], [r["key"] for r in later["rows"]]) == (1, ["b"])


def test_a_worker_leaving_sends_the_rows_it_took_with_it_once_and_to_1_2_only() -> None:
    log = _filled_log()
    event = {"event": "left", "time": T0 + 1.8, "address": A, "cause": "handle-worker-cleanup"}
    log.scheduler_tables({"members": [{**event, "lost": ["x-1"], "killed": ["x-0"]}]}, 0.0)
    tasks = TaskCollector()
    tasks.add_rows(_task_rows())
    data = {name: log.table(name, T0, T0 + 2.0) for name in ("actions", "transfers", "memory")}
    data["workers"] = log.table("workers", T0, T0 + 2.0)
    data["tasks"] = tasks.snapshot_compact()
    data["exceptions"] = tasks.exceptions.snapshot()
    run = Run({"id": "c2", "t0": T0, "t1": T0 + 2.0, "finished": True}, data)
    feed_ = Feed(run, frozen_cursors(run))
    messages = feed_.replay()
    (reruns,) = _of(messages, "reruns")
    # x-0 ran on A thread 0 (killed), x-1 on A thread 1 (its result lost); z-3 was on B
    assert sorted(zip(reruns["rows"], reruns["why"], reruns["workers"], strict=True)) == [
        (0, "killed", A),
        (1, "lost", A),
    ]
    kinds = [d["type"] for d, _ in messages]
    assert kinds.index("reruns") > kinds.index("tasks")
    assert encode.needs(messages[kinds.index("reruns")][0]) == encode.TABLES_VERSION
    assert "reruns" not in {d["type"] for d in _sent_to("1.1", messages)}
    assert feed_._reruns(data["workers"]) == []  # each row once


# ---------------------------------------------------------------- types of data moved (1.3)


def _typed_rows(messages: list[encode.Message]) -> list[tuple[str, str, str, float, str]]:
    """Per transfers row: (direction, source, destination, bytes, type name), the ids
    resolved through the address and type lists the batches extend."""
    addresses: list[str] = []
    types: list[str] = []
    out = []
    for m in _of(messages, "transfers"):
        addresses += m["addresses"]
        types += m["types"]
        a = m["arrays"]
        for s, d, b, inc, t in zip(
            a["source"], a["destination"], a["bytes"], a["incoming"], a["type"], strict=True
        ):
            way = "incoming" if inc else "outgoing"
            out.append((way, addresses[s], addresses[d], float(b), types[t]))
    return out


def test_transfers_carry_the_type_of_the_data_moved_to_1_3_panels_only() -> None:
    run = _finished_run()
    messages = Feed(run, frozen_cursors(run)).replay()
    ((data, buffers),) = [m for m in messages if m[0]["type"] == "transfers"]
    assert data["columns"][-1] == "type"
    assert data["types"] == ["numpy.ndarray"]
    assert encode.needs(data) == encode.TYPES_VERSION == "1.3"
    assert {t for *_, t in _typed_rows(messages)} == {"numpy.ndarray"}
    adapted = encode.adapt((data, buffers), "1.2")
    assert adapted is not None
    plain, bufs = adapted
    assert "type" not in plain["columns"]
    assert "types" not in plain
    assert len(bufs) == len(plain["columns"]) == 6
    assert encode.decode(plain, bufs)["arrays"]["bytes"].tolist() == [4e6] * 3
    assert encode.adapt((data, buffers), "1.1") is None  # no transfers for a 1.1 panel
    assert encode.adapt((data, buffers), "x.y") is None
    (sent,) = [d for d in _sent_to("1.2", messages) if d["type"] == "transfers"]
    assert "types" not in sent
    (sent,) = [d for d in _sent_to("1.3", messages) if d["type"] == "transfers"]
    assert sent["types"] == ["numpy.ndarray"]
    assert "transfers" not in {d["type"] for d in _sent_to("1.1", messages)}


def test_type_names_are_sent_once_per_stream_and_caught_up_whole() -> None:
    log = ClusterLog()
    live = _Live(log, t0=T0)
    main = Feed(live.run, live.cursors)
    rows = _transfers([T0 + 0.1], "incoming", C)
    log.worker_tables({A: {"transfers": rows}}, 0.0)
    first = main.poll(final=True)
    other = {**_transfers([T0 + 0.2, T0 + 0.3], "incoming", A), "type": ["<b>x</b>", None]}
    log.worker_tables({B: {"transfers": other}}, 0.0)
    log.worker_tables({C: {"transfers": _transfers([T0 + 0.4], "incoming", A)}}, 0.0)
    later = main.poll(final=True)
    assert [m["types"] for m in _of(first + later, "transfers")] == [
        ["numpy.ndarray"],
        ["<b>x</b>", ""],  # a row without a type: "" (not known), a name like any other
    ]
    names = [t for *_, t in _typed_rows(first + later)]
    assert names == ["numpy.ndarray", "<b>x</b>", "", "numpy.ndarray"]
    caught = main.catch_up()
    assert [t for *_, t in _typed_rows(caught)] == names
    assert [t for m in _of(caught, "transfers") for t in m["types"]] == main.types


@pytest.mark.slow
@pytest.mark.usefixtures("distributed_threads")
def test_a_cluster_runs_transfer_batches_carry_the_types_of_run_transfers() -> None:
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    import daskprofile

    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(abs, -1)
        with daskprofile.profile(client=client) as run:
            x = da.random.random((2000, 2000), chunks=(250, 250)).persist()
            distributed.wait(x)
            assert (x + x.T).sum().compute() > 0  # blocks of the other worker: transfers
    table = run.transfers
    assert len(table) > 0
    assert "numpy.ndarray" in set(table["type"])
    messages = Feed(run, frozen_cursors(run)).replay()
    got = _typed_rows(messages)
    want = list(
        zip(
            table["direction"],
            table["source"].astype(str),
            table["destination"].astype(str),
            table["bytes"].astype(float),
            table["type"].astype(str),
            strict=True,
        )
    )
    assert got == want
    by_type = run.bandwidth("type")
    sent = {}
    for way, _, _, size, name in got:
        if way == "incoming":
            sent[name] = sent.get(name, 0.0) + size
    assert sent == dict(zip(by_type["type"], by_type["bytes"].astype(float), strict=True))


def test_a_poll_without_the_series_keeps_them_for_the_next_one() -> None:
    """Polls nudged by a cluster's rows come closer than a tick: they send the task rows
    and what goes with them, and leave the sampled series (memory here) to the next poll
    that asks for them, whole."""
    log = ClusterLog()
    live = _Live(log, t0=T0)
    live.tasks.add_rows(_task_rows())
    main = Feed(live.run, live.cursors)
    log.worker_tables({A: {"memory": _memory([T0 + 0.1, T0 + 0.2], 1, 100)}}, 0.0)
    quick = main.poll(series=False)
    assert sum(m["n"] for m in _of(quick, "tasks")) == 3
    assert _of(quick, "memory") == []
    log.worker_tables({A: {"memory": _memory([T0 + 0.3], 1, 200)}}, 0.0)
    full = main.poll()
    assert _of(full, "tasks") == []  # sent already
    assert sum(m["n"] for m in _of(full, "memory")) == 3
