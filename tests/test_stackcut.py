"""stackcut.cut: where a walked stack is cut, on synthetic walks of real code objects."""

from __future__ import annotations

from types import CodeType

import pytest

from daskprofile.collectors import stacks
from daskprofile.collectors.stackcut import Memo, Rules, cut
from daskprofile.distributed import _worker
from daskprofile.stacktree import FrameInfo

POOL = "/py/concurrent/futures/thread.py"
SCHEDULER = "/env/site-packages/dask/local.py"
SPEC = "/env/site-packages/dask/_task_spec.py"
CORE = "/env/site-packages/dask/core.py"
JOB = "/home/me/job.py"

RULES = Rules(stop=("dask/local.py",), omit=("dask/_task_spec.py", "dask/core.py"))


def template() -> None:
    pass


def code(filename: str, name: str) -> CodeType:
    return template.__code__.replace(co_filename=filename, co_name=name)


class Table:
    """``intern`` for :func:`cut`: records every call."""

    def __init__(self) -> None:
        self.infos: list[FrameInfo] = []

    def intern(self, info: FrameInfo) -> int:
        self.infos.append(info)
        return len(self.infos) - 1


def names(rules: Rules, *calls: tuple[str, str]) -> list[str]:
    """The names :func:`cut` keeps of a chain of calls given outermost first (like a
    traceback), each ``(file, function)``; outermost first too."""
    walk = [(code(path, name), 1) for path, name in reversed(calls)]
    table = Table()
    return [table.infos[fid].name for fid in cut(walk, rules, {}, table.intern)]


def with_flags(rules: Rules, **flags: bool) -> Rules:
    return Rules(rules.stop, rules.omit, **flags)


def test_the_first_stop_frame_out_from_the_task_ends_the_stack() -> None:
    calls = [(POOL, "worker"), (SCHEDULER, "execute"), (JOB, "outer"), (JOB, "inner")]
    assert names(RULES, *calls) == ["outer", "inner"]
    # a task that runs a nested scheduler: cut at the innermost one
    nested = [*calls, (SCHEDULER, "get_async"), (JOB, "subtask")]
    assert names(RULES, *nested) == ["subtask"]
    # no scheduler on the stack: nothing is cut
    assert names(RULES, (POOL, "worker"), (JOB, "work")) == ["worker", "work"]


def test_omitted_frames_are_cut_only_at_the_outer_end() -> None:
    scheduler, spec, core = (SCHEDULER, "execute"), (SPEC, "call"), (CORE, "_execute")
    task, helper = (JOB, "task"), (JOB, "helper")
    assert names(RULES, scheduler, spec, core, task, helper) == ["task", "helper"]
    # inside the task they are the task's own: kept
    assert names(RULES, scheduler, spec, task, core, helper) == ["task", "_execute", "helper"]
    assert names(RULES, scheduler, spec, task, core) == ["task", "_execute"]
    # without a scheduler frame too
    assert names(RULES, spec, task) == ["task"]


@pytest.mark.parametrize("keep_empty", [False, True])
def test_a_lone_boundary_frame_is_kept_only_when_asked(keep_empty: bool) -> None:
    calls = [(POOL, "worker"), (SCHEDULER, "execute")]
    kept = with_flags(RULES, keep_boundary=True, keep_empty=keep_empty)
    dropped = with_flags(RULES, keep_boundary=False, keep_empty=keep_empty)
    assert names(kept, *calls) == ["execute"]
    assert names(dropped, *calls) == []
    # with anything inside it, the boundary is cut either way
    assert names(kept, *calls, (JOB, "task")) == ["task"]
    assert names(kept, *calls, (SPEC, "call")) == (["call"] if keep_empty else [])


@pytest.mark.parametrize("keep_boundary", [False, True])
def test_a_stack_of_omitted_frames_only_is_kept_or_empty(keep_boundary: bool) -> None:
    calls = [(SCHEDULER, "execute"), (SPEC, "call"), (CORE, "_execute")]
    kept = with_flags(RULES, keep_boundary=keep_boundary, keep_empty=True)
    dropped = with_flags(RULES, keep_boundary=keep_boundary, keep_empty=False)
    assert names(kept, *calls) == ["call", "_execute"]
    assert names(dropped, *calls) == []
    assert names(kept, *calls[1:]) == ["call", "_execute"]
    assert names(dropped, *calls[1:]) == []


