"""The command line: ``daskprofile run`` profiles a script, ``daskprofile view`` renders a run,
``daskprofile diff`` compares two.

::

    daskprofile run script.py [args...] -o report.html [--trace trace.json]
                    [--speedscope out.json] [--folded out.txt] [--save run.npz]
    daskprofile view RUN_FILE [RUN_FILE...] -o report.html
    daskprofile diff BEFORE AFTER [-o diff.html] [--format text|json]

``run`` executes the script as ``__main__`` with its own ``sys.argv``, profiling every
Dask compute: the local schedulers' and those of every ``distributed.Client`` the script
uses (one it makes itself too); the script's output and exit code are kept, and the
outputs are written even when it fails. What could not be recorded (``run.meta.errors``)
is printed on stderr. daskprofile's options may come before or after
the script; arguments after ``--`` always go to the script. ``python -m daskprofile`` is
the same command.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from ._args import add_profile_arguments, option_arity, profile_kwargs
from ._version import __version__

PROG = "daskprofile"
DEFAULT_REPORT = "daskprofile-report.html"
#: the largest script shown as code in the report
MAX_CODE = 200_000


# ------------------------------------------------------------------ parser
def _add_outputs(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("outputs")
    group.add_argument("-o", "--output", metavar="HTML", help="self-contained HTML report")
    group.add_argument("--trace", metavar="JSON", help="Chrome trace (Perfetto, chrome://tracing)")
    group.add_argument("--speedscope", metavar="JSON", help="speedscope profile")
    group.add_argument("--folded", metavar="TXT", help="collapsed stacks (flamegraph.pl)")
    group.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")


def build_parser() -> argparse.ArgumentParser:
    """The ``daskprofile`` parser with its ``run`` and ``view`` commands."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="See where Dask computations spend their time, CPU and memory."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="profile every Dask compute of a Python script",
        description=f"Run a script as __main__, profiling its Dask computes "
        f"(default output: {DEFAULT_REPORT}). Arguments after '--' go to the script.",
    )
    run.add_argument("script", help="the Python script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    _add_outputs(run)
    run.add_argument("--save", metavar="RUN_FILE", help="save the run (daskprofile view reads it)")
    add_profile_arguments(run)
    view = commands.add_parser(
        "view", help="turn saved runs into a report", description="Render saved runs."
    )
    view.add_argument("runs", nargs="+", metavar="RUN_FILE", help="files written by --save")
    _add_outputs(view)
    _add_diff(commands)
    return parser


def _add_diff(commands: Any) -> None:
    """``daskprofile diff BEFORE AFTER``."""
    diff = commands.add_parser(
        "diff",
        help="compare two saved runs",
        description="Compare run BEFORE (the baseline) with run AFTER: time, tasks and memory "
        "per task group, time per function, findings that appeared or went away. Prints a "
        "table (or JSON); -o writes an HTML page with a differential flame graph.",
    )
    diff.add_argument("before", metavar="BEFORE", help="the baseline run file (from --save)")
    diff.add_argument("after", metavar="AFTER", help="the run file to compare with it")
    diff.add_argument("-o", "--output", metavar="HTML", help="self-contained HTML page")
    diff.add_argument(
        "--format",
        choices=("text", "json"),
        help="what to print on stdout (default: text; nothing with -o unless given)",
    )
    diff.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")


def split_own_options(args: Sequence[str], arity: dict[str, bool]) -> tuple[list[str], list[str]]:
    """(our options, the script's arguments) from what follows the script's path.

    Our options are recognised up to a ``--``; everything after it is the script's.
    """
    own: list[str] = []
    rest: list[str] = []
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            rest.extend(tokens)
            break
        name = token.split("=", 1)[0]
        if name not in arity:
            rest.append(token)
            continue
        own.append(token)
        if arity[name] and "=" not in token:
            own.append(next(tokens, ""))
    return own, rest


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv``; for ``run``, pull our options out of the script's arguments."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command == "run":
        run_parser = _subparser(parser, "run")
        own, rest = split_own_options(ns.args, option_arity(run_parser))
        if own:
            run_parser.parse_args([*own, ns.script], namespace=ns)
        ns.args = rest
    return ns


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: argparse.ArgumentParser = action.choices[name]
            return sub
    raise KeyError(name)


# ------------------------------------------------------------------ running a script
@contextmanager
def _script_environment(path: str, args: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python script.py args...`` would set them."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        yield
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path


def _exit_code(exc: SystemExit) -> int:
    """The process exit code Python gives for ``SystemExit(code)``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _script_traceback(exc: BaseException, path: str) -> TracebackType | None:
    """The traceback from the script's own first frame on (our frames dropped)."""
    tb = exc.__traceback__
    target = os.path.abspath(path)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    return tb or exc.__traceback__


def run_script(path: str, args: Sequence[str]) -> int:
    """Run ``path`` as ``__main__``; its exit code (1 and a traceback if it raised)."""
    with _script_environment(path, args):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            return _exit_code(exc)
        except KeyboardInterrupt as exc:
            traceback.print_exception(type(exc), exc, _script_traceback(exc, path))
            return 130
        except BaseException as exc:
            traceback.print_exception(type(exc), exc, _script_traceback(exc, path))
            return 1
    return 0


def _script_code(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            code = f.read(MAX_CODE + 1)
    except OSError:
        return None
    return code if len(code) <= MAX_CODE else code[:MAX_CODE] + "\n# ... (truncated)"


# ------------------------------------------------------------------ outputs
def _writers(ns: argparse.Namespace, code: str | None, title: str) -> list[tuple[str, Any]]:
    """(path, function writing the runs there) for every output asked for."""

    def html(runs: list[Any], path: str) -> Any:
        from .export.html import to_html

        return to_html(runs if len(runs) > 1 else runs[0], path, title, code=code)

    def single(method: str) -> Callable[[list[Any], str], Any]:
        return lambda runs, path: getattr(runs[-1], method)(path)

    table = [
        (ns.output, html),
        (ns.trace, single("to_chrome_trace")),
        (ns.speedscope, single("to_speedscope")),
        (ns.folded, single("to_folded")),
        (getattr(ns, "save", None), single("save")),
    ]
    return [(path, fn) for path, fn in table if path]


def write_outputs(runs: list[Any], writers: list[tuple[str, Any]]) -> list[str]:
    """Write every output; returns the paths that failed (each error printed)."""
    failed = []
    for path, write in writers:
        try:
            write(runs, path)
        except Exception as exc:
            print(f"{PROG}: could not write {path}: {exc}", file=sys.stderr)
            failed.append(path)
    return failed


def _summary_line(runs: list[Any], written: list[str]) -> str:
    tasks = sum(len(r.tasks) for r in runs)
    computes = sum(int(r.meta.computes or 0) for r in runs)
    schedulers = sorted({s for r in runs for s in r.meta.schedulers or []})
    wall = sum(float(r.summary().get("wall_time") or 0.0) for r in runs)
    where = f" ({', '.join(schedulers)})" if schedulers else ""
    wrote = f"; wrote {', '.join(written)}" if written else ""
    return f"{PROG}: {computes} computes, {tasks} tasks in {wall:.2f} s{where}{wrote}"


def _error_lines(runs: list[Any]) -> list[str]:
    """What the runs could not record (``run.meta.errors``), each once."""
    lines: list[str] = []
    for run in runs:
        for error in run.meta.errors or []:
            line = f"{PROG}: warning: {error.get('collector')}: {error.get('error')}"
            if line not in lines:
                lines.append(line)
    return lines


def _finish(ns: argparse.Namespace, runs: list[Any], writers: list[tuple[str, Any]]) -> bool:
    """Write the outputs, print what the runs could not record and the summary; False if an
    output failed."""
    failed = write_outputs(runs, writers)
    for line in _error_lines(runs):  # (even with --quiet: the outputs are incomplete)
        print(line, file=sys.stderr)
    if not ns.quiet:
        written = [path for path, _ in writers if path not in failed]
        print(_summary_line(runs, written), file=sys.stderr)
        for line in _finding_lines(runs):
            print(line, file=sys.stderr)
    return not failed


def _finding_lines(runs: list[Any], most: int = 5) -> list[str]:
    """The top findings of each run, one line each with what to try on the next."""
    lines: list[str] = []
    for run in runs:
        try:
            rows = run.summary().get("findings") or []
        except Exception:
            continue
        for row in rows[:most]:
            head = f"{row['kind']} ({row['impact_s']:.3g} s, {100 * row['share']:.0f}%)"
            lines += [f"{PROG}: finding: {head}: {row['message']}", f"    try: {row['suggestion']}"]
    return lines


# ------------------------------------------------------------------ commands
def cmd_run(ns: argparse.Namespace) -> int:
    """``daskprofile run``: the script's exit code (1 if it succeeded but an output failed)."""
    from .record.profile import profile

    if not os.path.isfile(ns.script):
        print(f"{PROG} run: no such script: {ns.script}", file=sys.stderr)
        return 2
    if not any((ns.output, ns.trace, ns.speedscope, ns.folded, ns.save)):
        ns.output = DEFAULT_REPORT
    try:
        block = profile(**profile_kwargs(ns))
    except (TypeError, ValueError) as exc:
        print(f"{PROG} run: {exc}", file=sys.stderr)
        return 2
    with block as run:
        code = run_script(ns.script, ns.args)
    title = " ".join(["daskprofile run", os.path.basename(ns.script), *ns.args])
    ok = _finish(ns, [run], _writers(ns, _script_code(ns.script), title))
    return code if code or ok else 1


def cmd_view(ns: argparse.Namespace) -> int:
    """``daskprofile view``: render saved runs (default output: the report)."""
    from .run import load

    if not any((ns.output, ns.trace, ns.speedscope, ns.folded)):
        ns.output = DEFAULT_REPORT
    try:
        runs = [load(path) for path in ns.runs]
    except Exception as exc:  # not a zip, not a run, newer version...
        print(f"{PROG} view: cannot read run file: {exc}", file=sys.stderr)
        return 2
    return 0 if _finish(ns, runs, _writers(ns, None, "daskprofile view")) else 1


def cmd_diff(ns: argparse.Namespace) -> int:
    """``daskprofile diff``: 0, 2 if a run file cannot be read, 1 if the page cannot be
    written."""
    from .comparison import compare

    try:
        comparison = compare(ns.before, ns.after)
    except (TypeError, ValueError) as exc:  # missing, corrupt or foreign file (named)
        print(f"{PROG} diff: {exc}", file=sys.stderr)
        return 2
    shown = ns.format or (None if ns.output else "text")
    if shown == "json":
        print(json.dumps(comparison.summary(), indent=1))
    elif shown == "text":
        print(comparison.to_text())
    if not ns.output:
        return 0
    try:
        comparison.to_html(ns.output)
    except Exception as exc:
        print(f"{PROG} diff: could not write {ns.output}: {exc}", file=sys.stderr)
        return 1
    if not ns.quiet:
        change = comparison.wall_time_change
        print(f"{PROG} diff: wall time {change:+.3f} s; wrote {ns.output}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``daskprofile`` and ``python -m daskprofile``; returns the exit code."""
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    command: Callable[[argparse.Namespace], int] = {
        "run": cmd_run,
        "view": cmd_view,
        "diff": cmd_diff,
    }[ns.command]
    return command(ns)
