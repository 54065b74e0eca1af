"""Code mapped back to what the user knows: files of code pickled by value, notebook cells.

A function defined in ``__main__`` or a notebook runs on the processes scheduler and on a
cluster as a copy made by cloudpickle, whose code objects are named ``<dynamic-code>``
(line numbers are kept). Samplers running where the code runs name such frames
:func:`frame_filename`: ``<dynamic-code>#<fingerprint>``, the fingerprint hashing the
code's qualified name, first line and bytecode. The kernel knows the functions of the
graphs it submitted: :func:`learn` and :func:`learn_graph` register their code objects
(nested ones and the helpers of the same module they call too) under the same
fingerprint, and :func:`relabel` maps a sampled frame back to the original file. A frame
with no fingerprint (distributed's own profiler) is matched by name and first line when
one function only fits. What no graph taught is searched for once in ``__main__`` and in
the sources of the script and notebook cells (compiled again, not run).

Notebook cells (``/tmp/ipykernel_<pid>/<n>.py``) are named as IPython names them in
tracebacks: ``"Cell In[5]"``; :func:`getline` and :func:`source` still find their text.

Pure: no Jupyter import (IPython is read only if the process already imported it).
Cheap where it matters: a sampler fingerprints a code object once; the kernel relabels a
frame once (its frame table interns it) and learns a graph only when a frame it cannot
map arrives.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from types import CodeType, FunctionType, MethodType
from typing import Any

__all__ = [
    "DYNAMIC",
    "MAX_SOURCE_LINES",
    "code_identifier",
    "frame_filename",
    "getline",
    "learn",
    "learn_graph",
    "source",
    "sources",
    "user_filename",
]

#: the file name cloudpickle gives code it rebuilds from a pickle
DYNAMIC = "<dynamic-code>"
#: at most this many lines of a function's text are kept in ``run.sources``
MAX_SOURCE_LINES = 300
_SEP = "#"
#: objects looked at per :func:`learn` call, entries kept per table before it is reset
_BUDGET = 2000
_MAX_ENTRIES = 100_000
_MAX_ITEMS = 64  # items of one container looked at

_lock = threading.RLock()
#: fingerprint -> original filename
_by_fingerprint: dict[str, str] = {}
#: (name, first line) -> original filenames
_by_place: dict[tuple[str, int], set[str]] = {}
#: id -> object already learnt (held so the id stays unique)
_learnt: dict[int, Any] = {}
#: filename -> label ("Cell In[5]"), or None: not a cell
_cells: dict[str, str | None] = {}
#: label -> the cell's real filename (in linecache)
_cell_files: dict[str, str] = {}
#: fingerprints searched for in vain, and the state of the search then
_missed: dict[str, tuple[int, int]] = {}
#: files compiled by the search: filename -> number of lines then
_compiled: dict[str, int] = {}
#: computes whose graph was learnt (ids), newest last
_graphs: list[int] = []


# ---------------------------------------------------------------- where code runs


def fingerprint(code: CodeType) -> str:
    """A short stable hash of what cloudpickle keeps of a code object."""
    h = hashlib.blake2b(digest_size=6)
    qualname = getattr(code, "co_qualname", code.co_name)  # Python 3.11+
    h.update(f"{qualname}\0{code.co_firstlineno}\0".encode())
    h.update(code.co_code)
    return h.hexdigest()


def frame_filename(code: CodeType) -> str:
    """The filename a sampler records for ``code``: its own, or for code cloudpickle
    rebuilt, ``<dynamic-code>#<fingerprint>`` (:func:`relabel` maps it back)."""
    filename = code.co_filename
    if filename != DYNAMIC:
        return filename
    try:
        return f"{DYNAMIC}{_SEP}{fingerprint(code)}"
    except Exception:  # never fail a sample
        return filename


# ---------------------------------------------------------------- learning


def _remember(code: CodeType, filename: str) -> None:
    """Register ``code`` and the code objects nested in it as coming from ``filename``."""
    todo = [code]
    while todo:
        c = todo.pop()
        if len(_by_fingerprint) >= _MAX_ENTRIES:
            _by_fingerprint.clear()
            _by_place.clear()
        _by_fingerprint[fingerprint(c)] = filename
        _by_place.setdefault((c.co_name, c.co_firstlineno), set()).add(filename)
        todo.extend(k for k in c.co_consts if isinstance(k, CodeType))


