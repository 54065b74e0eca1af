"""ProgressBar (text and widget) on a dask.distributed cluster: real LocalClusters, a real
kernel, nothing mocked but one failure."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest

distributed = pytest.importorskip("distributed")

from daskprofile import diagnostics  # noqa: E402
from daskprofile.distributed import watch  # noqa: E402
from daskprofile.distributed.source import ClusterSource  # noqa: E402
from daskprofile.jupyter import widgets  # noqa: E402
from daskprofile.record import clusters  # noqa: E402
from nbkernel import execute, outputs, progress_models, stream, widget_views  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("distributed_threads")]

ROOT = Path(__file__).resolve().parents[1]
PERCENT = re.compile(r"\| (\d+)% Completed \|")


def inc(x: int) -> int:
    time.sleep(0.02)
    return x + 1


def boom() -> None:
    raise ZeroDivisionError("boom")


def graph(**sizes: int) -> list[Any]:
    """Delayed tasks in groups of known sizes: ``graph(alpha=30)`` -> ``('alpha', i)`` keys."""
    return [
        dask.delayed(inc)(i, dask_key_name=(name, i)) for name, n in sizes.items() for i in range(n)
    ]


def our_plugins(client: Any) -> list[str]:
    """daskprofile's plugins on the scheduler (its scheduler probe is named after a topic)."""

    def on_scheduler(dask_scheduler: Any) -> list[str]:
        return sorted(p for p in dask_scheduler.plugins if p.startswith("daskprofile"))

    return list(client.run_on_scheduler(on_scheduler))


def percents(text: str) -> list[int]:
    return [int(p) for p in PERCENT.findall(text)]


def lines(text: str) -> list[str]:
    """The final state of each line the bar wrote (what a terminal shows)."""
    return [line.split("\r")[-1] for line in text.split("\n") if line.strip()]


@pytest.fixture
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def displayed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the widget bar displays, as if in a kernel."""
    import IPython.display

    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    return shown


def widget_bar(**kwargs: Any) -> widgets.ProgressBar:
    bar = widgets.ProgressBar(**kwargs)
    bar.text = False  # widget mode without a frontend
    return bar


# -- the text bar --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["x.compute", "client.compute"])
def test_text_bar_follows_a_cluster_compute_to_100(client: Any, how: str) -> None:
    out = io.StringIO()
    tasks = graph(alpha=30, beta=10)  # ~0.4 s on two workers
    bar = diagnostics.ProgressBar(out=out, dt=0.05)
    with bar:
        if how == "x.compute":
            results = dask.compute(*tasks)  # the default client
        else:
            results = client.gather(client.compute(tasks))
    assert list(results) == [i + 1 for i in range(30)] + [i + 1 for i in range(10)]
    text = out.getvalue()
    (line,) = lines(text)
    assert line.startswith("[" + "#" * 40 + "] | 100% Completed |")
    assert text.endswith("\n")
    assert any(0 < p < 100 for p in percents(text)), text  # it moved while running
    counts = bar._cluster.counts()
    assert dict(counts.done) == {"alpha": 30, "beta": 10}
    assert dict(counts.total) == {"alpha": 30, "beta": 10}
    assert (counts.graphs, counts.pending, counts.erred) == (1, 0, 0)


def test_text_bar_draws_one_line_per_burst_of_cluster_work(client: Any) -> None:
    out = io.StringIO()
    with diagnostics.ProgressBar(out=out, dt=0.05):
        dask.compute(*graph(first=10))
        time.sleep(0.6)  # the first burst is seen to end (rows within 0.15 s)
        dask.compute(*graph(second=10))
    assert [p.split("|")[1].strip() for p in lines(out.getvalue())] == ["100% Completed"] * 2


def test_text_bar_failed_cluster_task_does_not_reach_100(client: Any) -> None:
    out = io.StringIO()
    bar = diagnostics.ProgressBar(out=out, dt=0.05)
    with bar, pytest.raises(ZeroDivisionError):
        client.gather([*client.compute(graph(fine=5)), client.submit(boom)])
    assert "100%" not in out.getvalue()
    counts = bar._cluster.counts()
    assert counts.erred == 1
    assert counts.done.get("fine") == 5
    assert not counts.done.get("boom")


def test_leaving_with_cluster_work_running_is_bounded_and_leaves_nothing(client: Any) -> None:
    out = io.StringIO()
    bar = diagnostics.ProgressBar(out=out, dt=0.05)
    with bar:
        future = client.submit(time.sleep, 2.5)
        during = our_plugins(client), watch.listening()
        left = time.perf_counter()
    waited = time.perf_counter() - left
    assert during == ([during[0][0]], True)
    assert waited < 2 * 0.05 + 1 + 0.5  # settle bound, then removing the plugin
    assert "100%" not in out.getvalue()
    assert out.getvalue().endswith("\n")
    assert our_plugins(client) == []
    assert not watch.listening()
    future.result()


def test_nothing_of_the_cluster_part_is_left_after_the_block(client: Any) -> None:
    bar = diagnostics.ProgressBar(out=io.StringIO())
    with bar:
        dask.compute(*graph(alpha=4))
        inside = our_plugins(client), watch.listening()
    assert len(inside[0]) == 1
    assert inside[1] is True
    assert our_plugins(client) == []
    assert not watch.listening()
    assert clusters._finder is None
    assert clusters._waiting == []
    topics = client.run_on_scheduler(
        lambda dask_scheduler: [t for t in dask_scheduler._broker._topics if "daskprofile" in t]
    )
    assert topics == []


def test_register_follows_clusters_until_unregistered(client: Any) -> None:
    out = io.StringIO()
    bar = diagnostics.ProgressBar(out=out, dt=0.05)
    bar.register()
    try:
        dask.compute(*graph(alpha=6))
        deadline = time.monotonic() + 3
        while "100%" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)  # the burst ends on its own
        assert lines(out.getvalue())[-1].split("|")[1].strip() == "100% Completed"
        assert watch.listening()
    finally:
        bar.unregister()
    assert not watch.listening()
    assert our_plugins(client) == []


def test_a_failing_cluster_part_warns_once_and_never_fails_the_compute(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("broken source")

    monkeypatch.setattr(ClusterSource, "expect", broken)

    def two_computes() -> tuple[Any, Any]:
        with diagnostics.ProgressBar(out=io.StringIO()):
            return dask.compute(*graph(alpha=3)), dask.compute(*graph(beta=3))

    with pytest.warns(RuntimeWarning, match="progress bar stopped following") as caught:
        results = two_computes()
    assert results == ((1, 2, 3), (1, 2, 3))
    assert len([w for w in caught if "daskprofile" in str(w.message)]) == 1
    assert not watch.listening()
    assert our_plugins(client) == []


LAZY = """
import io, sys, time
from operator import add
import dask, dask.threaded
from daskprofile.diagnostics import ProgressBar
from daskprofile.record import clusters

