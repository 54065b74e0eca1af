"""``%%daskprofile`` and ``%daskprofile``: profile a cell or one statement.

::

    %load_ext daskprofile

    %%daskprofile --no-stacks -o run --html report.html
    x.sum().compute()

    %%daskprofile --view bokeh      # the bokeh snapshot inline (~1.7 MB) instead
    x.sum().compute()

    total = %daskprofile x.sum().compute()

The cell runs under :func:`daskprofile.profile` with a progress bar; its value is
returned as usual and its exceptions propagate (the run still ends cleanly, and the
outputs asked for are still written). Then the inline view of the run is displayed: the
panel's own views (light: at most ~300 KB of notebook), or with ``--view bokeh`` the HTML
snapshot (see :mod:`daskprofile.jupyter.inline`).
Wrong options raise IPython's ``UsageError``: a message and the usage, no traceback.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import shlex
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, needs_local_scope

from .._args import add_profile_arguments, option_arity, profile_kwargs
from .inline import KINDS

__all__ = ["ProfileMagics", "load_ipython_extension", "parse_magic_line"]


class _ParseError(Exception):
    """A wrong magic line; the message ends with the usage."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _ParseError(f"{self.prog}: {message}\n\n{self.format_usage()}")


def build_parser(cell: bool) -> argparse.ArgumentParser:
    """The options of ``%%daskprofile`` (``cell``) or ``%daskprofile``."""
    prog = "%%daskprofile" if cell else "%daskprofile"
    parser = _Parser(
        prog=prog,
        usage="%(prog)s [options]" + ("" if cell else " STATEMENT"),
        description="Profile the Dask computes of a cell (or statement) and show the run.",
        add_help=False,
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help")
    add_profile_arguments(parser)
    out = parser.add_argument_group("outputs")
    out.add_argument("-o", dest="name", metavar="NAME", help="keep the Run in variable NAME")
    out.add_argument("--html", metavar="PATH", help="write the self-contained HTML snapshot")
    out.add_argument("--trace", metavar="PATH", help="write a Chrome trace (JSON)")
    out.add_argument("--save", metavar="PATH", help="save the run (daskprofile.load reads it)")
    out.add_argument(
        "--view",
        choices=KINDS,
        default="light",
        help="the view shown: light (the panel's views, ~300 KB at most; the default) or "
        "bokeh (the HTML snapshot, ~1.7 MB)",
    )
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no view")
    return parser


def _next_token(line: str, pos: int) -> tuple[str, int]:
    """The shell-like token at ``pos`` (quotes allowed) and the position after it."""
    stream = io.StringIO(line[pos:])
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    token = lexer.get_token() or ""
    return token, pos + stream.tell()


def _leading_options(line: str, arity: dict[str, bool]) -> tuple[list[str], str]:
    """(option tokens, the statement after them) of a ``%daskprofile`` line.

    Options (and their values) come first; the statement starts at the first word that
    is not an option, or after ``--``. The statement itself is never tokenised.
    """
    tokens: list[str] = []
    pos, want_value = 0, False
    while True:
        while pos < len(line) and line[pos].isspace():
            pos += 1
        if pos >= len(line):
            return tokens, ""
        if not want_value and line[pos] != "-":
            return tokens, line[pos:].rstrip()
        token, pos = _next_token(line, pos)
        if not want_value and token == "--":
            return tokens, line[pos:].strip()
        tokens.append(token)
        want_value = not want_value and "=" not in token and arity.get(token, False)


def parse_magic_line(line: str, cell: bool) -> tuple[argparse.Namespace, str]:
    """Options and statement of a magic line; ``_ParseError`` if they are wrong."""
    parser = build_parser(cell)
    if cell:
        try:
            tokens, statement = shlex.split(line), ""
        except ValueError as exc:  # unbalanced quotes
            parser.error(str(exc))
    else:
        try:
            tokens, statement = _leading_options(line, option_arity(parser))
        except ValueError as exc:
            parser.error(str(exc))
    ns = parser.parse_args(tokens)
    if ns.help:
        return ns, statement
    if ns.name is not None and not ns.name.isidentifier():
        parser.error(f"-o needs a Python variable name, got {ns.name!r}")
    if not cell and not statement:
        parser.error("a statement to profile is required")
    return ns, statement


# ---------------------------------------------------------------- running the code
def _split_last_expression(tree: ast.Module) -> tuple[ast.Module, ast.Expression | None]:
    """The cell without its last statement if that is an expression, and that expression."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        expr = ast.Expression(tree.body[-1].value)
        return ast.Module(body=tree.body[:-1], type_ignores=[]), expr
    return tree, None


def execute(shell: Any, code: str, local_ns: dict[str, Any] | None = None) -> Any:
    """Run ``code`` as IPython would (magics, ``!cmd``), returning its last expression."""
    __tracebackhide__ = True  # tracebacks start at the user's code
    source = shell.transform_cell(code)
    filename = shell.compile.cache(source, shell.execution_count, raw_code=code)
    tree = shell.transform_ast(shell.compile.ast_parse(source, filename=filename))
    body, last = _split_last_expression(tree)
    global_ns = shell.user_ns
    local = local_ns if local_ns is not None else global_ns
    exec(shell.compile(body, filename, "exec"), global_ns, local)
    if last is None:
        return None
    value = eval(shell.compile(last, filename, "eval"), global_ns, local)
    return None if code.rstrip().endswith(";") else value


# ---------------------------------------------------------------- after the run
def _write(what: str, write: Any) -> None:
    """Write one output; a failure is reported, never raised over the cell's outcome."""
    try:
        write()
    except Exception as exc:
        print(f"daskprofile: could not write the {what}: {exc}", file=sys.stderr)


def _outputs(run: Any, ns: argparse.Namespace, code: str) -> None:
    if ns.html:
        _write("HTML snapshot", lambda: run.to_html(ns.html, code=code))
    if ns.trace:
        _write("trace", lambda: run.to_chrome_trace(ns.trace))
    if ns.save:
        _write("run file", lambda: run.save(ns.save))


def _show(run: Any, code: str, kind: str) -> None:
    from .inline import display_run

    try:
        display_run(run, title="%%daskprofile", code=code, kind=kind)
    except Exception as exc:
        print(f"daskprofile: could not render the run: {exc!r}", file=sys.stderr)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from .widgets import ProgressBar

    with ProgressBar():
        yield


@magics_class
class ProfileMagics(Magics):
    """The ``daskprofile`` line and cell magic."""

    @needs_local_scope
    @line_cell_magic
    def daskprofile(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> Any:
        """Profile the Dask computes of a cell (``%%daskprofile``) or a statement.

        Options: ``--no-tasks/--no-resources/--no-cache/--no-stacks``, ``--dt``,
        ``--interval``, ``-o NAME``, ``--html PATH``, ``--trace PATH``, ``--save PATH``,
        ``--view light|bokeh``, ``--no-progress``, ``-q/--quiet``; ``-h`` for help.
        """
        __tracebackhide__ = True
        from ..record.profile import profile

        is_cell = cell is not None
        try:
            ns, statement = parse_magic_line(line, is_cell)
            if ns.help:
                print(build_parser(is_cell).format_help())
                return None
            block = profile(**profile_kwargs(ns))
        except _ParseError as exc:
            raise UsageError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            usage = build_parser(is_cell).format_usage()
            raise UsageError(f"{exc}\n\n{usage}") from None
        code = cell if cell is not None else statement
        if is_cell:
            local_ns = None  # a cell runs in the user namespace, like any cell
        with contextlib.ExitStack() as after:
            run = block.__enter__()
            after.callback(self._after, run, ns, code)
            after.callback(block.__exit__, None, None, None)
            with _progress(not (ns.quiet or ns.no_progress)):
                return execute(self.shell, code, local_ns)

    def _after(self, run: Any, ns: argparse.Namespace, code: str) -> None:
        """Keep the run, write the outputs and show the view (also when the code raised)."""
        if ns.name and self.shell is not None:
            self.shell.user_ns[ns.name] = run
        _outputs(run, ns, code)
        if not ns.quiet:
            _show(run, code, ns.view)


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (called by ``%load_ext daskprofile``)."""
    ipython.register_magics(ProfileMagics)