def _codes(code: CodeType) -> Iterator[CodeType]:
    todo = [code]
    while todo:
        c = todo.pop()
        yield c
        todo.extend(k for k in c.co_consts if isinstance(k, CodeType))


def _is_dask_node(obj: Any) -> bool:
    module = type(obj).__module__ or ""
    return module.startswith(("dask.", "distributed.", "toolz.", "tlz.", "functools", "cytoolz."))


def _function_refs(fn: FunctionType) -> Iterator[Any]:
    """What a function drags along when pickled by value: closure cells, and the
    functions and classes of its own module its code names."""
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue
    module, glob = fn.__module__, fn.__globals__
    for code in _codes(fn.__code__):
        for name in code.co_names:
            value = glob.get(name)
            if isinstance(value, (FunctionType, type)) and value.__module__ == module:
                yield value


_SCALARS = (str, bytes, int, float, complex, bool, type(None))


def _children(obj: Any) -> Iterable[Any]:
    """The objects to look at inside ``obj`` for code (an empty tuple: none)."""
    if isinstance(obj, _SCALARS):
        return ()
    if isinstance(obj, FunctionType):
        return _function_children(obj)
    if isinstance(obj, MethodType):
        return (obj.__func__,)
    if isinstance(obj, type):
        return _class_children(obj)
    if isinstance(obj, (tuple, list, set, frozenset, dict)):
        return list(obj.values() if isinstance(obj, dict) else obj)[:_MAX_ITEMS]
    return _callable_children(obj)


def _function_children(fn: FunctionType) -> Iterable[Any]:
    if not _by_value(fn):
        return ()  # pickled by reference: it keeps its file where it runs
    _remember(fn.__code__, fn.__code__.co_filename)
    return _function_refs(fn)


def _class_children(cls: type) -> list[Any]:
    if cls.__module__ == "builtins":
        return []
    return [_unwrap(v) for v in list(vars(cls).values())[: _MAX_ITEMS * 4]]


#: what dask's tasks, partials, graphs and layers hold their functions and arguments in
_NODE_PARTS = ("func", "args", "kwargs", "keywords", "dsk", "layers", "mapping", "task")


def _callable_children(obj: Any) -> list[Any]:
    """A partial's or a dask task's function and arguments, a graph's layers and tasks,
    an expression's operands; a callable instance's class."""
    if isinstance(obj, functools.partial) or _is_dask_node(obj):
        try:  # an expression: its operands only (its other attributes may compute)
            operands = object.__getattribute__(obj, "operands")
        except AttributeError:
            operands = None
        if isinstance(operands, list):
            return operands[:_MAX_ITEMS]
        parts = [getattr(obj, a, None) for a in _NODE_PARTS]
        return [p for p in parts if p is not None]
    call = inspect.getattr_static(type(obj), "__call__", None)
    if isinstance(call, FunctionType):  # an instance of a user's callable class
        return [type(obj)]
    return []


def _by_value(fn: FunctionType) -> bool:
    """Whether cloudpickle copies ``fn`` by value: defined in ``__main__``, in a module
    workers cannot import or registered by value, or not reachable by its name there."""
    name = fn.__module__
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None or name == "__main__":
        return True
    cloudpickle = sys.modules.get("cloudpickle")
    registry = getattr(cloudpickle, "list_registry_pickle_by_value", None)
    if registry is not None:
        parts = name.split(".")
        by_value = registry()
        if any(".".join(parts[:i]) in by_value for i in range(1, len(parts) + 1)):
            return True
    target: Any = module
    for part in fn.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is not fn


def _unwrap(value: Any) -> Any:
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property):
        return (value.fget, value.fset)
    return value


def learn(obj: Any, budget: int = _BUDGET) -> None:
    """Register the code objects reachable from ``obj`` (a task, callable, partial,
    container) with the file they come from. Each function is looked at once; at most
    ``budget`` objects per call. Never raises."""
    try:
        with _lock:
            _walk(obj, budget)
    except Exception:
        return


