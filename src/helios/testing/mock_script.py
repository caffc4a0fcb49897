"""Scripted replies for the mock model servers.

A script is a list of scenarios. The reply to a request is decided from the request alone (no
server-side session), so any number of concurrent conversations can share one server:

* the scenario is the first whose ``match`` substring occurs in the system prompt or the first
  user message (``""`` / ``"*"`` marks the fallback scenario, wherever it is listed);
* the turn index is the number of assistant messages already in the request;
* past the end of ``turns`` the scenario's ``final`` turn is repeated (default: text "Done.").

JSON / dict format::

    {"scenarios": [
        {"match": "list files",
         "turns": [
            {"reasoning": "I should look", "tool_calls": [{"name": "bash",
                                                            "arguments": {"command": "ls"}}]},
            {"text": "There are two files."}],
         "final": {"text": "Done."}},
        {"match": "*", "turns": [{"text": "Hello"}]}]}

Turn keys: ``text``, ``reasoning``, ``tool_calls`` (several = parallel calls), ``empty`` (no text,
no tool calls), ``context_overflow`` (reply with the provider's context-length error),
``truncated`` (finish as if max_tokens was hit), ``cached_tokens`` (reported as cache hits).
Tool call keys: ``name``, ``arguments``, ``bad_arguments`` (OpenAI only: arguments string is
truncated, invalid JSON). Keys starting with ``_`` are ignored, so scripts can carry comments.

GUI turns (computer use): a turn that is one canonical step, ``{"action": "click", "target":
{"color": "#e53935"}}``, or several, ``{"actions": [step, ...]}``, is played as the native
computer action of whichever wire the request came on, aimed by colour in the request's last
screenshot (see :mod:`helios.testing.mock_gui` for the steps). Such a turn may also say
``say`` (the assistant's text beside the action), ``reasoning``, and ``safety`` (a message: the
call comes with OpenAI's pending safety check, or Gemini's require_confirmation decision, and
the next request must acknowledge it).

The fault settings are in :mod:`helios.testing.mock_faults`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.testing.mock_gui import GuiStep

_TURN_KEYS = frozenset(
    {"text", "reasoning", "tool_calls", "empty", "context_overflow", "truncated", "cached_tokens"}
)
_TOOL_CALL_KEYS = frozenset({"name", "arguments", "bad_arguments"})
_SCENARIO_KEYS = frozenset({"match", "turns", "final"})
#: the keys of a GUI turn beside its step's own
_GUI_TURN_KEYS = frozenset({"say", "reasoning", "safety", "actions", "cached_tokens", "truncated"})
_DEFAULT_MATCHES = frozenset({"", "*"})


class InvalidRequest(ValueError):
    """The request is malformed the way a real provider would reject with a 400."""


def required_model(body: Mapping[str, Any], missing: str) -> str:
    """The request's `model`; a missing or empty one is refused with the API's own
    words (`missing`)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest(missing)
    return model


def _check_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    """Reject unknown keys: a typo in a script should fail loudly, not silently do nothing."""
    unknown = sorted(k for k in data if k not in allowed and not k.startswith("_"))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _expect_mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _cached_tokens(data: Mapping[str, Any], where: str) -> int:
    cached = data.get("cached_tokens", 0)
    if not isinstance(cached, int) or cached < 0:
        raise ValueError(f"{where}.cached_tokens: expected a non-negative integer")
    return cached


def _optional_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: expected a string or null")
    return value


