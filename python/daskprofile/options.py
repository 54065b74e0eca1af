"""Validation of user arguments, with defaults from dask's config system.

Defaults live under the ``daskprofile`` namespace of ``dask.config``, e.g.::

    dask.config.set({"daskprofile.stacks.interval": "5ms"})

Durations accept numbers (seconds) or strings parsed by ``dask.utils.parse_timedelta``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import dask.config
from dask.utils import parse_timedelta

#: defaults, merged into dask's config at import (user settings take precedence)
DEFAULTS: dict[str, Any] = {
    "daskprofile": {
        "tasks": True,
        "cache": True,
        "resources": {"enabled": True, "dt": "100ms"},
        "stacks": {"enabled": True, "interval": "10ms"},
        "max-records": 2_000_000,
        "history": 8,
    }
}

_registered: list[dict[str, Any]] = []
_MISSING = object()


def register_defaults(defaults: dict[str, Any]) -> None:
    """Merge ``defaults`` into dask's config (user settings win) and remember them."""
    _registered.append(defaults)
    dask.config.update_defaults(defaults)


def config(name: str) -> Any:
    """The current value of ``daskprofile.<name>`` in dask's config.

    Defaults registered while a ``dask.config.set`` block was open are removed with the
    block's own keys when it exits (dask restores the config it saw on entry); they are
    merged back here, so a first ``profile()`` made inside such a block breaks nothing.
    """
    key = f"daskprofile.{name}"
    value = dask.config.get(key, default=_MISSING)
    if value is _MISSING:
        for defaults in _registered:
            dask.config.update(dask.config.config, defaults, priority="old")
        value = dask.config.get(key)
    return value


register_defaults(DEFAULTS)


#: the longest duration accepted (a sampling period beyond it is a mistake, and waits that
#: long overflow the platform's timeouts: the samplers' threads died of it)
MAX_DURATION = 86_400.0


def duration(name: str, value: Any) -> float:
    """A positive duration in seconds, at most a day; ``ValueError``/``TypeError`` naming
    ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{name} must be a number of seconds or a duration string, got {value!r}")
    try:
        seconds = float(parse_timedelta(value, default="seconds"))
    except (ValueError, KeyError, TypeError, IndexError, OverflowError) as exc:  # '': IndexError
        raise ValueError(
            f"{name} must be a duration such as 0.1 or '100ms', got {value!r}"
        ) from exc
    if not 0 < seconds <= MAX_DURATION:
        raise ValueError(
            f"{name} must be > 0 and at most a day ({MAX_DURATION:g} s), got {value!r}"
        )
    return seconds


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """An integer >= ``minimum``; ``ValueError``/``TypeError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    """A boolean; ``TypeError`` naming ``name``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def optional_callable(name: str, value: Any) -> Callable[..., Any] | None:
    """``None`` or a callable; ``TypeError`` naming ``name``."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r}")
    return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ProfileOptions:
    """What ``profile()`` collects, validated."""

    tasks: bool
    resources: bool
    cache: bool
    stacks: bool
    dt: float
    interval: float
    max_records: int
    metric: Callable[[Any], float] | None = None
    metric_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form, stored in ``run.meta.options``."""
        out = asdict(self)
        out["metric"] = getattr(self.metric, "__name__", None) if self.metric else None
        return out


def _pick(value: Any, name: str) -> Any:
    return config(name) if value is None else value


def profile_options(
    *,
    tasks: bool | None = None,
    resources: bool | None = None,
    cache: bool | None = None,
    stacks: bool | None = None,
    dt: Any = None,
    interval: Any = None,
    max_records: Any = None,
    metric: Any = None,
    metric_name: Any = None,
) -> ProfileOptions:
    """Validate ``profile()``'s arguments, filling what is ``None`` from dask's config."""
    if metric_name is not None and not isinstance(metric_name, str):
        raise TypeError(f"metric_name must be a string, got {metric_name!r}")
    return ProfileOptions(
        tasks=flag("tasks", _pick(tasks, "tasks")),
        resources=flag("resources", _pick(resources, "resources.enabled")),
        cache=flag("cache", _pick(cache, "cache")),
        stacks=flag("stacks", _pick(stacks, "stacks.enabled")),
        dt=duration("dt", _pick(dt, "resources.dt")),
        interval=duration("interval", _pick(interval, "stacks.interval")),
        max_records=positive_int("max_records", _pick(max_records, "max-records")),
        metric=optional_callable("metric", metric),
        metric_name=metric_name,
    )


def history_size() -> int:
    """How many finished runs ``recorder`` keeps in memory."""
    return positive_int("daskprofile.history", config("history"), minimum=0)
