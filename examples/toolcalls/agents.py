"""Agents that config.yaml names by `module:Class` (resolved next to the config file)."""

from helios import toolcalls


class KeywordAgent:
    """A stand-in voice agent: books a flight when it hears enough speech."""

    def __init__(self, min_seconds: float = 0.5) -> None:
        self.min_seconds = min_seconds

    async def run(self, audio: toolcalls.Audio) -> toolcalls.AgentResponse:
        if audio.duration < self.min_seconds:
            return toolcalls.AgentResponse()
        text = (audio.transcript or "").lower()
        if "weather" in text:
            call = toolcalls.tool_call("get_weather", city="Tokyo")
        else:
            call = toolcalls.tool_call("book_flight", from_city="Berlin", to_city="Rome")
        return toolcalls.AgentResponse(tool_calls=[call])