@dataclass(frozen=True)
class ToolCallSpec:
    """One scripted tool call."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    bad_arguments: bool = False

    @classmethod
    def from_dict(cls, data: object, where: str) -> ToolCallSpec:
        mapping = _expect_mapping(data, where)
        _check_keys(mapping, _TOOL_CALL_KEYS, where)
        name = mapping.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name: expected a non-empty string")
        arguments = _expect_mapping(mapping.get("arguments", {}), f"{where}.arguments")
        return cls(
            name=name, arguments=dict(arguments), bad_arguments=bool(mapping.get("bad_arguments"))
        )

    def arguments_json(self, *, allow_bad: bool) -> str:
        """The arguments as the JSON string a provider would send (truncated if scripted bad)."""
        text = json.dumps(self.arguments)
        if self.bad_arguments and allow_bad:
            # Drop the closing brace: '{"command": "ls"' is what a cut-off model emits.
            return text[:-1]
        return text


@dataclass(frozen=True)
class Turn:
    """One scripted assistant reply."""

    text: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    empty: bool = False
    context_overflow: bool = False
    truncated: bool = False
    cached_tokens: int = 0
    #: a GUI turn: canonical steps, played as the wire's native computer actions
    gui: tuple[GuiStep, ...] = ()
    #: the GUI turn's call asks for a safety confirmation, with this message
    safety: str | None = None

    @classmethod
    def from_dict(cls, data: object, where: str) -> Turn:
        mapping = _expect_mapping(data, where)
        if "action" in mapping or "actions" in mapping:
            return cls._gui(mapping, where)
        _check_keys(mapping, _TURN_KEYS, where)
        raw_calls = mapping.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise ValueError(f"{where}.tool_calls: expected a list")
        cached = _cached_tokens(mapping, where)
        return cls(
            text=_optional_str(mapping, "text", where),
            reasoning=_optional_str(mapping, "reasoning", where),
            tool_calls=tuple(
                ToolCallSpec.from_dict(c, f"{where}.tool_calls[{i}]")
                for i, c in enumerate(raw_calls)
            ),
            empty=bool(mapping.get("empty")),
            context_overflow=bool(mapping.get("context_overflow")),
            truncated=bool(mapping.get("truncated")),
            cached_tokens=cached,
        )

    @classmethod
    def _gui(cls, mapping: Mapping[str, Any], where: str) -> Turn:
        if "actions" in mapping:
            _check_keys(mapping, _GUI_TURN_KEYS, where)
            raw = mapping["actions"]
            if not isinstance(raw, list) or not raw:
                raise ValueError(f"{where}.actions: expected a non-empty list of steps")
            steps = tuple(GuiStep.from_dict(s, f"{where}.actions[{i}]") for i, s in enumerate(raw))
        else:
            step = {k: v for k, v in mapping.items() if k not in _GUI_TURN_KEYS}
            steps = (GuiStep.from_dict(step, where),)
        cached = _cached_tokens(mapping, where)
        return cls(
            text=_optional_str(mapping, "say", where),
            reasoning=_optional_str(mapping, "reasoning", where),
            truncated=bool(mapping.get("truncated")),
            cached_tokens=cached,
            gui=steps,
            safety=_optional_str(mapping, "safety", where),
        )

    # The reply_* views apply ``empty``, so the wire encoders never have to think about it.
    @property
    def reply_text(self) -> str | None:
        return None if self.empty else self.text

    @property
    def reply_reasoning(self) -> str | None:
        return None if self.empty else self.reasoning

    @property
    def reply_tool_calls(self) -> tuple[ToolCallSpec, ...]:
        return () if self.empty else self.tool_calls

    @property
    def reply_gui(self) -> tuple[GuiStep, ...]:
        return () if self.empty else self.gui


DEFAULT_FINAL = Turn(text="Done.")


@dataclass(frozen=True)
class Scenario:
    """A scripted conversation, chosen by a substring of the system prompt or first user message."""

    match: str = "*"
    turns: tuple[Turn, ...] = ()
    final: Turn = DEFAULT_FINAL

    @property
    def is_default(self) -> bool:
        return self.match in _DEFAULT_MATCHES

    def turn(self, index: int) -> Turn:
        return self.turns[index] if index < len(self.turns) else self.final

    @classmethod
    def from_dict(cls, data: object, where: str) -> Scenario:
        mapping = _expect_mapping(data, where)
        _check_keys(mapping, _SCENARIO_KEYS, where)
        match = mapping.get("match", "*")
        if not isinstance(match, str):
            raise ValueError(f"{where}.match: expected a string")
        raw_turns = mapping.get("turns") or []
        if not isinstance(raw_turns, list):
            raise ValueError(f"{where}.turns: expected a list")
        turns = tuple(Turn.from_dict(t, f"{where}.turns[{i}]") for i, t in enumerate(raw_turns))
        final_raw = mapping.get("final")
        final = DEFAULT_FINAL if final_raw is None else Turn.from_dict(final_raw, f"{where}.final")
        return cls(match=match, turns=turns, final=final)


@dataclass(frozen=True)
class Script:
    """All scenarios a server knows. The empty script answers every request with "Done."."""

    scenarios: tuple[Scenario, ...] = (Scenario(),)

    @classmethod
    def from_dict(cls, data: object) -> Script:
        mapping = _expect_mapping(data, "script")
        _check_keys(mapping, frozenset({"scenarios"}), "script")
        raw = mapping.get("scenarios")
        if not isinstance(raw, list) or not raw:
            raise ValueError("script.scenarios: expected a non-empty list")
        return cls(tuple(Scenario.from_dict(s, f"scenarios[{i}]") for i, s in enumerate(raw)))

    @classmethod
    def from_file(cls, path: str | Path) -> Script:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def coerce(cls, script: Script | Mapping[str, Any] | str | Path | None) -> Script:
        """Accept a Script, a dict in the JSON format, a path to a JSON file, or None."""
        if script is None:
            return cls()
        if isinstance(script, Script):
            return script
        if isinstance(script, str | Path):
            return cls.from_file(script)
        return cls.from_dict(script)

    def select(self, haystack: str) -> Scenario | None:
        """First non-default scenario whose match occurs in ``haystack``, else the default."""
        for scenario in self.scenarios:
            if not scenario.is_default and scenario.match in haystack:
                return scenario
        return next((s for s in self.scenarios if s.is_default), None)


@dataclass(frozen=True)
class Conversation:
    """Provider-neutral view of a request: everything the script and usage need."""

    model: str
    haystack: str
    assistant_turns: int
    prompt_tokens: int
    stream: bool = False
    include_usage: bool = False
    #: the last full screenshot the request carried (base64), where GUI steps aim
    screenshot: str | None = None
    #: the last image of any kind the request carried (a zoom's crop too), base64:
    #: what a done step's `{read}` is read from
    last_image: str | None = None
    #: what the wire's reply needs of the request (its declared tools)
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """Token counts for one reply; completion_tokens includes reasoning (as both providers do)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int