out = io.StringIO()
with ProgressBar(out=out):  # (dask.compute would import distributed itself: dask's get does not)
    dask.threaded.get({"a": (add, 1, 2)}, "a")
    hooked = clusters._finder is not None
print("local", hooked, "distributed" in sys.modules, clusters._finder is None)
print("local line", out.getvalue().split("\\r")[-1].split("|")[1].strip())

def inc(x):
    time.sleep(0.01)
    return x + 1

out = io.StringIO()
with ProgressBar(out=out):
    import distributed
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=":0")
    client = distributed.Client(cluster)
    dask.compute(*[dask.delayed(inc)(i, dask_key_name=("alpha", i)) for i in range(20)])
from daskprofile.distributed import watch
print("cluster", out.getvalue().split("\\r")[-1].strip(), watch.listening())
client.close()
cluster.close()
"""


def test_distributed_is_imported_only_when_the_user_imports_it(tmp_path: Path) -> None:
    script = tmp_path / "lazy.py"
    script.write_text(textwrap.dedent(LAZY))
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    local, local_line, cluster = done.stdout.splitlines()[-3:]
    assert local == "local True False True"  # a hook waited for distributed, then went
    assert local_line == "local line 100% Completed"
    assert cluster.startswith("cluster [" + "#" * 40 + "] | 100% Completed |")
    assert cluster.endswith(" False")


# -- the widget bar, in this process -------------------------------------------------------


def test_widget_moves_while_the_cluster_runs_and_ends_complete(
    client: Any, displayed: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    shows: list[tuple[int, int, str]] = []
    show = widgets._View.show

    def recording(self: Any, header: Any, done: int, total: int, style: str, groups: Any) -> None:
        shows.append((done, total, style))
        show(self, header, done, total, style, groups)

    monkeypatch.setattr(widgets._View, "show", recording)
    bar = widget_bar(dt=0.05)
    with bar:
        dask.compute(*graph(alpha=30, beta=10))
    header, progress, groups = bar.widget.children
    assert (progress.value, progress.max, progress.bar_style) == (40, 40, "success")
    assert header.value.startswith("Completed 40 / 40 tasks · 1 compute · erred 0")
    assert "30 / 30" in groups.value
    assert "10 / 10" in groups.value
    assert any(0 < done < 40 and style == "info" for done, _, style in shows), shows
    assert displayed == [bar.widget]


def test_widget_merges_local_and_cluster_groups(client: Any, displayed: list[Any]) -> None:
    bar = widget_bar(dt=0.05)
    with bar:
        dask.compute(*graph(alpha=5), scheduler="threads")  # local
        dask.compute(*graph(alpha=10, beta=4))  # the cluster
    header, groups = bar.widget.children[0].value, bar.widget.children[2].value
    assert header.startswith("Completed 19 / 19 tasks · 2 computes · erred 0")
    assert "15 / 15" in groups
    assert "4 / 4" in groups
    assert bar.tally.rows(extra=bar._cluster.counts().groups()) == [
        ("alpha", 15, 15),
        ("beta", 4, 4),
    ]


def test_registered_widget_ends_by_itself_when_the_cluster_is_done(
    client: Any, displayed: list[Any]
) -> None:
    bar = widget_bar(dt=0.05)
    bar.register()
    try:
        dask.compute(*graph(alpha=8))
        deadline = time.monotonic() + 3
        while bar.widget.children[1].bar_style != "success" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert bar.widget.children[1].bar_style == "success"
        assert bar.widget.children[0].value.startswith("Completed 8 / 8 tasks")
        assert bar._wbar_timer is None  # the timer ended with the work
    finally:
        bar.unregister()
    assert our_plugins(client) == []


def test_widget_left_running_at_the_end_of_the_block_shows_where_it_stopped(
    client: Any, displayed: list[Any]
) -> None:
    bar = widget_bar(dt=0.05)
    with bar:
        dask.compute(*graph(alpha=4))
        future = client.submit(time.sleep, 2.5)
    header, progress, _ = bar.widget.children
    assert header.value.startswith("Stopped at 4 / 5 tasks · 2 computes · erred 0")
    assert (progress.value, progress.max, progress.bar_style) == (4, 5, "warning")
    assert bar._wbar_timer is None
    assert our_plugins(client) == []
    future.result()


# -- the widget bar in a real kernel --------------------------------------------------------

SETUP = """
import threading, time
import dask, distributed
import daskprofile
from daskprofile.distributed import watch
cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                   dashboard_address=":0")
client = distributed.Client(cluster)
def inc(x):
    time.sleep(0.01)
    return x + 1
