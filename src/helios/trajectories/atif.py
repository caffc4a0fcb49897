"""ATIF trajectories: an incremental recorder for agent loops, and a validator.

ATIF (Agent Trajectory Interchange Format) is Harbor's trajectory format, specified
in Harbor's RFC 0001. Agents write one document to `agent/trajectory.json`.

A document says the lowest version whose features it uses: `ATIF-v1.5` when every
message and observation is text (byte for byte what Helios wrote before images),
`ATIF-v1.6` when one of them is a list of content parts (text, and images as files
referenced by path: never inline). The validator accepts both, and rejects content
parts in a document that claims a version before v1.6.

The recorder is on the hot path of every agent turn, so it only appends plain dicts
and keeps running totals; validation lives in `validate_trajectory`, which tests and
the verifier call once per finished document.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from helios.atomic_write import write_text_atomic
from helios.safe_json import dumps
from helios.trajectories.atif_checks import (
    check_content_parts,
    check_final_metrics,
    check_steps,
    check_tool_call_refs,
)

#: the version of a text-only document
ATIF_VERSION = "ATIF-v1.5"
#: the version of a document with content parts (images)
ATIF_MULTIMODAL_VERSION = "ATIF-v1.6"
_BEFORE_CONTENT_PARTS = frozenset(f"ATIF-v1.{minor}" for minor in range(6))
#: a message or an observation's content: text, or content parts (v1.6)
Content = str | list[dict[str, Any]]

_SCHEMA_RESOURCE = "atif_schema.json"


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call an agent step made (ATIF ToolCallSchema)."""

    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        # A shallow copy, so a caller reusing its arguments dict cannot rewrite history.
        return {
            "tool_call_id": self.tool_call_id,
            "function_name": self.function_name,
            "arguments": dict(self.arguments),
        }