def _walk(obj: Any, budget: int) -> None:
    todo = [obj]
    while todo and budget > 0:
        item = todo.pop()
        budget -= 1
        if isinstance(item, (FunctionType, type, MethodType)):
            if id(item) in _learnt:
                continue
            if len(_learnt) >= _MAX_ENTRIES:
                _learnt.clear()
            _learnt[id(item)] = item
        todo.extend(_children(item))


def learn_graph(dsk: Mapping[Any, Any], token: int | None = None) -> None:
    """Learn the code of graph ``dsk``: one task per (key name up to its first ``-``,
    task function), so a graph of 100,000 tasks of a few functions costs a pass over its
    keys. ``token`` (e.g. a compute's id): a graph learnt under it is not read again.
    Never raises."""
    if not isinstance(dsk, Mapping) or not dsk:
        return
    if token is not None:
        with _lock:
            if token in _graphs:
                return
            _graphs.append(token)
            del _graphs[:-64]
    try:
        _learn_tasks(dsk)
    except Exception:
        return


def _learn_tasks(dsk: Mapping[Any, Any]) -> None:
    seen: set[tuple[Any, int]] = set()
    for key, task in dsk.items():
        name = key[0] if type(key) is tuple and key else key
        prefix = name.partition("-")[0] if isinstance(name, str) else name
        func = task[0] if type(task) is tuple and task else getattr(task, "func", None)
        mark = (prefix, id(func))
        if mark not in seen:
            seen.add(mark)
            learn(task, budget=_BUDGET // 4)


def knows(filename: str) -> bool:
    """Whether a sampled frame's ``filename`` needs no graph to be mapped (it is not
    dynamic code, or its fingerprint is known already)."""
    if not filename.startswith(DYNAMIC):
        return True
    _, _, fp = filename.partition(_SEP)
    return bool(fp) and fp in _by_fingerprint


# ---------------------------------------------------------------- mapping


def user_filename(filename: str, name: str, firstlineno: int) -> str:
    """The filename the user knows for a sampled frame: the original file of code pickled
    by value, ``"Cell In[N]"`` for a notebook cell, else ``filename``. Never raises."""
    try:
        original = _original(filename, name, firstlineno)
        return cell_label(original) or original
    except Exception:
        return filename


def _original(filename: str, name: str, first: int) -> str:
    """The original file of dynamic code (``<dynamic-code>`` when not found)."""
    if not filename.startswith(DYNAMIC):
        return filename
    _, _, fp = filename.partition(_SEP)
    with _lock:
        found = _lookup(fp, name, first)
        if found is None and fp:
            _search(fp)
            found = _lookup(fp, name, first)
    return found if found is not None else DYNAMIC


def _lookup(fp: str, name: str, first: int) -> str | None:
    if fp:
        return _by_fingerprint.get(fp)
    places = _by_place.get((name, first))
    if places is not None and len(places) == 1:
        return next(iter(places))
    return None


def code_identifier(code: CodeType) -> str:
    """The (mapped) tree identifier ``name;filename;firstlineno`` of ``code``."""
    filename = user_filename(frame_filename(code), code.co_name, code.co_firstlineno)
    return f"{code.co_name};{filename};{code.co_firstlineno}"


# ---------------------------------------------------------------- notebook cells


def _ipython() -> Any:
    module = sys.modules.get("IPython")
    get = getattr(module, "get_ipython", None)
    try:
        return get() if get is not None else None
    except Exception:
        return None


def cell_label(filename: str) -> str | None:
    """``"Cell In[N]"`` when ``filename`` is a notebook cell IPython compiled, else None."""
    if filename in _cells:
        return _cells[filename]
    ip = _ipython()
    if ip is None:
        return None
    label = None
    try:
        named = ip.compile.format_code_name(filename)
        if named:
            label = f"{named[0]} {named[1]}"
    except Exception:
        label = None
    with _lock:
        if len(_cells) >= _MAX_ENTRIES:
            _cells.clear()
        _cells[filename] = label
        if label is not None:
            _cell_files[label] = filename
    return label


def real_file(filename: str) -> str:
    """The file linecache knows ``filename`` by (a cell's own name for its label)."""
    return _cell_files.get(filename, filename)


def _cell_filenames() -> list[str]:
    ip = _ipython()
    names = getattr(getattr(ip, "compile", None), "_filename_map", None)
    return list(names) if isinstance(names, Mapping) else []


# ---------------------------------------------------------------- the search


def _generation() -> tuple[int, int]:
    return len(_by_fingerprint), len(_cell_filenames())


def _search(fp: str) -> None:
    """Look for code of fingerprint ``fp`` in ``__main__`` and in the script's and the
    notebook cells' sources (compiled, not run); each fingerprint once per state."""
    state = _generation()
    if _missed.get(fp) == state:
        return
    main = sys.modules.get("__main__")
    if main is not None:
        own = [
            v
            for v in list(vars(main).values())
            if isinstance(v, (FunctionType, type)) and getattr(v, "__module__", "") == "__main__"
        ]
        for value in own:
            _walk(value, _BUDGET)
    if fp not in _by_fingerprint:
        files = _cell_filenames()
        path = getattr(main, "__file__", None)
        if isinstance(path, str) and path.endswith(".py"):
            files.append(os.path.abspath(path) if not os.path.isabs(path) else path)
        for filename in files:
            _compile_file(filename)
    _missed[fp] = _generation()


def _compile_file(filename: str) -> None:
    """Register the code objects of ``filename`` compiled again (once per version)."""
    lines = linecache.getlines(filename)
    if not lines or _compiled.get(filename) == len(lines):
        return
    _compiled[filename] = len(lines)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    ip = _ipython()
    if ip is not None and filename in _cell_filenames():
        flags |= int(getattr(ip.compile, "flags", 0)) & _FUTURE_FLAGS
    try:
        code = compile("".join(lines), filename, "exec", flags=flags, dont_inherit=True)
    except (SyntaxError, ValueError):
        return
    _remember(code, filename)


def _future_flags() -> int:
    import __future__

    return functools.reduce(
        lambda a, name: a | getattr(__future__, name).compiler_flag, __future__.all_feature_names, 0
    )


_FUTURE_FLAGS = _future_flags()


# ---------------------------------------------------------------- sources


def getline(filename: str, line: int) -> str:
    """Line ``line`` of a (mapped) file, ``""`` when not known."""
    return linecache.getline(real_file(filename), line)


def source(identifier: str) -> dict[str, Any] | None:
    """``{"file", "name", "start", "text"}`` of the function a tree identifier
    (``name;filename;firstlineno``, mapped) names, or None when its text is not found."""
    name, _, rest = identifier.partition(";")
    filename, _, first = rest.rpartition(";")
    if not filename or not first.isdigit() or int(first) < 1:
        return None
    start = int(first)
    lines = linecache.getlines(real_file(filename))
    if len(lines) < start:
        return None
    text = _block(lines[start - 1 :], name)
    return {"file": filename, "name": name, "start": start, "text": text}


def _block(lines: list[str], name: str) -> list[str]:
    """The lines of the definition that starts ``lines`` (its first line alone when it is
    not a ``def``/``class``: a lambda, a comprehension), at most ``MAX_SOURCE_LINES``."""
    head = lines[0].lstrip()
    if name == "<module>":
        block = lines
    elif head.startswith(("def ", "async def ", "class ", "@")):
        try:
            block = inspect.getblock(lines[: MAX_SOURCE_LINES * 4])
        except Exception:
            block = lines[:1]
    else:
        block = lines[:1]
    return [line.rstrip("\r\n") for line in block[:MAX_SOURCE_LINES]]


def sources(identifiers: Iterable[str]) -> dict[str, dict[str, Any]]:
    """:func:`source` of each identifier whose text is found."""
    out = {}
    for ident in identifiers:
        if ident in out or ident == "root":
            continue
        try:
            found = source(ident)
        except Exception:
            found = None
        if found is not None:
            out[ident] = found
    return out


def _reset_for_tests() -> None:
    """Forget everything learnt (tests only)."""
    with _lock:
        for table in (_by_fingerprint, _by_place, _learnt, _cells, _cell_files, _missed):
            table.clear()
        _compiled.clear()
        _graphs.clear()
