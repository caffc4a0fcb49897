"""Agent adapters: how a tool-call test reaches the agent under test."""

from helios.toolcalls.adapters.gemini import GeminiAgent, GeminiLiveAgent
from helios.toolcalls.adapters.http import HttpAgent
from helios.toolcalls.adapters.model import ModelAgent
from helios.toolcalls.adapters.openai import OpenAIAgent
from helios.toolcalls.adapters.openai_realtime import OpenAIRealtimeAgent
from helios.toolcalls.adapters.websocket import WebSocketAgent
from helios.toolcalls.helpers import CallableAgent

__all__ = [
    "CallableAgent",
    "GeminiAgent",
    "GeminiLiveAgent",
    "HttpAgent",
    "ModelAgent",
    "OpenAIAgent",
    "OpenAIRealtimeAgent",
    "WebSocketAgent",
]
