"""Tool-call tests at scale: the russo API on Helios's engine.

Migrating from russo is one line: `from helios import toolcalls as russo`.
Prompts × runs go through the engine's scheduler (bounded, retried, with a
live progress line on a terminal); a run that raises is a failed run that
keeps its error; speech comes from espeak-ng offline by default.
"""

from helios.toolcalls import adapters, evaluators, parsers, synthesizers
from helios.toolcalls.adapters import (
    CallableAgent,
    GeminiAgent,
    GeminiLiveAgent,
    HttpAgent,
    ModelAgent,
    OpenAIAgent,
    OpenAIRealtimeAgent,
    WebSocketAgent,
)
from helios.toolcalls.cache import AudioCache, CachedSynthesizer
from helios.toolcalls.evaluators import ExactEvaluator
from helios.toolcalls.helpers import ToolCallAssertionError, agent, assert_tool_calls, tool_call
from helios.toolcalls.parsers import GeminiResponseParser, JsonResponseParser, OpenAIResponseParser
from helios.toolcalls.protocols import Agent, Evaluator, ResponseParser, Synthesizer, TextAgent
from helios.toolcalls.runner import Case, run, run_cases, run_concurrent
from helios.toolcalls.synthesizers import EspeakSynthesizer, GoogleSynthesizer, OpenAISynthesizer
from helios.toolcalls.types import (
    AgentResponse,
    Audio,
    BatchResult,
    EvalResult,
    SingleRunResult,
    ToolCall,
    ToolCallMatch,
)

__all__ = [
    "Agent",
    "AgentResponse",
    "Audio",
    "AudioCache",
    "BatchResult",
    "CachedSynthesizer",
    "CallableAgent",
    "Case",
    "EspeakSynthesizer",
    "EvalResult",
    "Evaluator",
    "ExactEvaluator",
    "GeminiAgent",
    "GeminiLiveAgent",
    "GeminiResponseParser",
    "GoogleSynthesizer",
    "HttpAgent",
    "JsonResponseParser",
    "ModelAgent",
    "OpenAIAgent",
    "OpenAIRealtimeAgent",
    "OpenAIResponseParser",
    "OpenAISynthesizer",
    "ResponseParser",
    "SingleRunResult",
    "Synthesizer",
    "TextAgent",
    "ToolCall",
    "ToolCallAssertionError",
    "ToolCallMatch",
    "WebSocketAgent",
    "adapters",
    "agent",
    "assert_tool_calls",
    "evaluators",
    "parsers",
    "run",
    "run_cases",
    "run_concurrent",
    "synthesizers",
    "tool_call",
]
