"""A dask.distributed cluster reaches a connected panel with no daskprofile code: a real
kernel, a real ``LocalCluster`` of worker processes, the panel's side of the comm."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from daskprofile.jupyter.comm import PROTOCOL_VERSION
from test_comm_kernel import Panel, _check_run_stream, _has, kernel_with_panel

pytestmark = pytest.mark.slow

CLUSTER = (
    "from distributed import Client, LocalCluster\n"
    "cluster = LocalCluster(n_workers=2, threads_per_worker=2, processes=True,\n"
    "                       dashboard_address=':0', silence_logs=40)\n"
    "client = Client(cluster)\n"
    "print(len(client.scheduler_info()['workers']))"
)
MATMUL = (
    "import dask.array as da\n"
    "x = da.random.random((1200, 1200), chunks=300)\n"
    "print(float((x @ x.T).sum().compute()))"
)
SLOW = "import time\ndef slow(i):\n    time.sleep(0.3)\n    return i\n"
LAST = (
    "from daskprofile.record import history as H\n"
    "run = H.history()[-1]\n"
    "print(len(run.tasks), run.meta['id'], run.tasks['worker'].str.startswith('tcp://').all(),"
    " run.meta['schedulers'])"
)
KERNEL_SAMPLERS = (
    "import daskprofile.jupyter.comm as c\n"
    "s = c.hub().session.samplers\n"
    "print(s.stacks.running, s.resources.running)"
)
#: a compute whose tasks take chunks computed on the other worker (x.T)
TRANSFERS = (
    "import dask.array as da\n"
    "x = da.random.random((4000, 4000), chunks=500)\n"
    "print(float((x + x.T).sum().compute()))"
)
FAILING = (
    "def boom(i):\n"
    "    raise ZeroDivisionError(f'no {i} today')\n"
    "try:\n"
    "    client.submit(boom, 3, key='boom-3').result()\n"
    "except ZeroDivisionError as e:\n"
    "    print('raised', e)"
)
IDS = ("source", "destination", "incoming")
#: message types of protocol 1.2
TABLES = {"actions", "memory", "transfers", "exceptions", "cluster_workers"}
PLUGINS = (
    "print(sorted(n for n in client.run_on_scheduler("
    "lambda dask_scheduler: list(dask_scheduler.plugins)) if n.startswith('daskprofile')))"
)


@pytest.fixture
def panel() -> Iterator[Panel]:
    with kernel_with_panel() as p:
        yield p


def _run_ids(panel: Panel) -> list[str]:
    return [m["run"] for m in panel.of("run_end")]


def _close_cluster(panel: Panel) -> None:
    panel.execute("client.close(); cluster.close()", timeout=60)


def test_a_cluster_compute_streams_to_the_panel_with_no_user_code(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    assert panel.execute(CLUSTER, timeout=120).split()[-1] == "2"  # made after the panel came
    try:
        panel.execute(MATMUL, timeout=120)
        panel.wait(_has("run_end"), timeout=30)
        (rid,) = _run_ids(panel)
        n, last_id, on_workers, schedulers = panel.execute(LAST).split(maxsplit=3)
        assert last_id == rid
        assert on_workers == "True"
        assert "distributed" in schedulers
        _check_run_stream(panel, rid, int(n))
        start = panel.of("run_start", rid)[0]
        assert "compute()" in (start["title"] or "")
        # a lane per worker thread: labels say which worker and thread
        labels = [label for m in panel.of("workers", rid) for label in m["labels"]]
        addresses = {label.rsplit(" thread ", 1)[0] for label in labels}
        assert len(addresses) == 2
        assert all(label.startswith("tcp://127.0.0.1:") for label in labels)
        kinds = {k for m in panel.of("workers", rid) for k in m["kinds"]}
        assert kinds == {"worker"}
        # progress per group, against the graph's totals sent by the scheduler
        last = panel.of("progress", rid)[-1]
        assert sum(last["done"]) == int(n)
        assert sum(last["total"]) == int(n)
        assert len(panel.of("groups", rid)) >= 1
        # the cluster's worker processes' CPU and memory
        resources = panel.of("resources", rid)
        assert resources
        assert max(m["arrays"]["memory"].max() for m in resources) > 50e6
        summary = panel.of("run_end", rid)[0]["summary"]
        assert summary["tasks"] == int(n)
        assert not {m["type"] for m in panel.log} & TABLES  # a 1.0 panel: nothing of 1.2
        # the stacks and CPU/memory lines are the workers': the kernel (which runs the
        # scheduler) is not sampled
        assert panel.of("stacks", rid)
        assert panel.execute(KERNEL_SAMPLERS).split() == ["False", "False"]
        # until a compute runs in it (the same cell's run is still open when it prints)
        local = "x.sum().compute(scheduler='threads')\n" + KERNEL_SAMPLERS
        assert panel.execute(local).split() == ["True", "True"]
    finally:
        _close_cluster(panel)


def _lanes(panel: Panel, rid: str) -> dict[int, str]:
    return {
        i: label
        for m in panel.of("workers", rid)
        for i, label in zip(m["ids"], m["labels"], strict=True)
    }


def test_a_1_2_panel_gets_the_cluster_runs_actions_memory_workers_and_failures(
    panel: Panel,
) -> None:
    panel.open(PROTOCOL_VERSION)
    panel.wait(_has("hello"))
    panel.execute(CLUSTER, timeout=120)
    try:
        panel.execute(TRANSFERS, timeout=120)
        panel.wait(_has("run_end"), timeout=30)
        (rid,) = _run_ids(panel)
        workers = sorted(panel.execute("print(*client.scheduler_info()['workers'])").split())
        # the workers of the run
        (members,) = panel.of("cluster_workers", rid)[-1:]
        assert sorted(w["address"] for w in members["workers"]) == workers
        assert all(w["threads"] == 2 and w["left"] is None for w in members["workers"])
        # transfers on the lanes of the worker threads that took the data
        lanes = _lanes(panel, rid)
        actions = panel.of("actions", rid)
        moved = [
            lanes[int(w)]
            for m in actions
            for w, a in zip(m["arrays"]["worker"], m["arrays"]["action"], strict=True)
            if a == 0
        ]
        assert moved
        assert all(" thread " in label and label.split()[0] in workers for label in moved)
        assert [m["first"] for m in actions] == [
            sum(m["n"] for m in actions[:i]) for i in range(len(actions))
        ]
        # memory per worker, with its limit
        memory = panel.of("memory", rid)
        assert sorted({m["source"] for m in memory}) == workers
        assert all(m["limit"] > 0 for m in memory)
        assert max(m["arrays"]["unmanaged"].max() for m in memory) > 10e6
        # the workers' transfer logs, each transfer logged by both ends
        transfers = panel.of("transfers", rid)
        addresses = [a for m in transfers for a in m["addresses"]]
        assert sorted(set(addresses) - {""}) == workers  # "": a sender not told the receiver
        incoming = [
            (addresses[s], addresses[d])
            for m in transfers
            for s, d, i in zip(*(m["arrays"][c] for c in IDS), strict=True)
            if i
        ]
        assert incoming
        assert all(s != d and {s, d} <= set(workers) for s, d in incoming)
        # a task that raised
        assert "raised no 3 today" in panel.execute(FAILING, timeout=60)
        panel.wait(_has("run_end", 2), timeout=30)
        second = _run_ids(panel)[1]
        rows = [row for m in panel.of("exceptions", second) for row in m["rows"]]
        (row,) = rows
        assert (row["key"], row["type"]) == ("boom-3", "ZeroDivisionError")
        assert row["message"] == "no 3 today"
        assert row["worker"].split(" thread ")[0] in workers
        assert "boom" in row["traceback"]
        assert not panel.of("exceptions", rid)
    finally:
        _close_cluster(panel)


def test_futures_land_in_the_run_of_the_cell_that_submitted_them(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    panel.execute(CLUSTER, timeout=120)
    try:
        panel.execute(SLOW)
        panel.execute("futures = client.map(slow, range(8))")  # returns at once
        panel.execute("y = client.submit(sum, [1, 2], key='later-sum').result()")
        panel.wait(_has("run_end", 2), timeout=30)
        first, second = [m["run"] for m in panel.of("run_start")]
        assert set(_run_ids(panel)) == {first, second}
        done = {rid: sum(panel.of("progress", rid)[-1]["done"]) for rid in (first, second)}
        assert done == {first: 8, second: 1}
        titles = {rid: panel.of("run_start", rid)[0]["title"] for rid in (first, second)}
        assert "client.map" in titles[first]
        assert "later-sum" in titles[second]
    finally:
        _close_cluster(panel)


def test_the_plugins_go_when_the_panel_recording_stops(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    panel.execute(CLUSTER, timeout=120)
    try:
        panel.execute("print(client.submit(sum, [1, 2]).result())")
        panel.wait(_has("run_end"), timeout=30)
        assert panel.execute(PLUGINS).strip() != "[]"  # installed by the first graph
        panel.execute("import daskprofile.jupyter.comm as c; c.shutdown()")
        assert panel.execute(PLUGINS).strip() == "[]"
        wrapped = (
            "from distributed import Client; "
            "print(hasattr(Client._graph_to_futures, '__wrapped__'))"
        )
        assert panel.execute(wrapped).strip() == "False"
    finally:
        _close_cluster(panel)


TWO_CLUSTERS = (
    "from distributed import Client, LocalCluster\n"
    "kw = dict(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=':0')\n"
    "ca, cb = LocalCluster(**kw), LocalCluster(**kw)\n"
    "a, b = Client(ca, set_as_default=False), Client(cb, set_as_default=False)\n"
    "print(*[next(iter(c.scheduler_info()['workers'])) for c in (a, b)])"
)


def test_two_clients_in_one_kernel_are_kept_apart(panel: Panel) -> None:
    panel.open()
    panel.wait(_has("hello"))
    worker_a, worker_b = panel.execute(TWO_CLUSTERS, timeout=120).split()[-2:]
    try:
        panel.execute("print(a.submit(sum, [1, 2], key='on-a').result())")
        panel.execute("print(b.gather(b.map(abs, [-1, -2], key=['on-b-1', 'on-b-2'])))")
        panel.wait(_has("run_end", 2), timeout=30)
        first, second = [m["run"] for m in panel.of("run_start")]
        for rid, worker, n in ((first, worker_a, 1), (second, worker_b, 2)):
            labels = {label for m in panel.of("workers", rid) for label in m["labels"]}
            assert {label.rsplit(" thread ", 1)[0] for label in labels} == {worker}
            assert sum(panel.of("progress", rid)[-1]["done"]) == n
    finally:
        panel.execute("a.close(); b.close(); ca.close(); cb.close()", timeout=60)


def test_each_runs_worker_series_are_its_own_and_stream_whole(panel: Panel) -> None:
    """Two cells on one cluster: each run keeps only its own samples of each worker
    process (not the cluster's whole series so far), and the panel got exactly those live
    (a sample taken before the run opened, or after it was kept, is in neither)."""
    panel.open(PROTOCOL_VERSION)
    panel.wait(_has("hello"))
    assert panel.execute(CLUSTER, timeout=120).split()[-1] == "2"
    try:
        for n in (1, 2):
            panel.execute(MATMUL, timeout=120)
            panel.wait(_has("run_end", n), timeout=60)
            rid = _run_ids(panel)[-1]
            kept = panel.execute(
                "from daskprofile.record import history as H\n"
                f"r = [r for r in H.history() if r.meta.id == {rid!r}][0]\n"
                "for p in r.meta.distributed['processes']:\n"
                "    before = sum(t < -0.5 for t in p['time'])\n"
                "    print(', '.join(p['workers']), len(p['time']), before)\n"
                "print('ENDS', r.resources['time'].max(), r.tasks['stop'].max())",
                timeout=60,
            )
            ends = [line for line in kept.splitlines() if line.startswith("ENDS ")]
            kept = "\n".join(line for line in kept.splitlines() if not line.startswith("ENDS "))
            # the CPU/memory lines reach the last task (the workers' last batch of samples,
            # up to 0.5 s behind, was waited for): within a sample (200 ms) of it
            resources_end, last_stop = map(float, ends[0].split()[1:])
            assert resources_end >= last_stop - 0.25, (resources_end, last_stop)
            rows = [line.rsplit(" ", 2) for line in kept.strip().splitlines()]
            want = {label: int(count) for label, count, _ in rows}
            try:
                panel.wait(lambda log, rid=rid, want=want: _live_rows(log, rid) == want, timeout=10)
            except AssertionError:
                raise AssertionError((n, _live_rows(panel.log, rid), want, rows)) from None
            # this run's samples, and the last one before it (the value when it began)
            assert all(int(before) <= 1 for _, _, before in rows), rows
    finally:
        _close_cluster(panel)


def _live_rows(log: list[dict[str, Any]], rid: str) -> dict[str, int]:
    """Resource samples per worker process the panel received for run ``rid``."""
    live: dict[str, int] = {}
    for m in log:
        if m["type"] == "resources" and m.get("run") == rid and m.get("source"):
            live[m["source"]] = live.get(m["source"], 0) + m["n"]
    return live
