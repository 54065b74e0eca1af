"""``daskprofile.compare(a, b)`` on real runs of the threads scheduler: a workload and a
variant with one group made slower (its tasks call one more function)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dask.base import named_schedulers

import daskprofile
from daskprofile.comparison import (
    Comparison,
    compare_findings,
    function_stats,
    group_stats,
    seconds_per_sample,
)
from daskprofile.export._diff import diff_color, diff_columns
from daskprofile.run import Run

#: the group made slower; its name would be markup if it were not escaped
SLOW = "x<b>slow</b>"
FINDING_COLUMNS = ["kind", "group", "impact_s", "share", "evidence", "message", "suggestion"]


def spin(seconds: float) -> int:
    """Busy pure Python for ``seconds`` (the stack sampler sees it)."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n


def extra(seconds: float) -> int:
    """The work only the slower variant does."""
    return spin(seconds)


def slow_task(seconds: float, more: float) -> int:
    return spin(seconds) + (extra(more) if more else 0)


def workload(more: float) -> dict[Any, Any]:
    """Six ``load`` tasks and six ``SLOW`` tasks that spin ``more`` s longer in ``extra``."""
    dsk: dict[Any, Any] = {("load", i): (spin, 0.01) for i in range(6)}
    dsk.update({(SLOW, i): (slow_task, 0.01, more) for i in range(6)})
    dsk["total"] = (sum, [*((SLOW, i) for i in range(6)), *(("load", i) for i in range(6))])
    return dsk


def profiled(more: float, interval: float = 0.005) -> Run:
    with daskprofile.profile(stacks=True, interval=interval) as run:
        named_schedulers["threads"](workload(more), "total", num_workers=2)
    return run


@pytest.fixture(scope="module")
def runs() -> tuple[Run, Run]:
    return profiled(0.0), profiled(0.05)


@pytest.fixture(scope="module")
def comparison(runs: tuple[Run, Run]) -> Comparison:
    return daskprofile.compare(*runs)


# -- groups --------------------------------------------------------------------------------


def test_the_slower_group_comes_first_with_a_positive_change(comparison: Comparison) -> None:
    groups = comparison.groups
    first = groups.iloc[0]
    assert first["group"] == SLOW
    assert first["status"] == "both"
    assert first["tasks_a"] == first["tasks_b"] == 6
    assert first["time_change"] > 0
    assert first["time_change"] == pytest.approx(first["time_b"] - first["time_a"])
    assert first["time_change_rel"] == pytest.approx(first["time_change"] / first["time_a"])
    assert first["mean_b"] > first["mean_a"]
    assert set(groups["group"]) == {SLOW, "load", "total"}
    assert abs(groups.set_index("group").loc["load", "time_change"]) < first["time_change"]
    assert comparison.tasks_change == 0
    assert comparison.before.tasks == comparison.after.tasks == 13


def test_swapping_the_runs_flips_the_sign(runs: tuple[Run, Run], comparison: Comparison) -> None:
    back = daskprofile.compare(runs[1], runs[0])
    assert back.groups.iloc[0]["group"] == SLOW
    assert back.groups.iloc[0]["time_change"] == pytest.approx(
        -comparison.groups.iloc[0]["time_change"]
    )
    assert back.wall_time_change == pytest.approx(-comparison.wall_time_change)


def test_run_compare_is_compare_with_the_run_as_baseline(
    runs: tuple[Run, Run], comparison: Comparison
) -> None:
    via_run = runs[0].compare(runs[1])
    assert via_run.a is runs[0]
    assert via_run.b is runs[1]
    pd.testing.assert_frame_equal(via_run.groups, comparison.groups)


def test_peak_cache_per_group_comes_from_the_cache_table(comparison: Comparison) -> None:
    slow = comparison.groups.set_index("group").loc[SLOW]
    assert slow["peak_cache_a"] == slow["peak_cache_b"] == 6  # six results held until "total"


def test_groups_only_in_one_run_are_new_or_gone(runs: tuple[Run, Run]) -> None:
    a = pd.DataFrame({"tasks": [2, 1], "time": [1.0, 0.5], "mean": [0.5, 0.5]}, index=["x", "y"])
    a["peak_cache"] = np.nan
    b = a.rename(index={"y": "z"})
    from daskprofile.comparison import compare_groups

    out = compare_groups(a.rename_axis("group"), b.rename_axis("group")).set_index("group")
    assert out.loc["y", "status"] == "gone"
    assert out.loc["y", "time_change"] == -0.5
    assert out.loc["z", "status"] == "new"
    assert out.loc["z", "tasks_a"] == 0
    assert np.isnan(out.loc["z", "time_change_rel"])
    assert out.loc["x", "time_change"] == 0


