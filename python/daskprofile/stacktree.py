"""Pure helpers for stack trees: build, merge, export (folded, speedscope), hot lines.

A tree is the nested form of ``distributed.profile``, so trees from both merge together::

    {"identifier": "name;filename;firstlineno",   # "root" at the top
     "description": {"filename", "name", "line_number", "line"},
     "count": samples through this node (inclusive),
     "children": {identifier: tree},
     "lines": {line number: samples at that line in this node}}   # ours, optional

``count`` is inclusive: a node's own (self) samples are ``count - sum(child counts)``. The
innermost frame of every sample is kept, so leaves have non-zero counts. ``lines`` keeps
per-line counts that ``hot_lines`` reads; other tools ignore the extra key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import CodeType, FunctionType, MethodType
from typing import Any, NamedTuple

from . import codemap

Tree = dict[str, Any]


class FrameInfo(NamedTuple):
    """One stack frame, as sampled: which function and which line in it."""

    filename: str
    name: str
    firstlineno: int
    lineno: int

    @property
    def identifier(self) -> str:
        """The function-level node key, the same string as ``distributed.profile``'s."""
        return f"{self.name};{self.filename};{self.firstlineno}"


def relabel(info: FrameInfo) -> FrameInfo:
    """``info`` named as the user knows it (:func:`.codemap.user_filename`): the original
    file of code that ran as a pickled copy, ``"Cell In[N]"`` for a notebook cell."""
    filename = codemap.user_filename(info.filename, info.name, info.firstlineno)
    return info if filename == info.filename else info._replace(filename=filename)


def create() -> Tree:
    """An empty tree (the root of one group's samples)."""
    return {
        "identifier": "root",
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
        "count": 0,
        "children": {},
    }


def _new_node(frame: FrameInfo) -> Tree:
    return {
        "identifier": frame.identifier,
        "description": {
            "filename": frame.filename,
            "name": frame.name,
            "line_number": frame.lineno,
            "line": "",
        },
        "count": 0,
        "children": {},
        "lines": {},
    }


def build(stacks: Mapping[tuple[int, ...], int], frames: Sequence[FrameInfo]) -> Tree:
    """A tree from ``{stack of frame ids (outermost first): samples}``.

    ``frames[fid]`` describes frame id ``fid``. A line seen twice in one stack (recursion)
    is counted once per sample in ``lines``.
    """
    root = create()
    for stack, n in stacks.items():
        root["count"] += n
        node = root
        seen: set[int] | None = set() if len(set(stack)) != len(stack) else None
        for fid in stack:
            frame = frames[fid]
            children = node["children"]
            node = children.get(frame.identifier)
            if node is None:
                node = children[frame.identifier] = _new_node(frame)
            node["count"] += n
            if seen is None or fid not in seen:
                lines = node["lines"]
                lines[frame.lineno] = lines.get(frame.lineno, 0) + n
                if seen is not None:
                    seen.add(fid)
    _describe(root)
    return root


def _describe(root: Tree) -> None:
    """Point each node's description at its hottest line and fill in that line's text."""
    for node in _walk(root):
        lines = node.get("lines")
        if not lines:
            continue
        line = max(lines, key=lines.__getitem__)
        desc = node["description"]
        desc["line_number"] = line
        desc["line"] = codemap.getline(desc["filename"], line).strip()


def _walk(tree: Tree) -> Iterator[Tree]:
    """Every node of ``tree``, depth first, without recursion."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(node["children"].values())


def merge(*trees: Tree) -> Tree:
    """Sum trees with the same root identifier into a new tree (inputs are untouched)."""
    out = create()
    if trees:
        out["identifier"] = trees[0]["identifier"]
        out["description"] = dict(trees[0]["description"])
    for tree in trees:
        _add_into(out, tree)
    return out


def _add_into(dest: Tree, src: Tree) -> None:
    todo = [(dest, src)]
    while todo:
        d, s = todo.pop()
        d["count"] += s["count"]
        if "lines" in s:
            lines = d.setdefault("lines", {})
            for line, n in s["lines"].items():
                lines[int(line)] = lines.get(int(line), 0) + n
        for ident, child in s["children"].items():
            target = d["children"].get(ident)
            if target is None:
                target = d["children"][ident] = {
                    "identifier": ident,
                    "description": dict(child["description"]),
                    "count": 0,
                    "children": {},
                }
            todo.append((target, child))


def merge_groups(*group_trees: Mapping[str, Tree]) -> dict[str, Tree]:
    """Merge several ``{group: tree}`` mappings group by group."""
    by_group: dict[str, list[Tree]] = {}
    for trees in group_trees:
        for group, tree in trees.items():
            by_group.setdefault(group, []).append(tree)
    return {group: merge(*trees) for group, trees in by_group.items()}


def self_count(node: Tree) -> int:
    """Samples whose innermost frame is this node."""
    return int(node["count"]) - sum(int(c["count"]) for c in node["children"].values())


def first_line(node: Tree) -> int:
    """The line where the node's function starts (from its identifier), else its line."""
    head, _, last = str(node["identifier"]).rpartition(";")
    if head and last.isdigit():
        return int(last)
    return int(node["description"]["line_number"])


def frame_label(node: Tree) -> str:
    """``name (filename:first line)``: the same for a function on every path and in every
    run (so folded files diff well), without ``;`` or newlines."""
    desc = node["description"]
    label = f"{desc['name']} ({desc['filename']}:{first_line(node)})"
    return label.replace(";", ":").replace("\n", " ")


