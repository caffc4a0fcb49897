"""Provider-neutral messages, tool calls and responses, and the Model protocol.

Messages are plain dataclasses (no validation per turn). Each client converts a
message to its wire format once and caches it on the message, so a long
conversation costs O(new messages) of conversion per turn, not O(all).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from helios.usage import Usage

Role = Literal["system", "user", "assistant", "tool"]
ReasoningEffort = Literal["xhigh", "high", "medium", "low", "minimal", "none"]
#: screenshots sent back to the model by default (the last K)
DEFAULT_KEEP_IMAGES = 3


@dataclass(slots=True)
class ToolCall:
    """A tool call: what a model asked for, and what a tool-call test expects
    (`helios.toolcalls.ToolCall` and `tool_call` make this type).

    Two calls are equal when they call the same tool with the same arguments: the id
    and the raw text are how the call travelled, not what it is. Equal calls hash
    alike, whatever the order of keys in nested arguments.
    """

    #: the provider's id for the call ("" when there is none: an expected call)
    id: str = field(compare=False)
    name: str
    #: parsed arguments; None when the model sent invalid JSON
    arguments: dict[str, Any] | None
    #: the raw argument text as sent, kept for error messages and replay
    raw_arguments: str = field(default="", compare=False)

    def __hash__(self) -> int:
        return hash((self.name, _canonical_json(self.arguments)))

    def __str__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in (self.arguments or {}).items())
        return f"{self.name}({args})"


def _canonical_json(value: Any) -> str:
    """One text per value: key order does not matter."""
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image in a conversation (a screenshot): its bytes, kept once, and its
    content hash, which names its file in a trajectory (`agent/images/<sha256>.png`)."""

    data: bytes
    media_type: str = "image/png"
    sha256: str = ""

    @classmethod
    def of(cls, data: bytes, media_type: str = "image/png") -> ImageRef:
        return cls(data, media_type, hashlib.sha256(data).hexdigest())


@dataclass(frozen=True, slots=True)
class CacheMark:
    """How the response cache (`--cache`) met a model call: its key and whether it was
    a hit; a hit carries the usage of the call it replays (what it saved)."""

    key: str
    hit: bool
    saved: Usage | None = None


@dataclass(slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: for role "tool": which call this answers
    tool_call_id: str | None = None
    #: for role "tool": the call failed (Anthropic's is_error)
    is_error: bool = False
    #: images after the text (a tool's screenshot, a user's picture); a client that
    #: sends only some (the last K screenshots) sends a placeholder for the others
    images: list[ImageRef] = field(default_factory=list)
    reasoning: str | None = None
    #: provider-specific content that must be sent back verbatim (Anthropic
    #: thinking blocks with signatures); opaque to everything else
    provider_state: Any = None
    #: per-client cache of the wire format, keyed by client kind
    wire: dict[str, Any] = field(default_factory=dict)
    #: for role "assistant": the call's usage and the model that answered
    usage: Usage | None = None
    model: str | None = None
    #: when the message was made (epoch seconds), for trajectories
    created: float = field(default_factory=time.time)
    #: for role "assistant" with `--cache`: the cache's key and whether it answered
    cache: CacheMark | None = None


@dataclass(slots=True)
class GenerationConfig:
    max_tokens: int = 4096
    #: OpenAI-compatible endpoints only: send no token limit, so the model's own
    #: default applies (what Hermes does without --max_tokens)
    omit_max_tokens: bool = False
    temperature: float | None = None
    reasoning_effort: ReasoningEffort | None = None
    #: OpenRouter provider routing: allowed (only), ignored (ignore), order, sort
    openrouter_provider: dict[str, Any] = field(default_factory=dict)
    #: per-request timeout in seconds
    timeout: float = 600.0
    #: only the last K images of a conversation (screenshots) go to the model; each
    #: older one becomes a placeholder (None: send every image)
    keep_images: int | None = DEFAULT_KEEP_IMAGES

    def identity(self) -> dict[str, Any]:
        """The settings that change results: part of trial ids."""
        identity: dict[str, Any] = {
            "max_tokens": None if self.omit_max_tokens else self.max_tokens,
            "temperature": self.temperature,
            "reasoning_effort": self.reasoning_effort,
            "openrouter_provider": self.openrouter_provider,
        }
        # Named only when changed, so the ids of runs made before it existed still hold.
        if self.keep_images != DEFAULT_KEEP_IMAGES:
            identity["keep_images"] = self.keep_images
        return identity

    @classmethod
    def from_identity(cls, identity: Mapping[str, Any]) -> GenerationConfig:
        """The settings `identity()` recorded (a run's run.json), for a resume."""
        max_tokens = identity.get("max_tokens")
        return cls(
            max_tokens=max_tokens if isinstance(max_tokens, int) else cls().max_tokens,
            omit_max_tokens=max_tokens is None,
            temperature=identity.get("temperature"),
            reasoning_effort=identity.get("reasoning_effort"),
            openrouter_provider=dict(identity.get("openrouter_provider") or {}),
            keep_images=identity.get("keep_images", DEFAULT_KEEP_IMAGES),
        )


@dataclass(slots=True)
class ModelResponse:
    message: Message
    usage: Usage
    #: "stop", "tool_calls", "length", ...
    finish_reason: str = "stop"
    model: str = ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls

    @property
    def reasoning(self) -> str | None:
        return self.message.reasoning


class Model(Protocol):
    """One model endpoint. `generate` raises typed `ModelError`s; it never retries."""

    name: str
    provider: str

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> ModelResponse: ...

    async def close(self) -> None: ...