# -- functions -----------------------------------------------------------------------------


def test_the_function_only_the_slower_run_calls_shows_up(comparison: Comparison) -> None:
    functions = comparison.functions.set_index("function")
    (extra_label,) = [f for f in functions.index if f.startswith("extra (")]
    row = functions.loc[extra_label]
    assert row["inclusive_s_a"] == 0
    assert row["samples_a"] == 0
    assert row["inclusive_s_b"] > 0
    assert row["samples_b"] > 0
    (spin_label,) = [f for f in functions.index if f.startswith("spin (")]
    assert functions.loc[spin_label, "self_change_s"] > 0
    assert comparison.functions.iloc[0]["function"] == spin_label  # most self time gained


def test_estimated_seconds_add_up_to_the_sampled_groups_time(runs: tuple[Run, Run]) -> None:
    run = runs[1]
    times = group_stats(run)["time"]
    sampled = [g for g in run.stacks if run.stacks[g]["count"]]
    assert function_stats(run)["self_s"].sum() == pytest.approx(times[sampled].sum())


def _resampled(run: Run, factor: int, keep_tasks: bool = True) -> Run:
    """``run`` as if sampled ``factor`` times as often: every count times ``factor``, the
    interval divided by it (and, with ``keep_tasks=False``, no task rows)."""
    d = run.to_dict()
    d = copy.deepcopy(d)

    def scale(node: dict[str, Any]) -> None:
        node["count"] *= factor
        node["lines"] = {k: v * factor for k, v in (node.get("lines") or {}).items()}
        for child in node["children"].values():
            scale(child)

    for tree in d["stacks"].values():
        scale(tree)
    d["meta"]["options"]["interval"] = run.meta.options["interval"] / factor
    if not keep_tasks:
        d["tasks"] = {}
    return Run.from_dict(d)


@pytest.mark.parametrize("keep_tasks", [True, False])
def test_runs_sampled_at_different_rates_compare_in_seconds(
    runs: tuple[Run, Run], keep_tasks: bool
) -> None:
    base = _resampled(runs[1], 1, keep_tasks)
    finer = _resampled(runs[1], 4, keep_tasks)
    c = daskprofile.compare(base, finer)
    f = c.functions
    assert (f["self_samples_b"] == 4 * f["self_samples_a"]).all()
    assert f["self_s_b"].to_numpy() == pytest.approx(f["self_s_a"].to_numpy())
    assert np.abs(f["self_change_s"]).max() < 1e-9
    assert seconds_per_sample(finer) == pytest.approx(
        {g: s / 4 for g, s in seconds_per_sample(base).items()}
    )


# -- findings ------------------------------------------------------------------------------


