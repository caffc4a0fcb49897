"""The architecture's layers, read from the source (docs/design/architecture.md, "Layers").

Every import in src/helios counts: at module level, inside functions (lazy), under
`if TYPE_CHECKING:`, absolute and relative, and `from helios.x import y` where `y`
is a submodule (`from helios.x import y` reads the namespace of `helios.x`, so it is an
import of that module, or package `__init__`, and of `helios.x.y` when that is a module).
From these the tests build the module graph and hold that

- a module imports only its own layer or lower ones (L0 primitives, L1 models and
  sandboxes, L2 agents, L3 the engine, L4 doors and UI);
- doors (tasks, datagen, toolcalls) never import each other;
- no modules import each other in a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "helios"

#: bottom to top: the top-level modules and packages under `helios` in each layer
#: (a package stands for everything inside it; "" is `helios/__init__.py`)
LAYER_MODULES: tuple[tuple[str, ...], ...] = (
    # L0 primitives (the engine's events and Slot live here: agents and models use them)
    ("errors", "failures", "secrets", "safe_json", "safe_yaml", "text", "atomic_write",
     "usage", "identity", "_proc", "settings", "version", "events", "slots", "plugins",
     "lazy", "figures"),
    # L1 models and sandboxes (a trajectory writer reads the models' messages)
    ("models", "environments", "trajectories"),
    # L2
    ("agents",),
    # L3 the episode and the run
    ("engine",),
    # L4 doors and UI
    ("tasks", "datagen", "toolcalls", "results", "display", "cli", "testing", "view", "",
     "__main__"),
)  # fmt: skip
LAYERS = {name: layer for layer, names in enumerate(LAYER_MODULES) for name in names}
DOORS = ("tasks", "datagen", "toolcalls")


def _module_name(path: Path) -> str:
    parts = ["helios", *path.relative_to(SRC).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__`)."""
    return {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute name `from <...> import` refers to inside `module`."""
    if node.level == 0:
        return node.module or ""
    package = module if _modules()[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _targets(module: str, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported helios module, line) for every import statement anywhere in `tree`."""
    known = _modules()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            # `from helios.x import y` reads the namespace of helios.x (a package: its
            # `__init__`), and imports the module helios.x.y as well when y is one
            yield source, node.lineno
            for alias in node.names:
                if (submodule := f"{source}.{alias.name}") in known:
                    yield submodule, node.lineno


@cache
def _graph() -> dict[str, dict[str, int]]:
    """module -> {helios module it imports: first line}."""
    known = _modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        edges: dict[str, int] = {}
        for target, line in _targets(module, ast.parse(path.read_text("utf-8"))):
            if target == "helios" or target.startswith("helios."):
                assert target in known, f"{module}:{line} imports {target}, which is no module"
                if target != module:
                    edges.setdefault(target, line)
        graph[module] = edges
    return graph


def _top(module: str) -> str:
    """The key of LAYERS a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(module: str) -> int:
    top = _top(module)
    assert top in LAYERS, f"{module} is in no declared layer: add it to LAYERS and the docs"
    return LAYERS[top]


def _where(module: str, line: int) -> str:
    return f"{_modules()[module].relative_to(SRC.parent)}:{line}"


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_every_module_is_in_a_declared_layer() -> None:
    assert [m for m in _modules() if _top(m) not in LAYERS] == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{_where(module, line)} {module} (L{_layer(module)}) imports {target} (L{_layer(target)})"
        for module, edges in _graph().items()
        for target, line in edges.items()
        if _layer(target) > _layer(module)
    ]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


@pytest.mark.parametrize("door", DOORS)
def test_no_door_imports_another(door: str) -> None:
    others = set(DOORS) - {door}
    offenders = [
        f"{_where(module, line)} {module} imports {target}"
        for module, edges in _graph().items()
        if _top(module) == door
        for target, line in edges.items()
        if _top(target) in others
    ]
    assert not offenders, "doors import each other:\n" + "\n".join(offenders)


def test_no_import_circles() -> None:
    circles = _cycles(_graph())
    assert not circles, "modules import each other in a circle:\n" + "\n".join(
        " <-> ".join(circle) for circle in circles
    )


def _lazy_only(module: str) -> set[str]:
    """The helios modules `module` imports inside functions only (as `from x import`)."""
    in_functions: set[str] = set()
    at_top: set[str] = set()

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.module:
                (in_functions if inside else at_top).add(child.module)
            visit(child, inside)

    visit(ast.parse(_modules()[module].read_text("utf-8")), False)
    return {name for name in in_functions - at_top if name.startswith("helios.")}


def test_the_checks_see_real_imports() -> None:
    # Guards the guard: the parser finds what modules really import ...
    graph = _graph()
    runner = graph["helios.tasks.runner"]
    assert "helios.engine.run" in runner and "helios.display.progress" in runner
    # ... lazily, inside a function, where nothing at module level imports the same
    lazy = [(module, target) for module in _modules() for target in _lazy_only(module)]
    assert len(lazy) >= 10 and all(target in graph[module] for module, target in lazy)
    function = "def f():\n    import helios.engine.batch\n"
    assert [t for t, _ in _targets("helios.x", ast.parse(function))] == ["helios.engine.batch"]
    # ... for the type checker only (the package names its lazy exports this way)
    assert "helios.tasks.runner" in graph["helios"]
    # ... relatively (src/helios has none today: made-up ones), in a package's `__init__`
    # and in a module; `from package import submodule` is an import of both, a name from
    # a package one of its `__init__`
    relative = "from . import docker\nfrom .base import Environment\nfrom ..models import base\n"
    assert [t for t, _ in _targets("helios.environments", ast.parse(relative))] == [
        "helios.environments", "helios.environments.docker", "helios.environments.base",
        "helios.models", "helios.models.base",
    ]  # fmt: skip
    inside = "from .docker import DockerEnvironment\nfrom . import NULL_SPEC\nimport helios\n"
    assert [t for t, _ in _targets("helios.environments.null", ast.parse(inside))] == [
        "helios.environments.docker", "helios.environments", "helios",
    ]  # fmt: skip
    # The checks can fail: a made-up circle and the layer order are seen.
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c"]
    ]
    assert _layer("helios.cli.app") > _layer("helios.engine.batch") > _layer("helios.agents.base")
    assert _layer("helios.agents.base") > _layer("helios.models.base") > _layer("helios.errors")


def test_no_asyncio_wait_for_in_the_source() -> None:
    """On Python 3.11 `asyncio.wait_for` loses a cancel that lands as its awaitable
    finishes (CPython gh-86296): bounded waits go through `_proc.within`."""
    calls = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            named = isinstance(node, ast.Attribute) and node.attr == "wait_for"
            if named and isinstance(node.value, ast.Name) and node.value.id == "asyncio":
                calls.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert calls == []
