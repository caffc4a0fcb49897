"""Agents are found by name: built-ins, and plugins through the `helios.agents` entry point."""

from __future__ import annotations

from typing import ClassVar

import pytest

from helios.agents import registry
from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.environments.base import Environment
from helios.errors import ConfigError


class EchoAgent(Agent):
    name: ClassVar[str] = "echo"

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome(n_turns=1)


class FakeEntryPoint:
    def __init__(self, name: str, loaded: object) -> None:
        self.name, self.value, self._loaded = name, f"plugin:{name}", loaded

    def load(self) -> object:
        return self._loaded


def test_a_plugin_agent_is_found_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEntryPoint("echo", EchoAgent)])
    assert "echo" in registry.available_agents()
    assert isinstance(registry.create_agent("echo"), EchoAgent)
    assert registry.agent_class("tool").name == "tool"  # built-ins still win


def test_a_plugin_that_is_not_an_agent_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEntryPoint("bad", object)])
    with pytest.raises(ConfigError, match="not an Agent subclass"):
        registry.agent_class("bad")
    with pytest.raises(ConfigError, match="unknown agent 'missing'"):
        registry.agent_class("missing")