def test_an_empty_walk_gives_an_empty_stack() -> None:
    for flags in ({}, {"keep_boundary": True, "keep_empty": True}):
        assert cut([], with_flags(RULES, **flags), {}, Table().intern) == ()


@pytest.mark.parametrize(
    ("filename", "omitted"),
    [
        ("/env/site-packages/dask/core.py", True),
        ("dask/core.py", True),
        ("C:\\env\\Lib\\site-packages\\dask\\core.py", True),
        # a substring test cut these user frames; a bare endswith the first one
        ("/home/me/mydask/core.py", False),
        ("/home/me/dask/core.py/job.py", False),
        ("/home/me/dask/core.pyx", False),
    ],
)
def test_files_match_as_path_suffixes_from_a_separator(filename: str, omitted: bool) -> None:
    calls = [(SCHEDULER, "execute"), (filename, "wrapper"), (JOB, "task")]
    assert names(RULES, *calls) == (["task"] if omitted else ["wrapper", "task"])


def test_rule_paths_are_normalised_too() -> None:
    rules = Rules(stop=("\\dask\\local.py",), omit=("/dask/core.py",))
    calls = [(POOL, "worker"), (SCHEDULER, "execute"), (CORE, "call"), (JOB, "task")]
    assert names(rules, *calls) == ["task"]


def test_rules_reject_a_bare_string() -> None:
    with pytest.raises(TypeError, match="stop must be a tuple"):
        Rules(stop="dask/local.py")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="omit must be a tuple"):
        Rules(stop=(), omit=["dask/core.py"])  # type: ignore[arg-type]


def test_frames_are_interned_once_per_code_and_line() -> None:
    task, helper, boundary = code(JOB, "task"), code(JOB, "helper"), code(SCHEDULER, "run")
    walk = [(helper, 7), (task, 3), (boundary, 1)]
    memo: Memo = {}
    table = Table()
    first = cut(walk, RULES, memo, table.intern)
    assert [(i.name, i.lineno) for i in table.infos] == [("helper", 7), ("task", 3)]
    assert first == (1, 0)
    assert cut(walk, RULES, memo, table.intern) == first
    assert cut([(helper, None), (task, 3)], RULES, memo, table.intern) == (1, 2)
    assert [(i.name, i.lineno) for i in table.infos][2:] == [("helper", 0)]


def test_codes_that_differ_only_in_their_file_are_told_apart() -> None:
    # code objects compare equal whatever their co_filename: the memo must not merge them
    task, wrapper = code(JOB, "same"), code(SPEC, "same")
    assert task == wrapper
    memo: Memo = {}
    table = Table()
    assert cut([(task, 1)], RULES, memo, table.intern) == (0,)
    assert cut([(task, 1), (wrapper, 1)], RULES, memo, table.intern) == (0,)
    assert cut([(wrapper, 1), (task, 1)], RULES, memo, table.intern) == (0, 1)
    assert table.infos[1].filename == SPEC


def test_the_kernel_keeps_a_leaf_for_every_sample() -> None:
    rules = stacks._CUT
    assert names(rules, (POOL, "worker"), (SCHEDULER, "execute")) == ["execute"]
    hook = ("/env/site-packages/daskprofile/hooks.py", "wrapper")
    assert names(rules, (SCHEDULER, "execute"), (SPEC, "call"), hook) == ["call", "wrapper"]
    calls = [(SCHEDULER, "execute"), (SPEC, "call"), hook, (JOB, "task")]
    assert names(rules, *calls) == ["task"]


def test_distributed_workers_cut_at_the_task_runner_and_drop_the_rest() -> None:
    rules = _worker._CUT
    runner = ("/env/site-packages/distributed/worker.py", "apply_function_simple")
    around = [
        ("/env/site-packages/distributed/utils.py", "wrapper"),
        ("/py/contextlib.py", "inner"),
        ("/env/site-packages/distributed/metrics.py", "meter"),
        (SPEC, "call"),
        ("/env/site-packages/dask/utils.py", "apply"),
    ]
    assert names(rules, (POOL, "worker"), runner, *around, (JOB, "task")) == ["task"]
    assert names(rules, (POOL, "worker"), runner, *around) == []
    assert names(rules, (POOL, "worker"), runner) == []
    # modules whose paths merely end like those files are the task's own (a bare endswith
    # cut narwhals' dask backend as if it were dask/utils.py)
    for path in ("/env/site-packages/narwhals/_dask/utils.py", "/home/me/my_contextlib.py"):
        assert names(rules, runner, (path, "step"), (JOB, "task")) == ["step", "task"]
