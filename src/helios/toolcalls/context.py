"""What the episode lends to the agent under test while it runs (russo's agents take
only the audio or the prompt): the unit's `AgentContext`, with its scheduler slot (a
backoff gives it back), its usage (retries count there) and its events."""

from __future__ import annotations

from contextvars import ContextVar

from helios.agents.base import AgentContext

#: the running unit's agent context, set by `ToolCallAgent` around the agent's call
current_context: ContextVar[AgentContext | None] = ContextVar(
    "helios_toolcalls_context", default=None
)
