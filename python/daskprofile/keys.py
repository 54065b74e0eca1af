"""Task keys -> display labels, groups and colours.

A *group* is what a task runs, read from its key the way dask names layers:
``'inc-4f2a...'`` -> ``'inc'``, ``('sum-aggregate-ab12', 0, 1)`` -> ``'sum-aggregate'``.
Fused ``_execute_subgraph`` tasks are named after the layers fused into them
(``'ones_like-add-mul-sum'``).

Everything here is cheap on repeated names: the work per distinct name is memoised in
small bounded dictionaries, so unique keys (``'inc-<uuid>'``) never grow a cache.
"""

from __future__ import annotations

import colorsys
import threading
import zlib
from typing import Any

from dask.utils import key_split

_HEX = frozenset("0123456789abcdef")
_MEMO_MAX = 4096
_memo: dict[str, str] = {}
_colors: dict[str, str] = {}

#: at most this many layer names make up a fused group name
FUSED_PARTS = 4


def _is_token(word: str) -> bool:
    """Whether ``word`` ends a group name (a number, a hash, anything not a plain word)."""
    if not word.isalpha():
        return True
    return len(word) == 8 and word[0] in _HEX


def stem_end(name: str) -> int:
    """Where the first token word (a number, a hash) of a ``-``-separated name starts,
    or -1: ``'inc-e6382f4d-1cc7'`` -> 4. The group depends only on ``name[:stem_end]``."""
    i = name.find("-")
    while i > 0:
        j = name.find("-", i + 1)
        if _is_token(name[i + 1 : j] if j >= 0 else name[i + 1 :]):
            return i + 1
        i = j
    return -1


def _remember(name: str, group: str) -> str:
    if len(_memo) >= _MEMO_MAX:
        _memo.clear()
    _memo[name] = group
    return group


def name_group(name: str) -> str:
    """Group of a key's name part (``'sum-aggregate-ab12'`` -> ``'sum-aggregate'``)."""
    group = _memo.get(name)
    if group is not None:
        return group
    end = stem_end(name)
    if end > 0:
        # the group depends only on the words before the first token: memoise that stem,
        # so unique keys ('inc-<uuid>') share one entry
        stem = name[: end - 1]
        group = _memo.get(stem)
        if group is None:
            group = _remember(stem, key_split(stem))
        return group
    return _remember(name, key_split(name))


def key_name(key: Any) -> str:
    """The name part of a key: the first element of a tuple key, the key itself if a string."""
    while type(key) is tuple and key:
        key = key[0]
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode(errors="replace")
    return str(key)


def key_group(key: Any) -> str:
    """Group of a key (``'inc-4f2a...'`` -> ``'inc'``)."""
    return name_group(key_name(key))


def key_label(key: Any) -> str:
    """Display string of a key: the key itself for strings, ``str(key)`` otherwise."""
    if type(key) is str:
        return key
    if isinstance(key, bytes):
        return key.decode(errors="replace")
    return str(key)


def _fused_layers(task: Any) -> list[str] | None:
    """Groups of the layers fused in an ``_execute_subgraph`` task, in execution order."""
    try:
        from dask._task_spec import _execute_subgraph
    except ImportError:  # pragma: no cover - older dask
        return None
    if getattr(task, "func", None) is not _execute_subgraph:
        return None
    inner = task.args[0]
    if not isinstance(inner, dict):
        return None
    groups: list[str] = []
    for inner_key in reversed(list(inner)):  # dask lists the output first
        group = key_group(inner_key)
        if group not in groups:
            groups.append(group)
    return groups


def task_group(key: Any, task: Any = None) -> str:
    """Group of a task: its key's group, or the fused layers' names for a fused task."""
    layers = _fused_layers(task) if task is not None else None
    if not layers:
        return key_group(key)
    if len(layers) > FUSED_PARTS:
        layers = [*layers[: FUSED_PARTS - 1], layers[-1]]
    return "-".join(layers)


def group_color(group: str) -> str:
    """A stable colour (``'#rrggbb'``) for a group, the same in every run and process."""
    color = _colors.get(group)
    if color is None:
        h = zlib.crc32(group.encode("utf-8", "replace"))
        hue = (h & 0xFFFF) / 0x10000
        light = 0.45 + ((h >> 16) & 0xFF) / 0xFF * 0.15
        sat = 0.55 + ((h >> 24) & 0xFF) / 0xFF * 0.3
        r, g, b = colorsys.hls_to_rgb(hue, light, sat)
        color = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
        if len(_colors) < _MEMO_MAX:
            _colors[group] = color
    return color


class GroupIndex:
    """Interns groups as small ints: ``index(key)`` is a dict lookup for known names.

    Memoised per key *name* (the string part of a tuple key, the head of ``'inc-<hash>'``),
    so unique keys do not grow it.
    """

    def __init__(self) -> None:
        self.groups: list[str] = []
        self._ids: dict[str, int] = {}
        self._names: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> dict[str, int]:
        """Memo of key names (and stems) -> group id: a hit is the whole lookup."""
        return self._names

    def group_id(self, group: str) -> int:
        """Id of ``group``, added if new (thread-safe)."""
        gid = self._ids.get(group)
        if gid is None:
            with self._lock:
                gid = self._ids.get(group)
                if gid is None:
                    gid = len(self.groups)
                    self.groups.append(group)
                    self._ids[group] = gid
        return gid

    def index(self, key: Any, task: Any = None) -> int:
        """Group id of ``key`` (``task``, if given, names fused tasks after their layers)."""
        name = key_name(key)
        gid = self._names.get(name)
        if gid is not None:
            return gid
        end = stem_end(name)
        short = name[:end] if end > 0 else name
        gid = self._names.get(short)
        if gid is None:
            gid = self._names[short] = self.group_id(task_group(key, task))
        if type(key) is tuple:
            self._names[name] = gid
        return gid
