"""The architecture's rules, read from the source: only the engine knows about
concurrency, doors are siblings that never import each other, and the engine and
the shared packages import no door and no UI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "helios"
DOORS = ("tasks", "datagen", "toolcalls")
SHARED = ("engine", "environments", "agents", "models", "trajectories")
MAX_LINES = 400


def _imports(path: Path) -> set[str]:
    """Every helios module a file imports, at any depth (lazy imports count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "helios" or name.startswith("helios.")}


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _files(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


@pytest.mark.parametrize("package", SHARED)
def test_shared_packages_import_no_door_and_no_ui(package: str) -> None:
    banned = {*DOORS, "display", "cli"}
    offenders = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in _files(package)
        for module in _imports(path)
        if _package_of(module) in banned
    ]
    assert offenders == []


@pytest.mark.parametrize("door", DOORS)
def test_no_door_imports_another(door: str) -> None:
    others = set(DOORS) - {door}
    offenders = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in _files(door)
        for module in _imports(path)
        if _package_of(module) in others
    ]
    assert offenders == []


def test_the_checks_see_real_imports() -> None:
    # Guards the guard: the parser finds what the task door really imports.
    runner = _imports(SRC / "tasks" / "runner.py")
    assert "helios.engine.batch" in runner and "helios.display.progress" in runner


def test_no_module_over_400_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in SRC.rglob("*.py")
        if (n := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


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
