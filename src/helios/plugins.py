"""Things found by name: a registry's built-ins, then what installed packages offer
under an entry point group (`[project.entry-points."helios.agents"]` and so on).

The agents, the sandbox providers and the toolsets are each looked up this way
(`agents/registry.py`, `environments/registry.py`, `agents/toolsets/registry.py`).
A built-in name wins over a plugin of the same name, and a plugin is loaded only
when it is asked for by name, so listing names imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Generic, Protocol, TypeVar

from helios.errors import ConfigError

T = TypeVar("T")


class EntryPoint(Protocol):
    """An installed package's offer (`importlib.metadata.EntryPoint`)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


def installed(group: str) -> Iterable[EntryPoint]:
    """The entry points of `group` in the installed packages."""
    return entry_points(group=group)


@dataclass(frozen=True)
class Plugins(Generic[T]):
    """One registry: its built-ins and its entry point group."""

    group: str
    #: what one is called in messages: "agent", "provider", "toolset"
    noun: str
    #: the built-ins by name (called at each lookup, so they may be imported lazily)
    builtins: Callable[[], Mapping[str, T]]
    #: a loaded entry point as a T, or None when it is not one
    adopt: Callable[[Any], T | None]
    #: what a plugin must be, for the refusal: "an Agent subclass"
    must_be: str
    #: the option or field a refusal names
    field: str
    entries: Callable[[str], Iterable[EntryPoint]] = installed

    def names(self) -> list[str]:
        """Every name, built-in or plugin, sorted."""
        return sorted(set(self.builtins()) | {ep.name for ep in self.entries(self.group)})

    def get(self, name: str) -> T:
        """The built-in called `name`, else the plugin; a ConfigError if there is none
        or the plugin is not what this registry holds."""
        builtins = self.builtins()
        if name in builtins:
            return builtins[name]
        for ep in self.entries(self.group):
            if ep.name == name:
                found = self.adopt(ep.load())
                if found is None:
                    raise ConfigError(f"plugin {ep.value} is not {self.must_be}", field=self.field)
                return found
        known = ", ".join(self.names())
        raise ConfigError(f"unknown {self.noun} {name!r} (known: {known})", field=self.field)
