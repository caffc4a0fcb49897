"""Response parsers: a provider's raw reply → AgentResponse."""

from helios.toolcalls.parsers.gemini import GeminiResponseParser
from helios.toolcalls.parsers.mapping import JsonResponseParser
from helios.toolcalls.parsers.openai import OpenAIResponseParser

__all__ = ["GeminiResponseParser", "JsonResponseParser", "OpenAIResponseParser"]
