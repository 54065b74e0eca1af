"""Run: views, summary, save/load, dict round trip, exports delegation."""

from __future__ import annotations

import json
import time
from operator import add
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest

import daskprofile
from daskprofile.run import FORMAT, Run


def busy(x: int) -> int:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.02:
        pass
    return x


@pytest.fixture(scope="module")
def run() -> Run:
    with daskprofile.profile(dt=0.01, interval=0.005) as r:
        xs = [dask.delayed(busy)(i) for i in range(6)]
        total = dask.delayed(sum)(xs)
        assert total.compute(scheduler="threads") == 15

        def fail(x: int) -> int:
            raise ValueError(x)

        with pytest.raises(ValueError):
            dask.delayed(fail)(1).compute(scheduler="sync")
    return r


def test_tasks_view_columns_and_values(run: Run) -> None:
    df = run.tasks
    assert list(df.columns) == [
        "key",
        "group",
        "worker",
        "submit",
        "start",
        "stop",
        "status",
        "error",
        "compute",
        "span",
    ]
    assert len(df) == 8
    assert set(df["group"]) == {"busy", "sum", "fail"}
    assert (df["submit"] <= df["start"]).all()
    assert (df["start"] <= df["stop"]).all()
    assert (df["start"] >= 0).all()
    assert df.loc[df["group"] == "fail", "status"].tolist() == ["error"]
    assert df.loc[df["group"] == "fail", "error"].tolist() == ["ValueError"]
    assert df["error"].isna().sum() == 7
    assert sorted(set(df["compute"])) == [min(df["compute"]), max(df["compute"])]


def test_resources_cache_stacks_views(run: Run) -> None:
    res = run.resources
    assert list(res.columns) == ["time", "cpu", "memory", "processes"]
    assert len(res) >= 2
    assert (res["memory"] > 0).all()
    cache = run.cache
    assert list(cache.columns) == ["time", "group", "metric"]
    assert set(cache["group"]) == {"busy", "sum"}
    # one series per group, ending empty once the compute is over
    assert cache.groupby("group")["metric"].last().tolist() == [0.0, 0.0]
    assert cache.loc[cache["group"] == "busy", "metric"].max() == 6
    assert "busy" in run.stacks
    assert not run.hot_lines(busy).empty


def test_summary(run: Run) -> None:
    s = run.summary()
    assert s["tasks"] == 8
    assert s["errors"] == 1
    assert s["computes"] == 2
    assert set(s["schedulers"]) == {"threads", "sync"}
    assert s["groups"][0]["group"] == "busy"
    assert s["groups"][0]["tasks"] == 6
    assert s["wall_time"] > 0.02
    assert s["dropped"]["tasks"] == 0
    json.dumps(s)


def test_save_load_round_trip(run: Run, tmp_path: Path) -> None:
    path = run.save(tmp_path / "run.dprof")
    assert Path(path).exists()
    assert not Path(path + ".npz").exists()
    back = daskprofile.load(path)
    pd.testing.assert_frame_equal(back.tasks, run.tasks)
    pd.testing.assert_frame_equal(back.cache, run.cache)
    pd.testing.assert_frame_equal(back.resources, run.resources)
    assert back.stacks == json.loads(json.dumps(run.stacks))
    assert back.meta["id"] == run.meta["id"]


def test_dict_round_trip_is_json(run: Run) -> None:
    d = json.loads(json.dumps(run.to_dict()))
    assert d["format"] == FORMAT
    back = Run.from_dict(d)
    pd.testing.assert_frame_equal(back.tasks, run.tasks)
    pd.testing.assert_frame_equal(back.cache, run.cache)


def test_load_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.npz"
    np.savez(bad, __json__=np.frombuffer(b'{"format": "other"}', dtype=np.uint8))
    with pytest.raises(ValueError, match="not a daskprofile run"):
        daskprofile.load(bad)
    newer = Run().to_dict() | {"version": 99}
    with pytest.raises(ValueError, match="newer"):
        Run.from_dict(newer)


def test_empty_run_views() -> None:
    r = Run()
    assert r.tasks.empty
    assert r.cache.empty
    assert r.resources.empty
    assert r.stacks == {}
    assert r.summary()["tasks"] == 0


