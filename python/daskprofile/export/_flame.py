"""Flame-graph rectangles from stack trees (x in [0, 1] of each group's samples); each
keeps its node's identifier, which the snapshot's source view (``_source_view``) looks up."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ._common import Tree, children, is_root, tree_total

#: nodes kept per group (the heaviest); finer ones are narrower than a pixel anyway
MAX_NODES = 3_000
#: nodes narrower than this share of their group are dropped
MIN_SHARE = 1 / 5_000
#: characters a full-width rectangle can show
FULL_WIDTH_CHARS = 180

_WARM = [
    "#f2a65a",
    "#eec170",
    "#e07a5f",
    "#f4d35e",
    "#ee964b",
    "#f7b267",
    "#f79d65",
    "#e9c46a",
    "#f4845f",
    "#f6bd60",
]

COLUMNS = (
    "group",
    "identifier",
    "left",
    "right",
    "top",
    "bottom",
    "depth",
    "name",
    "file",
    "line",
    "code",
    "count",
    "share",
    "label",
    "color",
)


def _color(filename: str) -> str:
    """A warm colour per source file, stable across runs."""
    digest = hashlib.blake2b(filename.encode("utf-8", "replace"), digest_size=2).digest()
    return _WARM[int.from_bytes(digest, "big") % len(_WARM)]


def _label(name: str, share: float) -> str:
    """The function name, shortened to what fits its rectangle at full view."""
    fits = int(share * FULL_WIDTH_CHARS)
    if fits < 4:
        return ""
    return name if len(name) <= fits else name[: fits - 1] + "\u2026"


def _threshold(tree: Tree, total: int) -> float:
    """Smallest count kept: the MAX_NODES-th heaviest node, at least MIN_SHARE of total."""
    counts: list[int] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        counts.append(int(node.get("count", 0)))
        stack.extend((node.get("children") or {}).values())
    counts.sort(reverse=True)
    kth = counts[MAX_NODES - 1] if len(counts) >= MAX_NODES else 0
    return max(float(kth), total * MIN_SHARE, 1e-12)


def _append(
    data: dict[str, list[Any]], group: str, node: Tree, *, left: float, depth: int, total: int
) -> None:
    desc = node.get("description") or {}
    share = int(node.get("count", 0)) / total
    name = str(desc.get("name") or node.get("identifier") or "?")
    filename = str(desc.get("filename") or "")
    row = {
        "group": group,
        "identifier": str(node.get("identifier") or ""),
        "left": left,
        "right": left + share,
        "top": depth - 0.45,
        "bottom": depth + 0.45,
        "depth": depth,
        "name": name,
        "file": filename,
        "line": str(desc.get("line_number", "")),
        "code": str(desc.get("line") or "").strip(),
        "count": int(node.get("count", 0)),
        "share": share,
        "label": _label(name, share),
        "color": _color(filename or name),
    }
    for column in COLUMNS:
        data[column].append(row[column])


def _add_group(data: dict[str, list[Any]], group: str, tree: Tree) -> int:
    """Append one group's rectangles; return its sample total."""
    top = children(tree) if is_root(tree) else [tree]
    total = sum(int(n.get("count", 0)) for n in top) if is_root(tree) else tree_total(tree)
    if total <= 0:
        return 0
    keep = _threshold(tree, total)
    stack: list[tuple[Tree, float, int]] = []
    offset = 0.0
    for node in top:
        stack.append((node, offset, 0))
        offset += int(node.get("count", 0)) / total
    while stack:
        node, left, depth = stack.pop()
        if int(node.get("count", 0)) < keep:
            continue
        _append(data, group, node, left=left, depth=depth, total=total)
        x = left
        for kid in children(node):
            stack.append((kid, x, depth + 1))
            x += int(kid.get("count", 0)) / total
    return total


def flame_columns(stacks: Mapping[str, Tree]) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """Columns of every group's rectangles, and each group's sample total."""
    data: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    totals: dict[str, int] = {}
    for group in sorted(stacks):
        total = _add_group(data, str(group), stacks[group])
        if total:
            totals[str(group)] = total
    return data, totals
