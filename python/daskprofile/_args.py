"""Command-line options of ``profile()``, shared by the magics and ``daskprofile run``.

Kept apart from both so that the magic never imports the command line (and vice versa).
"""

from __future__ import annotations

import argparse
from typing import Any

#: ``--no-NAME`` switches a collector off
COLLECTORS = ("tasks", "resources", "cache", "stacks")


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-tasks/--no-resources/--no-cache/--no-stacks``, ``--dt``, ``--interval``."""
    group = parser.add_argument_group("what to collect")
    for name in COLLECTORS:
        group.add_argument(
            f"--no-{name}",
            dest=name,
            action="store_false",
            default=None,
            help=f"do not collect {name}",
        )
    group.add_argument("--dt", metavar="SECONDS", help="resource sampling period (e.g. 0.1, 50ms)")
    group.add_argument(
        "--interval", metavar="SECONDS", help="stack sampling period (e.g. 0.01, 5ms)"
    )


def profile_kwargs(ns: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of ``profile()`` from parsed options (``None``: dask's config)."""
    kwargs: dict[str, Any] = {name: getattr(ns, name) for name in COLLECTORS}
    kwargs["dt"] = _duration(ns.dt)
    kwargs["interval"] = _duration(ns.interval)
    return kwargs


def _duration(text: str | None) -> float | str | None:
    """A number of seconds if ``text`` is one, else the string (``"5ms"``) or None."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def option_arity(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Option string -> whether it takes a value, for the options of ``parser``."""
    return {
        opt: action.nargs != 0
        for action in parser._actions
        for opt in action.option_strings
        if opt not in ("-h", "--help")
    }
