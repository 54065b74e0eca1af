"""``daskprofile diff BEFORE AFTER`` through a real subprocess: a text table, JSON, and an
HTML page opened in Chromium with the network refused; unreadable files are named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from test_compare import SLOW, profiled
from test_export_html import JS_COUNT

#: whether the page has a <b> element reading "slow" (the group name parsed as markup)
JS_BOLD_SLOW = "() => [...document.querySelectorAll('b')].some(e => e.textContent === 'slow')"
#: the option labels of the flame graph's view selector, through shadow roots
#: whether the flame rectangles' current x columns are those of run ``side`` ("a" or "b")
JS_WIDTHS_OF = """(side) => { const doc = Bokeh.documents[0];
  const src = [...doc.all_models].find(m => m.data && m.data.left_a);
  return Array.from(src.data.left).every((v, i) => v === src.data["left_" + side][i]); }"""
JS_OPTIONS = """() => { const out = []; const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName === 'OPTION') out.push(el.textContent);
    if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return out; }"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("diff")
    before = profiled(0.0).save(folder / "before.daskprof")
    after = profiled(0.05).save(folder / "after.daskprof")
    return Path(before), Path(after)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(Path(sys.executable).parent / "daskprofile"), *args]
    return subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_diff_prints_a_table_with_the_slower_group_first(files: tuple[Path, Path]) -> None:
    before, after = files
    out = _cli("diff", before.name, after.name, cwd=before.parent)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("Task groups")[1].splitlines()
    assert lines[2].split()[0] == SLOW
    assert "wall time" in out.stdout
    assert "tasks" in out.stdout
    assert out.stderr == ""


def test_diff_json_is_the_summary(files: tuple[Path, Path]) -> None:
    before, after = files
    out = _cli("diff", str(before), str(after), "--format", "json", cwd=before.parent)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["groups"][0]["group"] == SLOW
    assert summary["groups"][0]["time_change"] > 0
    assert summary["tasks"]["change"] == 0


def test_diff_page_opens_offline_with_the_group_escaped(
    files: tuple[Path, Path], tmp_path: Path, open_offline: Any
) -> None:
    before, after = files
    out = _cli("diff", str(before), str(after), "-o", "diff.html", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""  # with -o, nothing on stdout unless --format is given
    assert "wrote diff.html" in out.stderr
    text = (tmp_path / "diff.html").read_text()
    assert "x&lt;b&gt;slow&lt;/b&gt;" in text
    assert "cdn.bokeh.org" not in text
    opened = open_offline(tmp_path / "diff.html")
    page = opened.page
    assert page.evaluate("() => Bokeh.documents.length") == 1
    assert page.evaluate(JS_COUNT, "CANVAS") > 0
    assert (opened.refused, opened.errors, opened.dialogs) == ([], [], [])
    body = page.inner_text("body")
    assert SLOW in body  # shown as text, in the groups table
    assert "Differential flame graph" in body
    assert not page.evaluate(JS_BOLD_SLOW)
    options = page.evaluate(JS_OPTIONS)
    assert options[0] == "All groups"
    assert options[1].startswith(f"{SLOW} (+")  # the flame's view of the slower group
    assert page.evaluate(JS_WIDTHS_OF, "b")
    page.get_by_text("width: a (before)").click()
    page.wait_for_function(JS_WIDTHS_OF, arg="a", timeout=10_000)
    assert not page.evaluate(JS_WIDTHS_OF, "b")


def test_unreadable_run_files_exit_2_naming_the_file(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    before, _ = files
    (tmp_path / "corrupt.daskprof").write_bytes(b"not a run")
    (tmp_path / "notes.json").write_text(json.dumps({"format": "daskprofile-run"}))
    for name in ("missing.daskprof", "corrupt.daskprof", "notes.json"):
        out = _cli("diff", str(before), name, "-o", "d.html", cwd=tmp_path)
        assert out.returncode == 2, (name, out.stderr)
        assert name in out.stderr
        assert out.stderr.startswith("daskprofile diff: b: ")
        assert "Traceback" not in out.stderr
        assert not (tmp_path / "d.html").exists()


def test_a_page_that_cannot_be_written_exits_1(files: tuple[Path, Path], tmp_path: Path) -> None:
    before, after = files
    out = _cli("diff", str(before), str(after), "-o", "no/such/dir/d.html", cwd=tmp_path)
    assert out.returncode == 1
    assert "could not write no/such/dir/d.html" in out.stderr