@dataclass(frozen=True, slots=True)
class StepMetrics:
    """Token and cost figures of one model call (ATIF MetricsSchema).

    `prompt_tokens` includes `cached_tokens` (the RFC counts cache hits as a subset
    of the prompt). ATIF has no reasoning-token field; the RFC names `metrics.extra`
    as the place for it, so that is where `reasoning_tokens` goes. An unknown cost (no
    price for the model) is `cost_usd: null` (the schema allows it), with the reason in
    `extra.cost_unknown_reason`.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    reasoning_tokens: int = 0
    #: why `cost_usd` is None
    cost_unknown_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
        }
        extra: dict[str, Any] = {}
        if self.reasoning_tokens:
            extra["reasoning_tokens"] = self.reasoning_tokens
        if self.cost_usd is None:
            extra["cost_unknown_reason"] = self.cost_unknown_reason or "unknown"
        if extra:
            out["extra"] = extra
        return out


def text_part(text: str) -> dict[str, Any]:
    """A text content part (ATIF v1.6 ContentPart)."""
    return {"type": "text", "text": text}


def image_part(path: str, media_type: str = "image/png") -> dict[str, Any]:
    """An image content part: a file at `path` (relative to the trajectory's folder)."""
    return {"type": "image", "source": {"media_type": media_type, "path": path}}


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _utc_at(epoch: float) -> str:
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class TrajectoryRecorder:
    """Builds an ATIF document turn by turn.

    Each `add_*` call appends one plain dict and updates running totals, so a turn
    costs O(size of that turn) however long the trajectory grows. Nothing is
    validated or serialised until `to_dict`/`write`.
    """

    def __init__(
        self,
        *,
        session_id: str,
        agent_name: str,
        agent_version: str,
        model_name: str | None,
        tool_definitions: list[dict[str, Any]],
    ) -> None:
        self._session_id = session_id
        self._model_name = model_name
        self._agent: dict[str, Any] = {"name": agent_name, "version": agent_version}
        if model_name is not None:
            self._agent["model_name"] = model_name
        self._agent["tool_definitions"] = list(tool_definitions)
        self._steps: list[dict[str, Any]] = []
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._cached_tokens = 0
        self._reasoning_tokens = 0
        self._cost_usd: float | None = 0.0
        self._cost_unknown_reason: str | None = None
        #: agent steps the response cache answered (`--cache`)
        self._cache_hits = 0
        #: whether any message or observation is a list of content parts (v1.6)
        self._multimodal = False

    def _content(self, content: Content) -> Content:
        if isinstance(content, list):
            self._multimodal = True
            return list(content)
        return content

    def _append(self, source: str, message: Content, at: float | None = None) -> dict[str, Any]:
        message = self._content(message)
        step: dict[str, Any] = {
            "step_id": len(self._steps) + 1,
            "timestamp": _utc_now() if at is None else _utc_at(at),
            "source": source,
            "message": message,
        }
        self._steps.append(step)
        return step

    def add_system(self, message: Content, *, at: float | None = None) -> None:
        self._append("system", message, at)

    def add_user(self, message: Content, *, at: float | None = None) -> None:
        self._append("user", message, at)

    def add_agent(
        self,
        *,
        message: Content,
        reasoning: str | None = None,
        tool_calls: list[ToolCallRecord] | None = None,
        metrics: StepMetrics | None = None,
        model_name: str | None = None,
        at: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Record one model response; returns its step_id for `add_observation`.
        `extra`: the step's free-form metadata (the response cache's mark)."""
        calls = [call.to_dict() for call in tool_calls or ()]
        ids = [call["tool_call_id"] for call in calls]
        if len(set(ids)) != len(ids):
            # Observations are matched to calls by id, so ids must be unique per step.
            raise ValueError(f"duplicate tool_call_id in one agent step: {ids}")
        step = self._append("agent", message, at)
        model = model_name if model_name is not None else self._model_name
        if model is not None:
            step["model_name"] = model
        if reasoning is not None:
            step["reasoning_content"] = reasoning
        if calls:
            step["tool_calls"] = calls
        if extra:
            step["extra"] = extra
            self._cache_hits += bool((extra.get("response_cache") or {}).get("hit"))
        if metrics is not None:
            step["metrics"] = metrics.to_dict()
            self._prompt_tokens += metrics.prompt_tokens
            self._completion_tokens += metrics.completion_tokens
            self._cached_tokens += metrics.cached_tokens
            self._reasoning_tokens += metrics.reasoning_tokens
            if self._cost_usd is None or metrics.cost_usd is None:
                self._cost_usd = None  # a total with an unknown part is unknown
                self._cost_unknown_reason = (
                    self._cost_unknown_reason or metrics.cost_unknown_reason or "unknown"
                )
            else:
                self._cost_usd += metrics.cost_usd
        return int(step["step_id"])

    def add_observation(self, step_id: int, source_call_id: str, content: Content) -> None:
        """Attach the result of tool call `source_call_id` to agent step `step_id`."""
        if not 1 <= step_id <= len(self._steps):
            raise ValueError(f"no step {step_id} (have {len(self._steps)})")
        step = self._steps[step_id - 1]
        if step["source"] != "agent":
            raise ValueError(f"step {step_id} is a {step['source']} step, not an agent step")
        if all(call["tool_call_id"] != source_call_id for call in step.get("tool_calls", ())):
            raise ValueError(f"step {step_id} made no tool call with id {source_call_id!r}")
        observation = step.setdefault("observation", {"results": []})
        result = {"source_call_id": source_call_id, "content": self._content(content)}
        observation["results"].append(result)

    def _final_metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total_prompt_tokens": self._prompt_tokens,
            "total_completion_tokens": self._completion_tokens,
            "total_cached_tokens": self._cached_tokens,
            "total_cost_usd": self._cost_usd,
            "total_steps": len(self._steps),
        }
        extra: dict[str, Any] = {}
        if self._reasoning_tokens:
            extra["total_reasoning_tokens"] = self._reasoning_tokens
        if self._cost_usd is None:
            extra["cost_unknown_reason"] = self._cost_unknown_reason
        if self._cache_hits:
            extra["response_cache_hits"] = self._cache_hits
        if extra:
            out["extra"] = extra
        return out

    def to_dict(self) -> dict[str, Any]:
        """The whole document. Its step dicts are the recorder's own: do not mutate."""
        return {
            "schema_version": ATIF_MULTIMODAL_VERSION if self._multimodal else ATIF_VERSION,
            "session_id": self._session_id,
            "agent": self._agent,
            "steps": self._steps,
            "final_metrics": self._final_metrics(),
        }

    def write(self, path: Path) -> None:
        """Write the document as JSON, atomically: readers never see a partial file."""
        text = dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        write_text_atomic(Path(path), text)


# --- validation -------------------------------------------------------------------


class _SchemaError(Protocol):
    """The part of `jsonschema.ValidationError` this module reads."""

    message: str
    json_path: str
    schema_path: Iterable[object]


class _Validator(Protocol):
    def iter_errors(self, instance: object) -> Iterable[_SchemaError]: ...


@functools.cache
def _schema_text() -> str:
    package = resources.files("helios.trajectories")
    return package.joinpath(_SCHEMA_RESOURCE).read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """The ATIF JSON Schema (draft 2020-12) shipped with Helios, as a fresh dict."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


@functools.cache
def _validator() -> _Validator:
    try:
        # import_module rather than `import`: jsonschema is an optional dependency (the
        # `validate` extra) and ships no type information, so a static import would
        # break mypy --strict.
        jsonschema = importlib.import_module("jsonschema")
    except ImportError as exc:
        raise ImportError(
            "validate_trajectory needs the 'jsonschema' package; "
            "install it with: pip install 'helios-harness[validate]'"
        ) from exc
    validator_class = jsonschema.Draft202012Validator
    schema = load_schema()
    validator_class.check_schema(schema)
    validator: _Validator = validator_class(schema)
    return validator


def _describe(error: _SchemaError) -> str:
    # The schema's only if/then is the agent-only-fields rule; its raw message
    # ("'x' is not of type 'null'") would not say what is actually wrong.
    if "then" in list(error.schema_path):
        field = error.json_path.rsplit(".", 1)[-1]
        return f"{error.json_path}: '{field}' is only allowed on steps whose source is 'agent'"
    return f"{error.json_path}: {error.message}"


def validate_trajectory(doc: dict[str, Any]) -> list[str]:
    """Check an ATIF document; returns human-readable problems (empty means valid).

    The JSON Schema covers structure and types; `atif_checks` covers what a schema
    cannot: consecutive step_ids from 1, ISO 8601 timestamps, observation results
    pointing at a tool call of their own step, final_metrics equal to the sums, and
    content parts only in a v1.6 document.
    Raises ImportError if the optional `jsonschema` package is missing.
    """
    problems = [_describe(error) for error in _validator().iter_errors(doc)]
    if not isinstance(doc, dict):
        return problems
    raw_steps = doc.get("steps")
    # Non-object steps were already reported by the schema; skip them, keep indexes.
    steps = dict(enumerate(raw_steps)) if isinstance(raw_steps, list) else {}
    steps = {index: step for index, step in steps.items() if isinstance(step, dict)}
    problems += check_steps(steps)
    problems += check_tool_call_refs(steps)
    problems += check_final_metrics(doc, steps, len(raw_steps or []))
    problems += check_content_parts(doc, steps, _BEFORE_CONTENT_PARTS)
    return problems