def _paths(tree: Tree) -> Iterator[tuple[list[Tree], int]]:
    """(path of nodes below the root, self count) for every node with self samples."""
    todo: list[tuple[Tree, list[Tree]]] = [(c, [c]) for c in tree["children"].values()]
    while todo:
        node, path = todo.pop()
        own = self_count(node)
        if own > 0:
            yield path, own
        todo.extend((c, [*path, c]) for c in node["children"].values())


def to_folded_lines(trees: Mapping[str, Tree]) -> list[str]:
    """Collapsed stacks ``group;frame;frame count`` (for flamegraph.pl, inferno, speedscope)."""
    out = []
    for group, tree in trees.items():
        head = group.replace(";", ":").replace("\n", " ")
        for path, own in _paths(tree):
            out.append(";".join([head, *map(frame_label, path)]) + f" {own}")
    return sorted(out)


class SharedFrames(NamedTuple):
    """Trees flattened the way speedscope's file format wants them.

    ``frames`` is the shared frame table (``{"name", "file", "line"}``, ``line`` being where
    the function starts, as speedscope expects); ``profiles`` maps
    each group to ``(samples, weights)``: each sample a stack of indices into ``frames``,
    outermost first, weighted by its number of samples.
    """

    frames: list[dict[str, Any]]
    profiles: dict[str, tuple[list[list[int]], list[int]]]


def to_shared_frames(trees: Mapping[str, Tree]) -> SharedFrames:
    """Flatten ``{group: tree}`` into one frame table and per-group weighted samples."""
    frames: list[dict[str, Any]] = []
    index: dict[tuple[str, str, int], int] = {}

    def frame_id(node: Tree) -> int:
        desc = node["description"]
        key = (desc["name"], desc["filename"], first_line(node))
        if key not in index:
            index[key] = len(frames)
            frames.append({"name": key[0], "file": key[1], "line": key[2]})
        return index[key]

    profiles = {}
    for group, tree in trees.items():
        samples, weights = [], []
        for path, own in sorted(_paths(tree), key=lambda p: [n["identifier"] for n in p[0]]):
            samples.append([frame_id(n) for n in path])
            weights.append(own)
        profiles[group] = (samples, weights)
    return SharedFrames(frames, profiles)


def _matcher(func_or_name: object, argument: str = "func_or_name") -> Callable[[Tree], bool]:
    """A predicate on nodes for a function, method, code object or function name.

    A function or code object is matched by its mapped identifier (:mod:`.codemap`): the
    original file of code pickled by value, ``"Cell In[N]"`` for a notebook cell, so the
    function the user holds matches its frames on every scheduler. ``TypeError`` naming
    ``argument`` for anything else."""
    target = func_or_name
    if isinstance(target, MethodType):
        target = target.__func__
    if isinstance(target, (staticmethod, classmethod)):
        target = target.__func__
    if isinstance(target, FunctionType):
        target = target.__code__
    if isinstance(target, CodeType):
        ident = codemap.code_identifier(target)
        return lambda node: bool(node["identifier"] == ident)
    if isinstance(target, str):
        name = target.rsplit(".", 1)[-1]
        return lambda node: bool(node["description"]["name"] == name)
    raise TypeError(
        f"{argument} must be a function, code object or function name, "
        f"got {type(func_or_name).__name__}"
    )


def hot_lines(
    trees: Mapping[str, Tree] | Iterable[Tree], func_or_name: object
) -> list[tuple[str, int, int]]:
    """``(filename, line, samples)`` of one function's lines, hottest first.

    Counts are inclusive (time at that line including what it calls), summed over every
    call path and group.
    """
    match = _matcher(func_or_name)
    roots = trees.values() if isinstance(trees, Mapping) else trees
    totals: dict[tuple[str, int], int] = {}
    for root in roots:
        for node in _walk(root):
            if node["identifier"] == "root" or not match(node):
                continue
            filename = node["description"]["filename"]
            for line, n in node.get("lines", {}).items():
                key = (filename, int(line))
                totals[key] = totals.get(key, 0) + int(n)
    return sorted(((f, ln, n) for (f, ln), n in totals.items()), key=lambda r: (-r[2], r[0], r[1]))


def line_counts(
    trees: Mapping[str, Tree], func_or_name: object, argument: str = "func_or_name"
) -> dict[str, dict[tuple[str, str, int], int]]:
    """Per group, ``{(identifier, filename, line): samples}`` of the lines of the
    function(s) ``func_or_name`` names (inclusive counts, summed over call paths)."""
    match = _matcher(func_or_name, argument)
    out: dict[str, dict[tuple[str, str, int], int]] = {}
    for group, root in trees.items():
        totals: dict[tuple[str, str, int], int] = {}
        for node in _walk(root):
            if node["identifier"] == "root" or not match(node):
                continue
            ident, filename = str(node["identifier"]), node["description"]["filename"]
            for line, n in node.get("lines", {}).items():
                key = (ident, filename, int(line))
                totals[key] = totals.get(key, 0) + int(n)
        if totals:
            out[group] = totals
    return out


def identifiers(trees: Iterable[Tree]) -> set[str]:
    """The identifiers of every node below the roots of ``trees``."""
    return {str(n["identifier"]) for root in trees for n in _walk(root)} - {"root"}
