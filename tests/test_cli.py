"""``daskprofile run`` / ``view`` and ``python -m daskprofile``, through real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from daskprofile.cli import split_own_options

SCRIPT = """
import sys
import dask

def inc(x):
    return x + 1

if __name__ == "__main__":
    print("argv", sys.argv[1:])
    print("stderr line", file=sys.stderr)
    total = sum(dask.compute(*[dask.delayed(inc)(i) for i in range(10)], scheduler="{scheduler}"))
    print("total", total)
    {tail}
"""


def _script(tmp_path: Path, tail: str = "", scheduler: str = "threads") -> Path:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(SCRIPT).format(tail=tail, scheduler=scheduler))
    return path


def _cli(*args: str, cwd: Path, module: bool = False) -> subprocess.CompletedProcess[str]:
    if module:
        cmd = [sys.executable, "-m", "daskprofile", *args]
    else:
        cmd = [str(Path(sys.executable).parent / "daskprofile"), *args]
    return subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_run_keeps_output_and_writes_every_output(tmp_path: Path) -> None:
    script = _script(tmp_path)
    out = _cli(
        "run", str(script), "a", "b", "-o", "r.html", "--trace", "t.json",
        "--speedscope", "s.json", "--folded", "f.txt", "--save", "r.npz", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "argv ['a', 'b']" in out.stdout
    assert "total 55" in out.stdout
    assert "stderr line" in out.stderr
    assert "10 tasks" in out.stderr
    page = (tmp_path / "r.html").read_text()
    assert "<html" in page
    assert "job.py" in page
    trace = json.loads((tmp_path / "t.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert sum(1 for e in events if e.get("ph") == "X") == 10
    assert json.loads((tmp_path / "s.json").read_text())["$schema"].startswith("https://")
    assert (tmp_path / "f.txt").exists()

    import daskprofile

    run = daskprofile.load(tmp_path / "r.npz")
    assert len(run.tasks) == 10
    assert set(run.tasks["group"]) == {"inc"}


def test_processes_scheduler_script_runs_as_main(tmp_path: Path) -> None:
    script = _script(tmp_path, scheduler="processes")
    out = _cli("run", str(script), "--save", "r.npz", "-q", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "total 55" in out.stdout
    assert "tasks in" not in out.stderr  # --quiet

    import daskprofile

    assert len(daskprofile.load(tmp_path / "r.npz").tasks) == 10


@pytest.mark.parametrize(("tail", "code"), [("sys.exit(3)", 3), ("sys.exit()", 0), ("", 0)])
def test_exit_code_of_the_script_is_kept(tmp_path: Path, tail: str, code: int) -> None:
    out = _cli("run", str(_script(tmp_path, tail)), "-o", "r.html", cwd=tmp_path)
    assert out.returncode == code, out.stderr
    assert (tmp_path / "r.html").exists()


def test_exit_with_a_message_prints_it_and_exits_1(tmp_path: Path) -> None:
    out = _cli("run", str(_script(tmp_path, "sys.exit('bad input')")), cwd=tmp_path)
    assert out.returncode == 1
    assert "bad input" in out.stderr
    assert (tmp_path / "daskprofile-report.html").exists()  # the default output


def test_exception_prints_the_scripts_traceback_and_the_report_is_written(
    tmp_path: Path,
) -> None:
    out = _cli(
        "run", str(_script(tmp_path, "raise KeyError('boom')")), "-o", "r.html", cwd=tmp_path
    )
    assert out.returncode == 1
    assert "Traceback (most recent call last)" in out.stderr
    assert "KeyError: 'boom'" in out.stderr
    assert "runpy" not in out.stderr
    assert "cli.py" not in out.stderr
    assert "total 55" in out.stdout
    assert (tmp_path / "r.html").stat().st_size > 10_000


def test_python_dash_m_is_the_same_command(tmp_path: Path) -> None:
    out = _cli("run", str(_script(tmp_path)), "--save", "r.npz", cwd=tmp_path, module=True)
    assert out.returncode == 0, out.stderr
    view = _cli("view", "r.npz", "-o", "v.html", "--trace", "t.json", cwd=tmp_path, module=True)
    assert view.returncode == 0, view.stderr
    assert "<html" in (tmp_path / "v.html").read_text()
    assert json.loads((tmp_path / "t.json").read_text())


def test_arguments_after_double_dash_go_to_the_script(tmp_path: Path) -> None:
    out = _cli("run", "-o", "r.html", str(_script(tmp_path)), "x", "--", "-o", "y", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "argv ['x', '-o', 'y']" in out.stdout
    assert not (tmp_path / "y").exists()


def test_missing_script_and_bad_options_are_usage_errors(tmp_path: Path) -> None:
    missing = _cli("run", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no such script" in missing.stderr
    bad_dt = _cli("run", "--dt", "0", str(_script(tmp_path)), cwd=tmp_path)
    assert bad_dt.returncode == 2
    assert "dt" in bad_dt.stderr
    assert "Traceback" not in bad_dt.stderr
    no_command = _cli(cwd=tmp_path)
    assert no_command.returncode == 2
    assert "usage:" in no_command.stderr


def test_view_of_a_file_that_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "junk.npz").write_bytes(b"not a run")
    out = _cli("view", "junk.npz", cwd=tmp_path)
    assert out.returncode == 2
    assert "cannot read run file" in out.stderr
    assert "Traceback" not in out.stderr


def test_split_own_options() -> None:
    arity = {"-o": True, "--output": True, "-q": False}
    assert split_own_options(["a", "-o", "r.html", "-q", "b"], arity) == (
        ["-o", "r.html", "-q"],
        ["a", "b"],
    )
    assert split_own_options(["--output=r.html", "--", "-o", "x"], arity) == (
        ["--output=r.html"],
        ["-o", "x"],
    )
