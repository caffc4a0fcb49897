"""Models: one interface over the providers' wires (Chat Completions, Anthropic Messages,
OpenAI Responses, Gemini generateContent), spoken directly over aiohttp (`models.http`).

No provider SDK is used or installed: `openai` and `anthropic` are not dependencies of
Helios (only the `dev` extra installs them, for tests that check the scripted model
server against them)."""

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
