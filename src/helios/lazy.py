"""Names a package exports but imports only when first used (PEP 562), so that
`import helios` and `import helios.engine.events` stay light: one implementation
for every package that does this."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import import_module
from typing import Any, TypeVar


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`: `exports` maps each
    name to the module that defines it; `namespace` is the package's `globals()`,
    where a name is kept once imported; `names` its `__all__`."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(names))

    return getattr_, dir_


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
