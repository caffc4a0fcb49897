"""Agent lookup: built-ins plus plugins from the `helios.agents` entry point."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from helios.agents.base import Agent
from helios.errors import ConfigError

ENTRY_POINT_GROUP = "helios.agents"


def _builtins() -> dict[str, type[Agent]]:
    from helios.agents.nop import NopAgent
    from helios.agents.oracle import OracleAgent
    from helios.agents.tool_agent import ToolAgent

    return {"tool": ToolAgent, "oracle": OracleAgent, "nop": NopAgent}


def available_agents() -> list[str]:
    return sorted(set(_builtins()) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def agent_class(name: str) -> type[Agent]:
    builtins = _builtins()
    if name in builtins:
        return builtins[name]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            loaded = ep.load()
            if not (isinstance(loaded, type) and issubclass(loaded, Agent)):
                raise ConfigError(f"plugin {ep.value} is not an Agent subclass", field="--agent")
            return loaded
    known = ", ".join(available_agents())
    raise ConfigError(f"unknown agent {name!r} (known: {known})", field="--agent")


def create_agent(name: str, **settings: Any) -> Agent:
    return agent_class(name)(**settings)
