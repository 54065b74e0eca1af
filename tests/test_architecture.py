"""The package's layers: what may import what (docs/architecture.md), read from the source.

Every ``import`` of a daskprofile module is found with ``ast``, also those inside functions
(imported lazily) and under ``TYPE_CHECKING``, and checked against the layers; the modules
imported when the module itself is imported must form no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "python" / "daskprofile"

#: the layers, lowest first: a module may import only from its own layer and those below
LAYERS: list[tuple[str, ...]] = [
    (
        *("_version", "keys", "meta", "options", "gil", "stacktree", "worker", "hooks"),
        *("failures", "spans", "versions", "codemap", "files"),
    ),
    ("collectors",),
    ("run", "cluster_tables", "cluster_views", "lines"),
    ("distributed",),
    ("record", "callbacks", "memory"),
    ("diagnostics", "export", "report", "comparison", "findings"),
    ("jupyter", "cli", "_args", "__main__", "__init__"),
]
#: imports that go up on purpose, each a convenience of a value that names its renderer
ALLOWED_UP = {
    ("run", "export"),  # run.to_html() and friends delegate to the exporters
    ("run", "stacktree"),
    ("run", "comparison"),  # run.compare(other) delegates to daskprofile.compare
    ("run", "findings"),  # run.findings() / what_if() delegate to daskprofile.findings
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> list[str]:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join(base)
        target = f"{prefix}.{node.module}" if node.module else prefix
    else:
        if not (node.module or "").startswith("daskprofile"):
            return []
        target = (node.module or "").removeprefix("daskprofile").lstrip(".")
    names = [f"{target}.{a.name}".lstrip(".") for a in node.names]
    return [target.lstrip("."), *names]


def _imports(module: str, path: Path, top_level_only: bool) -> Iterator[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    is_package = path.name == "__init__.py"
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            yield from _resolve(module, node, is_package)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("daskprofile."):
                    yield alias.name.removeprefix("daskprofile.")


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The daskprofile module ``name`` refers to (an imported name may be an attribute)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _layer(module: str) -> tuple[int, str]:
    head = module.split(".", maxsplit=1)[0] or "__init__"
    for i, layer in enumerate(LAYERS):
        if head in layer:
            return i, head
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and the docs)")


def _edges(top_level_only: bool) -> set[tuple[str, str]]:
    modules = _modules()
    edges = set()
    for module, path in modules.items():
        for name in _imports(module, path, top_level_only):
            target = _known(name, modules)
            if target is not None and target != module:
                edges.add((module, target))
    return edges


def test_every_module_sits_in_a_layer() -> None:
    for module in _modules():
        _layer(module)


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    wrong = []
    for module, target in sorted(_edges(top_level_only=False)):
        (low, head), (high, target_head) = _layer(module), _layer(target)
        if high > low and (head, target_head) not in ALLOWED_UP:
            wrong.append(f"{module} -> {target}")
    assert wrong == []


@pytest.mark.parametrize("below", ["collectors", "run", "hooks", "keys", "options", "worker"])
def test_nothing_below_the_recording_layer_imports_distributed_or_jupyter(below: str) -> None:
    for module, target in _edges(top_level_only=False):
        if module.split(".")[0] == below:
            assert target.split(".")[0] not in ("distributed", "jupyter", "record")


def test_distributed_never_imports_the_recording_or_jupyter_layers() -> None:
    for module, target in _edges(top_level_only=False):
        if module.startswith("distributed"):
            assert not target.startswith(("record", "jupyter")), (module, target)


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for module, target in _edges(top_level_only=False):
        if (module.split(".")[0], target.split(".")[0]) in ALLOWED_UP:
            continue
        if module.startswith(target + ".") or target == "__init__":
            continue  # a package's own submodules, and the lazy root
        graph.setdefault(module, set()).add(target)
    cycles = []
    done: set[str] = set()

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            cycles.append([*stack[stack.index(node) :], node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*stack, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    assert cycles == []


def test_the_checker_sees_lazy_imports() -> None:
    """A mutation check of the checker itself: the recording's lazy import of the cluster
    source (inside a function) is an edge it finds."""
    edges = _edges(top_level_only=False)
    assert ("record.clusters", "distributed.source") not in edges  # by name, via importlib
    assert ("record.recording", "distributed.source") in edges  # a lazy `from ... import`
    assert ("jupyter.comm", "record.per_cell") in edges
