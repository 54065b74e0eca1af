"""The pieces that make a cluster one more source of a recording: rows added to a task
collector as labels, the post-import hook on ``distributed``, the submission watch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from typing import Any

import pytest

from daskprofile.collectors.tasks import RemoteRows, TaskCollector
from daskprofile.run import Run


def _rows(keys: list[str], groups: list[str], worker: str = "tcp://w:1 thread 0") -> RemoteRows:
    n = len(keys)
    return RemoteRows(
        key=keys,
        group=groups,
        worker=[worker] * n,
        submit=[1.0] * n,
        start=[1.5 + i for i in range(n)],
        stop=[1.75 + i for i in range(n)],
        error=[None] * (n - 1) + ["ValueError"],
        compute=[1] * n,
    )


def test_rows_added_as_labels_read_back_as_the_same_keys_groups_and_workers() -> None:
    tasks = TaskCollector()
    keys = ["('matmul-1a2b3c', 0, 1)", "inc-5f1d2c3a4b", "plain", "('sum-9f8e', 3)"]
    first = tasks.add_rows(_rows(keys, ["matmul", "inc", "plain", "sum"]))
    second = tasks.add_rows(_rows(["('matmul-1a2b3c', 2, 2)"], ["matmul"], "tcp://w:2 thread 1"))
    assert (first, second) == (0, 4)
    run = Run({"t0": 0.0})
    run.attach("tasks", tasks.snapshot_compact)
    run.finish(10.0)
    table = run.tasks
    assert list(table["key"]) == [*keys, "('matmul-1a2b3c', 2, 2)"]
    assert list(table["group"]) == ["matmul", "inc", "plain", "sum", "matmul"]
    assert set(table["worker"]) == {"tcp://w:1 thread 0", "tcp://w:2 thread 1"}
    assert list(table["error"].isna()) == [True, True, True, False, False]
    assert table["stop"].iloc[1] - table["start"].iloc[1] == pytest.approx(0.25)
    assert len(tasks.names) == 4  # one name per key stem, shared by the matmul rows


def test_a_late_clock_correction_moves_one_row_and_keeps_its_submit() -> None:
    tasks = TaskCollector()
    tasks.add_rows(_rows(["a-1", "a-2"], ["a", "a"]))
    tasks.shift(1, -0.125)
    tasks.shift(99, 5.0)  # not a row: nothing
    table = tasks.snapshot()
    assert table["start"].tolist() == pytest.approx([1.5, 2.375])
    assert table["stop"].tolist() == pytest.approx([1.75, 2.625])
    assert table["submit"].tolist() == pytest.approx([1.0, 1.0])


def _python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip()


def test_cluster_wiring_waits_for_distributed_to_be_imported() -> None:
    out = _python(
        """
        import sys
        from daskprofile.record import clusters
        calls = []
        cancel = clusters.when_distributed(lambda: calls.append("distributed" in sys.modules))
        other = clusters.when_distributed(lambda: calls.append("cancelled"))
        other()
        print("before", calls, "daskprofile.distributed" in sys.modules)
        import distributed
        print("after", calls, any(type(f).__name__ == "_AfterImport" for f in sys.meta_path))
        import inspect, distributed.client
        print("source", bool(inspect.getsource(distributed.client.Client.compute)))
        """
    )
    assert out.splitlines() == ["before [] False", "after [True] False", "source True"]


def test_the_watch_sees_each_submission_before_it_leaves_and_is_removed_after() -> None:
    out = _python(
        """
        import warnings
        from distributed import Client, LocalCluster
        from daskprofile.distributed import watch
        seen = []
        def listener(client, keys):
            seen.append((client.id == c.id, sorted(map(str, keys))))
        def broken(client, keys):
            raise RuntimeError("listener bug")
        with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
            with Client(cluster) as c:
                watch.add_listener(listener)
                watch.add_listener(broken)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    assert c.submit(sum, [1, 2], key="s-1").result() == 3
                    assert c.gather(c.map(abs, [-1, -2], key=["m-1", "m-2"])) == [1, 2]
                print(seen)
                print(len([w for w in caught if "listener bug" in str(w.message)]))
                watch.remove_listener(listener)
                print(watch.listening(), hasattr(Client._graph_to_futures, "__wrapped__"))
        """
    )
    lines = out.splitlines()
    assert lines[0] == "[(True, ['s-1']), (True, ['m-1', 'm-2'])]"
    assert lines[1] == "1"  # the broken listener warned once and was switched off
    assert lines[2] == "False False"


def test_a_listener_that_raises_never_fails_the_submission() -> None:
    import distributed

    from daskprofile.distributed import watch

    def broken(client: Any, keys: Any) -> None:
        raise RuntimeError("boom")

    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        watch.add_listener(broken)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert client.submit(sum, [2, 3]).result() == 5
        finally:
            watch.remove_listener(broken)
        assert not watch.listening()