def test_exports_delegate(run: Run, tmp_path: Path) -> None:
    trace = json.loads(Path(run.to_chrome_trace(tmp_path / "t.json")).read_text())
    assert trace
    assert Path(run.to_speedscope(tmp_path / "s.json")).exists()
    assert Path(run.to_folded(tmp_path / "f.txt")).read_text()


def test_key_labels_interned_per_group() -> None:
    dsk = {("x-abcdef12", i, j): (add, i, j) for i in range(3) for j in range(2)}
    dsk["inc-4f2a5c7b6d8e4f2a5c7b6d8e4f2a5c7b"] = (add, 1, 1)
    dsk["plain"] = (add, 1, 2)
    dsk["f-e6382f4d-1cc7-4ed7-84ec-5a9a4beb6998"] = (add, 1, 3)  # delayed: stored as 16 bytes
    dsk["f-E6382F4D-1CC7-4ED7-84EC-5A9A4BEB6998"] = (add, 1, 4)  # not lowercase: kept as text
    with daskprofile.profile(resources=False, stacks=False, cache=False) as r:
        dask.get(dsk, list(dsk))
    df = r.tasks.set_index("key")
    assert df.loc["('x-abcdef12', 2, 1)", "group"] == "x"
    assert df.loc["inc-4f2a5c7b6d8e4f2a5c7b6d8e4f2a5c7b", "group"] == "inc"
    assert df.loc["plain", "group"] == "plain"
    assert df.loc["f-e6382f4d-1cc7-4ed7-84ec-5a9a4beb6998", "group"] == "f"
    assert sorted(df.index) == sorted(str(k) for k in dsk)


def test_keys_of_single_rows_match_the_decoded_table() -> None:
    """A hover asks for one key: the live collector and the finished run decode just the
    rows asked for, and give what the full table gives (tuple, str and uuid keys, rows
    lost to the cap, rows out of range)."""
    from daskprofile.collectors.tasks import TaskCollector
    from daskprofile.hooks import add_listener, remove_listener

    xs = [("x-abcdef12", i, j) for i in range(20) for j in range(2)]
    dsk: dict[Any, Any] = {x: (add, x[1], x[2]) for x in xs}
    uid = "f-e6382f4d-1cc7-4ed7-84ec-5a9a4beb6998"  # delayed-style: 16 raw bytes
    dsk["plain"] = (sum, xs)  # the last three rows: each waits for the one before
    dsk[uid] = (add, "plain", 3)
    dsk["inc-4f2a5c7b6d8e4f2a5c7b6d8e4f2a5c7b"] = (add, uid, 1)
    collector = TaskCollector(max_records=30)
    add_listener(collector)
    try:
        dask.get(dsk, list(dsk))
    finally:
        remove_listener(collector)
    full = collector.snapshot()
    first = full["dropped"]
    assert first == len(dsk) - 30
    rows = [first + 29, first + 28, first + 27, first, first - 1, first + 30]
    expected = ["inc-4f2a5c7b6d8e4f2a5c7b6d8e4f2a5c7b", uid, "plain", full["key"][0], "", ""]
    assert full["key"][27:] == expected[2::-1]
    assert collector.keys_at(rows) == expected
    run = Run({}, {"tasks": collector.snapshot_compact()})
    assert run.task_keys([29, 28, 27, 0, -1, 30]) == expected
    assert run.task_keys(list(range(30))) == run.tasks["key"].tolist()
    # a hover on a finished run: the panel sends absolute rows
    from daskprofile.jupyter.publisher import _keys

    assert run.dropped("tasks") == first
    assert _keys(run, None, rows) == expected


class _Result:
    """A task result we can hold a weak reference to."""


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_kept_run_holds_no_results_or_tasks(scheduler: str) -> None:
    import gc
    import weakref

    made: list[weakref.ref[_Result]] = []

    def make(i: int) -> _Result:
        result = _Result()
        made.append(weakref.ref(result))
        return result

    parts = [dask.delayed(len)([dask.delayed(make)(i)]) for i in range(20)]
    with daskprofile.profile(interval=0.005) as run:
        assert dask.compute(*parts, scheduler=scheduler) == (1,) * 20
    gc.collect()
    assert len(made) == 20
    assert [r for r in made if r() is not None] == []  # the run (still alive) kept none
    assert len(run.tasks) == 40
    held = gc.get_referents(*vars(run).values())
    assert not [o for o in held if type(o).__name__ in ("Task", "DataNode", "_Result")]
