"""ATIF v1.5 trajectories: an incremental recorder for agent loops, and a validator.

ATIF (Agent Trajectory Interchange Format) is Harbor's trajectory format, specified
in Harbor's RFC 0001. Agents write one document to `agent/trajectory.json`.

The recorder is on the hot path of every agent turn, so it only appends plain dicts
and keeps running totals; validation lives in `validate_trajectory`, which tests and
the verifier call once per finished document.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import tempfile
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from helios.safe_json import dumps

ATIF_VERSION = "ATIF-v1.5"

_SCHEMA_RESOURCE = "atif_schema.json"

#: final_metrics total -> the per-step metrics field it sums (RFC: FinalMetricsSchema)
_TOTALS = (
    ("total_prompt_tokens", "prompt_tokens"),
    ("total_completion_tokens", "completion_tokens"),
    ("total_cached_tokens", "cached_tokens"),
    ("total_cost_usd", "cost_usd"),
)


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
    as the place for it, so that is where `reasoning_tokens` goes.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    reasoning_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
        }
        if self.reasoning_tokens:
            out["extra"] = {"reasoning_tokens": self.reasoning_tokens}
        return out


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
        self._cost_usd = 0.0

    def _append(self, source: str, message: str, at: float | None = None) -> dict[str, Any]:
        step: dict[str, Any] = {
            "step_id": len(self._steps) + 1,
            "timestamp": _utc_now() if at is None else _utc_at(at),
            "source": source,
            "message": message,
        }
        self._steps.append(step)
        return step

    def add_system(self, message: str, *, at: float | None = None) -> None:
        self._append("system", message, at)

    def add_user(self, message: str, *, at: float | None = None) -> None:
        self._append("user", message, at)

    def add_agent(
        self,
        *,
        message: str,
        reasoning: str | None = None,
        tool_calls: list[ToolCallRecord] | None = None,
        metrics: StepMetrics | None = None,
        model_name: str | None = None,
        at: float | None = None,
    ) -> int:
        """Record one model response; returns its step_id for `add_observation`."""
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
        if metrics is not None:
            step["metrics"] = metrics.to_dict()
            self._prompt_tokens += metrics.prompt_tokens
            self._completion_tokens += metrics.completion_tokens
            self._cached_tokens += metrics.cached_tokens
            self._reasoning_tokens += metrics.reasoning_tokens
            self._cost_usd += metrics.cost_usd
        return int(step["step_id"])

    def add_observation(self, step_id: int, source_call_id: str, content: str) -> None:
        """Attach the result of tool call `source_call_id` to agent step `step_id`."""
        if not 1 <= step_id <= len(self._steps):
            raise ValueError(f"no step {step_id} (have {len(self._steps)})")
        step = self._steps[step_id - 1]
        if step["source"] != "agent":
            raise ValueError(f"step {step_id} is a {step['source']} step, not an agent step")
        if all(call["tool_call_id"] != source_call_id for call in step.get("tool_calls", ())):
            raise ValueError(f"step {step_id} made no tool call with id {source_call_id!r}")
        observation = step.setdefault("observation", {"results": []})
        observation["results"].append({"source_call_id": source_call_id, "content": content})

    def _final_metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total_prompt_tokens": self._prompt_tokens,
            "total_completion_tokens": self._completion_tokens,
            "total_cached_tokens": self._cached_tokens,
            "total_cost_usd": self._cost_usd,
            "total_steps": len(self._steps),
        }
        if self._reasoning_tokens:
            out["extra"] = {"total_reasoning_tokens": self._reasoning_tokens}
        return out

    def to_dict(self) -> dict[str, Any]:
        """The whole document. Its step dicts are the recorder's own: do not mutate."""
        return {
            "schema_version": ATIF_VERSION,
            "session_id": self._session_id,
            "agent": self._agent,
            "steps": self._steps,
            "final_metrics": self._final_metrics(),
        }

    def write(self, path: Path) -> None:
        """Write the document as JSON, atomically: readers never see a partial file."""
        text = dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        atomic_write_text(Path(path), text)


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temp file must live in the target directory: os.replace is only atomic
    # within one filesystem.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; the trajectory is read by other users (host vs sandbox).
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


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
        # import_module rather than `import`: jsonschema is a dev-only dependency and
        # ships no type information, so a static import would break mypy --strict.
        jsonschema = importlib.import_module("jsonschema")
    except ImportError as exc:
        raise ImportError(
            "validate_trajectory needs the 'jsonschema' package, a development dependency; "
            "install it with: pip install 'helios-harness[dev]'"
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

    The JSON Schema covers structure and types; the checks here cover what a schema
    cannot: consecutive step_ids from 1, ISO 8601 timestamps, observation results
    pointing at a tool call of their own step, and final_metrics equal to the sums.
    Raises ImportError if the optional `jsonschema` package is missing.
    """
    problems = [_describe(error) for error in _validator().iter_errors(doc)]
    if not isinstance(doc, dict):
        return problems
    raw_steps = doc.get("steps")
    # Non-object steps were already reported by the schema; skip them, keep indexes.
    steps = dict(enumerate(raw_steps)) if isinstance(raw_steps, list) else {}
    steps = {index: step for index, step in steps.items() if isinstance(step, dict)}
    problems += _check_steps(steps)
    problems += _check_tool_call_refs(steps)
    problems += _check_final_metrics(doc, steps, len(raw_steps or []))
    return problems


def _check_steps(steps: dict[int, dict[str, Any]]) -> list[str]:
    problems = []
    gap_reported = False
    for index, step in steps.items():
        got = step.get("step_id")
        # Report only the first break: every later id is then off by the same gap.
        if got != index + 1 and not gap_reported:
            gap_reported = True
            problems.append(
                f"$.steps[{index}].step_id: expected {index + 1} "
                f"(step_ids start at 1 and are consecutive), got {got!r}"
            )
        stamp = step.get("timestamp")
        if not isinstance(stamp, str):
            continue
        try:
            # Same acceptance rule as Harbor's reference model ('Z' means UTC).
            datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"$.steps[{index}].timestamp: {stamp!r} is not an ISO 8601 timestamp")
    return problems


def _call_ids(step: dict[str, Any], index: int, problems: list[str]) -> set[str]:
    ids: set[str] = set()
    calls = step.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        call_id = call.get("tool_call_id") if isinstance(call, dict) else None
        if not isinstance(call_id, str):
            continue
        if call_id in ids:
            problems.append(f"$.steps[{index}].tool_calls: duplicate tool_call_id {call_id!r}")
        ids.add(call_id)
    return ids


def _check_tool_call_refs(steps: dict[int, dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    for index, step in steps.items():
        ids = _call_ids(step, index, problems)
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        for r_index, result in enumerate(results if isinstance(results, list) else []):
            ref = result.get("source_call_id") if isinstance(result, dict) else None
            # A null source_call_id is legal: the result of a non-tool action.
            if isinstance(ref, str) and ref not in ids:
                problems.append(
                    f"$.steps[{index}].observation.results[{r_index}].source_call_id: "
                    f"{ref!r} is not the tool_call_id of any tool call in step "
                    f"{step.get('step_id')!r}"
                )
    return problems


def _number(value: object) -> float | None:
    """`value` as a number, or None for anything else (bool is not a count)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _check_final_metrics(
    doc: dict[str, Any], steps: dict[int, dict[str, Any]], step_count: int
) -> list[str]:
    final = doc.get("final_metrics")
    if not isinstance(final, dict):
        return []
    problems = []
    all_metrics = [m for m in (s.get("metrics") for s in steps.values()) if isinstance(m, dict)]
    for total_field, step_field in _TOTALS:
        declared = _number(final.get(total_field))
        actual = sum(_number(m.get(step_field)) or 0.0 for m in all_metrics)
        # Totals are optional in ATIF; only a total that is present must add up.
        if declared is not None and not math.isclose(declared, actual, abs_tol=1e-9):
            problems.append(
                f"$.final_metrics.{total_field}: {final[total_field]!r} but the steps' "
                f"{step_field} values sum to {actual:g}"
            )
    total_steps = _number(final.get("total_steps"))
    # The RFC lets total_steps differ from len(steps) only when notes explain why.
    if total_steps is not None and total_steps != step_count and not doc.get("notes"):
        problems.append(
            f"$.final_metrics.total_steps: {final['total_steps']!r} but there are "
            f"{step_count} steps (a difference must be explained in notes)"
        )
    return problems
