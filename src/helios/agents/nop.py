"""`nop`: does nothing. A task that passes under nop has a broken test."""

from __future__ import annotations

from typing import ClassVar

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.environments.base import Environment


class NopAgent(Agent):
    name: ClassVar[str] = "nop"
    #: it never uses skills or MCP servers: a task that offers them means the same
    takes: ClassVar[frozenset[str]] = frozenset({"skills", "mcp", "mcp-http"})

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome()