def _findings(rows: list[tuple[str, Any, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(k, g, s, s / 10, {}, f"{k} of {g}", "") for k, g, s in rows], columns=FINDING_COLUMNS
    )


def test_findings_that_appeared_went_away_or_changed() -> None:
    a = _findings([("gil-bound", "x", 2.0), ("idle", None, 1.0), ("memory", "m", 0.5)])
    b = _findings([("gil-bound", "x", 0.5), ("overhead-bound", "y", 0.8), ("memory", "m", 0.52)])
    out = compare_findings(a, b).set_index("kind")
    assert out.loc["gil-bound", "change"] == "changed"
    assert out.loc["gil-bound", "impact_change"] == pytest.approx(-1.5)
    assert out.loc["idle", "change"] == "went away"
    assert np.isnan(out.loc["idle", "impact_b"])
    assert out.loc["overhead-bound", "change"] == "appeared"
    assert out.loc["memory", "change"] == "same"
    assert list(out.index[:2]) == ["gil-bound", "idle"]  # biggest change of impact first


def test_findings_without_a_findings_method_are_empty() -> None:
    assert compare_findings(None, None).empty
    one = compare_findings(None, _findings([("idle", None, 1.0)]))
    assert list(one["change"]) == ["appeared"]


def test_the_comparison_uses_run_findings_when_the_run_has_it(comparison: Comparison) -> None:
    columns = ["kind", "group", "change", "impact_a", "impact_b", "impact_change", "message"]
    assert list(comparison.findings.columns) == columns
    if callable(getattr(comparison.a, "findings", None)):
        assert len(comparison.findings) >= len(comparison.a.findings())
        assert comparison.notes == []  # both runs' findings were computed
    else:
        assert comparison.findings.empty


# -- saved runs, bad files -----------------------------------------------------------------


def test_saved_runs_compare_like_the_runs(
    runs: tuple[Run, Run], comparison: Comparison, tmp_path: Path
) -> None:
    a = runs[0].save(tmp_path / "a.daskprof")
    b = runs[1].save(tmp_path / "b.daskprof")
    loaded = daskprofile.compare(a, Path(b))
    pd.testing.assert_frame_equal(loaded.groups, comparison.groups)
    pd.testing.assert_frame_equal(loaded.functions, comparison.functions)
    assert loaded.wall_time_change == pytest.approx(comparison.wall_time_change)


def test_unreadable_files_are_value_errors_naming_the_file(
    runs: tuple[Run, Run], tmp_path: Path
) -> None:
    good = runs[0].save(tmp_path / "good.daskprof")
    (tmp_path / "corrupt.daskprof").write_bytes(b"PK\x03\x04 not really a zip")
    np.savez(tmp_path / "foreign.npz", x=np.arange(3))
    head = json.dumps({"format": "something-else", "version": 1}).encode()
    np.savez(tmp_path / "other.npz", __json__=np.frombuffer(head, dtype=np.uint8))
    cases = {
        "missing.daskprof": "no such run file",
        "corrupt.daskprof": "not a daskprofile run file",
        "foreign.npz": "not a daskprofile run file",
        "other.npz": "not a daskprofile run",
    }
    for name, why in cases.items():
        with pytest.raises(ValueError, match=why) as err:
            daskprofile.compare(good, tmp_path / name)
        assert name in str(err.value)
        assert str(err.value).startswith("b: ")
    with pytest.raises(TypeError, match=r"^a must be"):
        daskprofile.compare(42, good)  # type: ignore[arg-type]


# -- views ---------------------------------------------------------------------------------


def test_summary_is_json_with_the_run_wide_changes(comparison: Comparison) -> None:
    summary = json.loads(json.dumps(comparison.summary(), allow_nan=False))
    assert summary["tasks"] == {"a": 13, "b": 13, "change": 0}
    wall = summary["wall_time"]
    assert wall["change"] == pytest.approx(wall["b"] - wall["a"])
    assert summary["groups"][0]["group"] == SLOW
    assert summary["groups"][0]["time_change"] > 0


def test_text_and_html_reprs_name_the_group_the_html_escaped(comparison: Comparison) -> None:
    text = repr(comparison)
    assert text.splitlines()[0].startswith("daskprofile diff")
    group_lines = text.split("Task groups")[1].splitlines()
    assert group_lines[2].lstrip().startswith(SLOW)
    assert "+" in group_lines[2]
    page = comparison._repr_html_()
    assert "x&lt;b&gt;slow&lt;/b&gt;" in page
    assert SLOW not in page


def test_diff_colours_red_slower_blue_faster_grey_same() -> None:
    red, blue, grey = diff_color(1.0, 2.0, 2.0), diff_color(2.0, 1.0, 2.0), diff_color(1, 1, 2)
    assert int(red[1:3], 16) > int(red[5:7], 16)
    assert int(blue[5:7], 16) > int(blue[1:3], 16)
    assert grey == "#dddddd"


def test_the_flame_rows_carry_both_runs_and_widths_of_b(runs: tuple[Run, Run]) -> None:
    data, views = diff_columns(
        (runs[0].stacks, seconds_per_sample(runs[0])),
        (runs[1].stacks, seconds_per_sample(runs[1])),
    )
    assert views[0] == ("all", "All groups")
    assert views[1][1].startswith(SLOW)  # the group that changed most
    rows = pd.DataFrame(data)
    all_view = rows[rows["view"] == "all"]
    tops = all_view[all_view["depth"] == 0]
    assert tops["right_b"].max() == pytest.approx(1.0)
    assert tops["right_a"].max() == pytest.approx(1.0)
    slow = tops[tops["name"] == SLOW].iloc[0]
    assert slow["b"] > slow["a"]
    assert slow["color"] == diff_color(slow["a"], slow["b"], max(tops["a"].sum(), tops["b"].sum()))
    new = all_view[all_view["name"] == "extra"].iloc[0]
    assert new["a"] == 0
    assert new["b"] > 0
    assert new["change_text"].endswith("(new)")
    assert new["right_a"] == new["left_a"]  # no width in a