def estimate_tokens(text: str) -> int:
    """Deterministic stand-in for a tokenizer: about four characters per token."""
    return len(text) // 4 + 1 if text else 0


def usage_for(turn: Turn, prompt_tokens: int) -> Usage:
    reasoning_tokens = estimate_tokens(turn.reply_reasoning or "")
    output = estimate_tokens(turn.reply_text or "") + reasoning_tokens
    for call in turn.reply_tool_calls:
        output += estimate_tokens(call.name) + estimate_tokens(json.dumps(call.arguments))
    for step in turn.reply_gui:
        output += estimate_tokens(repr(step)) // 4 + 8
    return Usage(
        prompt_tokens=prompt_tokens,
        # Real providers bill at least one output token even for an empty reply.
        completion_tokens=max(output, 1),
        cached_tokens=min(turn.cached_tokens, prompt_tokens),
        reasoning_tokens=reasoning_tokens,
    )


#: tokens one image counts for in the mock's estimates (its base64 is not text)
IMAGE_TOKENS = 1000
#: a string this long that is an image's data (base64 or a data: URL) is not counted as text
_IMAGE_DATA = 256


def prompt_tokens_of(*parts: object) -> int:
    """Estimate prompt size from the request parts (messages, system, tools): its text at
    about four characters a token, and IMAGE_TOKENS for each image."""
    chars, images = _measure(parts, 0)
    return (chars // 4 + 1 if chars else 0) + images * IMAGE_TOKENS


def _measure(value: object, depth: int) -> tuple[int, int]:
    """(characters of text, images) in a parsed JSON value."""
    if isinstance(value, str):
        if len(value) > _IMAGE_DATA and (
            value.startswith("data:image/") or _BASE64.fullmatch(value, 0, _IMAGE_DATA)
        ):
            return 0, 1
        return len(value), 0
    if isinstance(value, dict):
        items: Iterable[object] = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return (len(str(value)), 0) if value is not None else (0, 0)
    chars = images = 0
    if depth < 64:
        for item in items:
            c, i = _measure(item, depth + 1)
            chars, images = chars + c, images + i
    return chars, images


_BASE64 = re.compile(r"[A-Za-z0-9+/=]+")


def split_chunks(text: str, size: int = 16) -> list[str]:
    """Cut text into stream-sized pieces so clients must really accumulate deltas."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse_bytes(data: object, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# ----- recorded requests ----------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received. Headers are keyed in lower case and kept out of repr()."""

    path: str
    provider: str
    body: Any
    headers: dict[str, str] = field(repr=False)


def text_of(content: object) -> str:
    """Text of message content: a string, or a list of parts of which only text counts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""
