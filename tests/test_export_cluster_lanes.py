"""Where a cluster snapshot puts each action, and the workers table's "tasks run again":
pieces of ``export/_cluster_stream.py`` and ``_cluster_summary.py`` on small hand-made
tables (no cluster), pinned as they were before they skipped the tasks without an action
and ``run.reruns`` when no worker took tasks with it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from daskprofile.export._cluster_stream import _action_lanes, _rows_with_action
from daskprofile.export._cluster_summary import _reruns_by_worker
from daskprofile.export._common import TaskArrays

A, B, C = "tcp://10.0.0.1:1", "tcp://10.0.0.2:1", "tcp://10.0.0.3:1"


def _tasks(rows: list[tuple[str, str]]) -> TaskArrays:
    """Tasks ``(key, lane label)`` on the lanes of A (threads 0, 1) and B (thread 0)."""
    lanes = [f"{A} thread 0", f"{A} thread 1", f"{B} thread 0"]
    n = len(rows)
    return TaskArrays(
        key_column=pd.Series([k for k, _ in rows], dtype="str"),
        group=np.zeros(n, np.int32),
        lane=np.array([lanes.index(lane) for _, lane in rows], np.int32),
        submit=np.zeros(n),
        start=np.zeros(n),
        stop=np.ones(n),
        error=np.zeros(n, bool),
        error_type=np.full(n, None, object),
        groups=["g"],
        lanes=lanes,
    )


def test_the_rows_with_an_action_are_those_of_its_keys() -> None:
    keys = np.array(["a", "b", "a", "c", np.nan], object)
    assert _rows_with_action(keys, pd.Series(["a", "x"], dtype="str")).tolist() == [0, 2]
    assert _rows_with_action(keys, pd.Series([], dtype="str")).tolist() == []
    # a missing key matches a missing key, as the merge it feeds does
    with_missing = pd.Series(["c", None], dtype="str")
    assert _rows_with_action(keys, with_missing).tolist() == [3, 4]


def test_an_action_goes_on_the_lane_that_computed_its_task_on_its_worker() -> None:
    arrays = _tasks(
        [
            ("x", f"{A} thread 1"),
            ("y", f"{A} thread 0"),
            ("y", f"{B} thread 0"),  # computed on both workers: each keeps its own lane
            ("y", f"{A} thread 1"),  # again on A: the last lane there wins
            ("z", f"{B} thread 0"),
        ]
    )
    actions = pd.DataFrame(
        {
            "key": pd.Series(["x", "y", "y", "w", "z", "x"], dtype="str"),
            "worker": [A, A, B, B, C, C],
        }
    )
    lanes = list(arrays.lanes)
    got = _action_lanes(actions, arrays, lanes)
    # x on A: its lane; y on A: the last; y on B: B's; w (no task) on B: B's first lane;
    # z and x on C (computed nothing): a lane of C's own, appended
    assert got.tolist() == [1, 1, 2, 2, 3, 3]
    assert lanes == [*arrays.lanes, C]


class _Run:
    """A run whose ``reruns`` says when it is read."""

    def __init__(self, reruns: pd.DataFrame) -> None:
        self._reruns: pd.DataFrame = reruns
        self.read = 0

    @property
    def reruns(self) -> pd.DataFrame:
        self.read += 1
        out: pd.DataFrame = self._reruns
        return out


def _members(**took: list[str]) -> pd.DataFrame:
    empty: list[list[str]] = [[], []]
    columns: dict[str, Any] = {"address": [A, B], "lost": empty, "processing": empty}
    columns["killed"] = empty
    columns.update({k: [v, []] for k, v in took.items()})
    out: pd.DataFrame = pd.DataFrame(columns)
    return out


def test_tasks_run_again_are_read_only_when_a_worker_took_some() -> None:
    reruns = pd.DataFrame(
        {
            "key": ["k1", "k2", "k3", "k4"],
            "why": ["lost", "lost", "interrupted", "again"],
            "worker": [A, A, A, None],
            "killed": [False, False, True, False],
        }
    )
    run = _Run(reruns)
    assert _reruns_by_worker(run, _members()) == {}  # type: ignore[arg-type]
    assert run.read == 0  # no worker took tasks: no need to group the tasks by key
    took = _members(lost=["k1", "k2"], killed=["k3"])
    assert _reruns_by_worker(run, took) == {A: "2 lost, 1 failed (KilledWorker)"}  # type: ignore[arg-type]
    assert run.read == 1
