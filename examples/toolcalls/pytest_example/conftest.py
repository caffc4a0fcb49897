"""Fixtures for russo-style pytest tests: the plugin picks up russo_* or toolcalls_* names."""

import pytest

from helios import toolcalls as russo


@russo.agent
async def flight_agent(audio: russo.Audio) -> russo.AgentResponse:
    return russo.AgentResponse(
        tool_calls=[russo.tool_call("book_flight", from_city="NYC", to_city="LA")]
    )


@pytest.fixture
def russo_agent():
    return flight_agent
