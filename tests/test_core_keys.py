"""Groups and colours from keys."""

from __future__ import annotations

import dask.array as da

import daskprofile
from daskprofile.keys import GroupIndex, group_color, key_group, task_group


def test_groups_from_keys() -> None:
    assert key_group("inc-4f2a5c7b6d8e4f2a5c7b6d8e4f2a5c7b") == "inc"
    assert key_group(("sum-aggregate-ab12", 0, 1)) == "sum-aggregate"
    assert key_group("hello-world-1") == "hello-world"
    assert key_group("x") == "x"
    assert key_group(("x-abcdefab", 3)) == "x"
    assert key_group(b"bytes-key-1") == "bytes-key"


def test_fused_tasks_named_after_their_layers() -> None:
    x = da.ones((20, 20), chunks=10)
    y = ((x + 1) * 2).sum()
    with daskprofile.profile(resources=False, stacks=False, cache=False) as run:
        y.compute(scheduler="sync")
    groups = set(run.tasks["group"])
    assert any("add" in g and "mul" in g for g in groups), groups


def test_colours_stable_and_distinct() -> None:
    assert group_color("inc") == group_color("inc")
    assert group_color("inc").startswith("#")
    assert len(group_color("inc")) == 7
    assert len({group_color(g) for g in ["inc", "add", "sum", "mul", "getitem"]}) == 5


def test_group_index_memo_is_bounded_by_names() -> None:
    gi = GroupIndex()
    for i in range(1000):
        gi.index(f"inc-{i:032x}")
        gi.index(("arr-abc12345", i))
    assert gi.groups == ["inc", "arr"]
    assert len(gi._names) <= 4
    assert task_group("inc-1") == "inc"