def boom():
    raise ZeroDivisionError("boom")
def graph(**sizes):
    return [dask.delayed(inc)(i, dask_key_name=(name, i))
            for name, n in sizes.items() for i in range(n)]
def state():
    plugins = client.run_on_scheduler(lambda dask_scheduler: sorted(
        p for p in dask_scheduler.plugins if p.startswith("daskprofile")))
    threads = [t.name for t in threading.enumerate() if t.name.startswith("daskprofile")]
    return len(plugins), watch.listening(), threads
"""
CELLS = {
    "setup": SETUP,
    "cluster": "with daskprofile.ProgressBar():\n"
    "    dask.compute(*graph(alpha=30, beta=10))\n"
    "    during = state()\n"
    "print(daskprofile.ProgressBar.__module__, during)",
    "mixed": "with daskprofile.ProgressBar():\n"
    "    dask.compute(*graph(gamma=5), scheduler='threads')\n"
    "    dask.compute(*graph(delta=20))",
    "fails": "with daskprofile.ProgressBar():\n"
    "    try:\n        client.submit(boom).result()\n"
    "    except ZeroDivisionError:\n        pass",
    "after": "print(state())",
    "close": "client.close(); cluster.close()",
}
INDEX = {name: i for i, name in enumerate(CELLS)}


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return execute(list(CELLS.values()), tmp_path_factory.mktemp("cluster-widgets"))


def test_kernel_widget_shows_a_cluster_compute_complete(nb: Any) -> None:
    assert not any(outputs(nb, i, "error") for i in range(len(CELLS)))
    (model_id,) = widget_views(nb, INDEX["cluster"])
    header, bar, groups = progress_models(nb, model_id)
    assert (bar["value"], bar["max"], bar["bar_style"]) == (40, 40, "success")
    assert header["value"].startswith("Completed 40 / 40 tasks · 1 compute · erred 0")
    rows = re.findall(r'title="([^"]+)".*?dp-n">([\d,]+) / ([\d,]+)<', groups["value"])
    assert rows == [("alpha", "30", "30"), ("beta", "10", "10")]
    printed = stream(nb, INDEX["cluster"])  # the widget bar; a probe and a listener meanwhile
    assert printed.startswith("daskprofile.jupyter.widgets (1, True, [")


def test_kernel_widget_merges_local_and_cluster_and_shows_failures(nb: Any) -> None:
    (model_id,) = widget_views(nb, INDEX["mixed"])
    header, bar, groups = progress_models(nb, model_id)
    assert (bar["value"], bar["max"], bar["bar_style"]) == (25, 25, "success")
    assert header["value"].startswith("Completed 25 / 25 tasks · 2 computes · erred 0")
    assert "5 / 5" in groups["value"]
    assert "20 / 20" in groups["value"]
    (model_id,) = widget_views(nb, INDEX["fails"])
    header, bar, _ = progress_models(nb, model_id)
    assert bar["bar_style"] == "danger"
    assert "erred 1" in header["value"]


def test_kernel_leaves_no_plugin_listener_or_thread(nb: Any) -> None:
    assert stream(nb, INDEX["after"]).strip() == "(0, False, [])"
