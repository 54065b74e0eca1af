"""Task rows measured on the workers, joined in the client to the graphs the scheduler numbers.

Unit tests of the join (:class:`RowAssembler`) with hand-made messages in the plugins'
formats, and real clusters: the scheduler's plugin has no per-task hook, rows arrive live
from the first message on, and a second cluster in the same process loses no message.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

from distributed.diagnostics.plugin import SchedulerPlugin  # noqa: E402

import daskprofile  # noqa: E402
from daskprofile.distributed import _assemble  # noqa: E402
from daskprofile.distributed._assemble import RowAssembler, as_label  # noqa: E402
from daskprofile.distributed._scheduler_graphs import GraphProbe  # noqa: E402
from daskprofile.distributed._tables import Lookup  # noqa: E402

W = "tcp://127.0.0.1:1"


def _assembler(keep_unseen: bool = False) -> tuple[RowAssembler, Lookup, Lookup]:
    groups, workers = Lookup(), Lookup()
    return RowAssembler(groups, workers, keep_unseen), groups, workers


def _graph(number: int, run: list[Any], totals: list[list[int]] | None = None) -> dict[str, Any]:
    return {
        "groups": ["inc"] if number == 1 else [],
        "graphs": [
            {
                "compute": number,
                "client": "c",
                "keys": [],
                "totals": totals or [[0, len(run)]],
                "run": run,
            }
        ],
        "computes": number,
    }


def _rows(keys: list[str], src: str = "p1", error: str | None = None) -> dict[str, Any]:
    n = len(keys)
    return {
        "src": src,
        "row_groups": ["inc"],
        "rows": {
            W: {
                "key": keys,
                "group": [0] * n,
                "thread": [0] * n,
                "submit": [1.0] * n,
                "start": [2.0] * n,
                "stop": [3.0] * n,
                "error": [error] * n,
            }
        },
        "row_texts": {k: [f"{error}('x')", "tb"] for k in keys} if error else {},
    }


def test_rows_before_their_graph_wait_for_it_and_count_it_off() -> None:
    join, groups, workers = _assembler()
    early = join.worker(_rows(["a", "b"]))
    assert early["tasks"]["key"] == []  # no graph yet: they wait
    batch = join.scheduler(_graph(1, ["a", "b", "c"]))
    assert batch["tasks"]["key"] == ["a", "b"]
    assert batch["tasks"]["compute"] == [1, 1]
    assert batch["pending"] == {1: 1}
    assert [groups.names[g] for g in batch["graphs"][0]["totals"][0][:1]] == ["inc"]
    assert "run" not in batch["graphs"][0]
    last = join.worker(_rows(["c"]))
    assert last["tasks"]["key"] == ["c"]
    assert last["pending"] == {1: 0}
    assert workers.names == [f"{W} thread 0"]
    assert batch["corrected"] is True


def test_a_key_shared_by_two_graphs_finishes_both_and_goes_to_the_latest() -> None:
    join, _, _ = _assembler()
    join.scheduler(_graph(1, ["a", "b"]))
    join.scheduler(_graph(2, ["b"]))
    batch = join.worker(_rows(["b"]))
    assert batch["tasks"]["compute"] == [2]
    assert batch["pending"] == {1: 1, 2: 0}


def test_a_quiet_compute_is_done_and_its_late_rows_keep_it() -> None:
    join, _, _ = _assembler()
    join.scheduler(_graph(1, ["a", "b"]))
    quiet = join.scheduler({"quiet": [1], "computes": 1})
    assert quiet["pending"] == {1: 0}
    late = join.worker(_rows(["a"]))
    assert late["tasks"]["compute"] == [1]
    assert late["pending"] == {}
    assert list(join.waiting()) == []


def test_a_rerun_keeps_its_compute_and_makes_a_second_row() -> None:
    join, _, _ = _assembler()
    join.scheduler(_graph(1, ["a"]))
    join.worker(_rows(["a"]))
    again = join.worker(_rows(["a"], src="p2"))
    assert again["tasks"]["key"] == ["a"]
    assert again["tasks"]["compute"] == [1]


def test_failed_rows_carry_their_texts_and_killed_tasks_get_a_row() -> None:
    join, _, _ = _assembler()
    join.scheduler(_graph(1, ["a", "k"]))
    failed = join.worker(_rows(["a"], error="ValueError"))
    assert failed["tasks"]["error"] == ["ValueError"]
    assert failed["exceptions"] == {"a": ["ValueError('x')", "tb"]}
    member = {"event": "left", "address": W, "time": 5.0, "killed": ["k"]}
    killed = join.scheduler({"members": [member], "computes": 1})
    assert killed["tasks"]["key"] == ["k"]
    assert killed["tasks"]["error"] == ["KilledWorker"]
    assert killed["tasks"]["start"] == [5.0]
    assert "the workers that ran it died" in killed["exceptions"]["k"][0]
    assert killed["pending"] == {1: 0}


def test_rows_of_no_graph_are_dropped_unless_every_client_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for keep, expected in ((False, []), (True, [0])):
        join, _, _ = _assembler(keep_unseen=keep)
        held = join.worker(_rows(["other"]))
        assert held["tasks"]["key"] == []  # within HOLD: its graph may still come
        assert join.finish()["tasks"]["compute"] == expected  # the recording ends
    monkeypatch.setattr(_assemble, "HOLD", 0.0)  # ... or it waited HOLD seconds
    join, _, _ = _assembler(keep_unseen=True)
    assert join.worker(_rows(["other"]))["tasks"]["compute"] == [0]


def test_tuple_keys_arrive_as_lists_and_keep_their_label() -> None:
    assert as_label(["x", 0]) == str(("x", 0))
    assert as_label(["x", ["y", 1]]) == str(("x", ("y", 1)))
    assert as_label("plain") == "plain"


# ---------------------------------------------------------------- real clusters
def slow(x: int) -> int:
    time.sleep(0.05)
    return x


def test_the_scheduler_plugin_does_nothing_per_task_and_rows_come_live() -> None:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        with daskprofile.profile(client=client, stacks=False, resources=False) as run:
            plugins = [p for n, p in cluster.scheduler.plugins.items() if n.startswith("daskp")]
            assert [type(p) for p in plugins] == [GraphProbe]
            assert type(plugins[0]).transition is SchedulerPlugin.transition
            client.gather(client.map(slow, range(6)))
            deadline = time.monotonic() + 10
            while len(run.tasks) < 6 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(run.tasks) == 6  # before the block ends
        tasks = run.tasks
        assert set(tasks["group"]) == {"slow"}
        assert (tasks["stop"] - tasks["start"] >= 0.045).all()
        assert (tasks["start"] >= tasks["submit"]).all()
        assert {daskprofile.distributed.task_worker_address(w) for w in tasks["worker"]} <= set(
            cluster.scheduler.workers
        )


def test_a_second_cluster_in_the_process_loses_no_message() -> None:
    """The plugins' first messages were published before the client's subscription reached
    the scheduler (it travels on another channel): a second in-process cluster got its
    workers' rows only at the end."""
    for n in (2, 4):
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            with daskprofile.profile(client=client) as run:
                client.gather(client.map(slow, range(n)))
                deadline = time.monotonic() + 10
                while len(run.tasks) < n and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert len(run.tasks) == n
            assert run.meta["distributed"]["missing_batches"] == 0
