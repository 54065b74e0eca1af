"""Plain-words formatting of the figures findings quote (seconds, bytes, shares)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["finding", "pct", "secs", "size"]


def secs(s: float) -> str:
    """``1.23 s``, ``45 ms``, ``120 us``."""
    a = abs(s)
    if a >= 100:
        return f"{s:.0f} s"
    if a >= 1:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def size(n: float) -> str:
    """``1.5 GB``, ``300 MB``, ``12 kB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def pct(x: float) -> str:
    """``42%``."""
    return f"{100 * x:.0f}%"


def finding(  # noqa: PLR0917 - every rule builds its rows the same way
    kind: str,
    group: str,
    impact: float,
    wall: float,
    evidence: dict[str, Any],
    message: str,
    suggestion: str,
    *,
    groups: Sequence[str] = (),
    rows: Sequence[int] | None = None,
) -> dict[str, Any]:
    """One finding row (``share``: the impact as a share of the wall time). ``groups``: the
    task groups it concerns, ``rows``: the task rows it names (a chain's, in order), for
    the views to highlight; neither is a column of :func:`~daskprofile.findings.frame`."""
    impact = max(0.0, float(impact))
    out = {
        "kind": kind,
        "group": group,
        "impact_s": impact,
        "share": impact / wall if wall > 0 else 0.0,
        "evidence": {k: _plain(v) for k, v in evidence.items()},
        "message": message,
        "suggestion": suggestion,
        "groups": [str(g) for g in groups],
    }
    if rows is not None:
        out["rows"] = [int(r) for r in rows]
    return out


def _plain(value: Any) -> Any:
    """JSON-friendly figures: rounded floats, ints, strings, lists of them."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return _plain(value.item())
    return value
