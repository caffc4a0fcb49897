"""Models: one interface over the providers' wires (Chat Completions, Anthropic Messages,
OpenAI Responses, Gemini generateContent), spoken directly over aiohttp."""

from helios.models.base import (
    GenerationConfig,
    Message,
    Model,
    ModelResponse,
    ToolCall,
)
from helios.models.errors import (
    AuthError,
    BadRequestError,
    ContextWindowError,
    ModelError,
    RateLimitError,
    TransientError,
)
from helios.models.routing import ModelSpec, resolve_model

__all__ = [
    "AuthError",
    "BadRequestError",
    "ContextWindowError",
    "GenerationConfig",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "ModelSpec",
    "RateLimitError",
    "ToolCall",
    "TransientError",
    "resolve_model",
]
