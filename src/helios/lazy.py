"""Names a package exports but imports only when first used (PEP 562), so that
`import helios` and `import helios.engine.events` stay light: one implementation
for every package that does this."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import import_module
from typing import Any, TypeVar


def lazy_exports(
    namespace: dict[str, Any], also: Sequence[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of a package (`namespace`: its
    `globals()`). The names it exports are written once, as the imports under its
    `if TYPE_CHECKING:` (`from helios.x import Name as Name`: what mypy sees); they
    are read from its source on first use, and each is imported then. `__all__` is
    those names and `also` (names the package defines itself)."""
    package: str = namespace["__name__"]
    exports: dict[str, tuple[str, str]] = {}

    def table() -> dict[str, tuple[str, str]]:
        if not exports:
            exports.update(type_checking_imports(namespace))
        return exports

    def getattr_(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted([*table(), *also])
        else:
            where = table().get(name)
            if where is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            module, attribute = where
            value = getattr(import_module(module), attribute)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(table()))

    return getattr_, dir_


def type_checking_imports(namespace: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each name imported under the module's `if TYPE_CHECKING:`, to its module and
    its name there (`from m import X as Y`: Y is m's X)."""
    import ast  # only when a lazy name is first used: `import helios` stays light

    package: str = namespace["__name__"]
    file = namespace.get("__file__") or ""
    # Its file, not its loader: pytest's assertion rewriter (a plugin's package is
    # rewritten) loads it without `get_source`.
    if file.endswith(".py"):
        with open(file, "rb") as handle:
            source: str | bytes | None = handle.read()
    else:
        source = getattr(namespace.get("__loader__"), "get_source", lambda _: None)(package)
    if source is None:  # an install of .pyc files only: read the compiled imports
        return _compiled_imports(namespace)
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):  # fmt: skip
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


def _compiled_imports(namespace: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """`type_checking_imports` from the module's code object, for an install without
    sources: every `from m import X as Y` at module level whose name the run did not
    bind (the names imported under `if TYPE_CHECKING:` are the ones left unbound)."""
    import dis
    from importlib.util import resolve_name

    package: str = namespace["__name__"]
    loader = namespace.get("__loader__")
    code = getattr(loader, "get_code", lambda _: None)(package)
    if code is None:
        raise ImportError(f"{package}: its source or code is needed for its lazy names")
    found: dict[str, tuple[str, str]] = {}
    module, level, name = "", 0, ""
    constants: list[Any] = []
    for op in dis.get_instructions(code):
        if op.opname in ("LOAD_CONST", "LOAD_SMALL_INT"):
            constants = [*constants[-1:], op.argval]
        elif op.opname == "IMPORT_NAME":
            level = constants[0] if len(constants) == 2 and isinstance(constants[0], int) else 0
            module = op.argval
        elif op.opname == "IMPORT_FROM":
            name = op.argval
        elif op.opname in ("STORE_NAME", "STORE_GLOBAL") and name:
            if op.argval not in namespace:
                parent = package if namespace.get("__path__") else package.rpartition(".")[0]
                where = resolve_name("." * level + module, parent) if level else module
                found[op.argval] = (where, name)
            name = ""
    return found


T = TypeVar("T")


class LazyImports(Mapping[str, T]):
    """A registry's built-ins by name, each imported on first read: `names` maps a
    name to "module:attribute". Listing the names imports nothing, so a command
    that uses one sandbox provider does not import the others (Daytona's, Docker's)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = dict(names)

    def __getitem__(self, name: str) -> T:
        module, _, attribute = self._names[name].partition(":")
        value: T = getattr(import_module(module), attribute)
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._names  # without importing it

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
