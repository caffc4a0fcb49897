"""The data of a tool-call test: audio in, tool calls out, and how they scored.

The names and fields are russo's, so `from helios import toolcalls as russo`
keeps user code working. Differences, all fixes:
- a tool call is the model layer's `helios.models.ToolCall` (one type for the
  calls a model makes and the calls a test expects); `ToolCall(name, arguments)`
  and `tool_call(name, **arguments)` make one, and it hashes nested dict and list
  arguments (russo's hash raised);
- a run that raised keeps its error (`SingleRunResult.error`), shown in `summary()`.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from helios.failures import ErrorInfo
from helios.models.base import ToolCall as Call
from helios.usage import Usage

AudioFormat = Literal["wav", "mp3", "pcm", "ogg", "flac", "opus", "aac"]


class Positional(BaseModel):
    """Fields may also be given by position, in declaration order, as the issue's
    signatures read (`Audio(data, "wav")`, `ToolCall("f", {...})`)."""

    def __init__(self, *args: Any, **data: Any) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional "
                            f"arguments ({len(args)} given)")  # fmt: skip
        for name, value in zip(names, args, strict=False):
            if name in data:
                raise TypeError(f"{type(self).__name__} got {name!r} twice")
            data[name] = value
        super().__init__(**data)


class Audio(Positional):
    """Audio bytes and what they are. `pcm` is raw little-endian samples."""

    model_config = ConfigDict(frozen=True)

    data: bytes
    format: AudioFormat = "wav"
    sample_rate: int = 24000
    channels: int = 1
    #: bytes per sample (16-bit = 2)
    sample_width: int = 2
    #: the text this audio speaks, when the synthesizer knows it (for reports)
    transcript: str | None = None

    def save(self, path: str | Path) -> Path:
        """Write the audio; raw PCM saved to a `.wav` path gets a WAV header."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.suffix.lower() == ".wav" and self.format == "pcm":
            with wave.open(str(target), "wb") as handle:
                handle.setnchannels(self.channels)
                handle.setsampwidth(self.sample_width)
                handle.setframerate(self.sample_rate)
                handle.writeframes(self.data)
        else:
            target.write_bytes(self.data)
        return target

    @property
    def duration(self) -> float:
        """Seconds of audio (0.0 when the format does not say)."""
        if self.format == "pcm":
            frame = max(1, self.sample_width * self.channels)
            return len(self.data) / frame / float(self.sample_rate or 1)
        if self.format != "wav":
            return 0.0
        try:  # wave refuses bytes that are not a RIFF/WAVE file
            with wave.open(io.BytesIO(self.data), "rb") as handle:
                return handle.getnframes() / float(handle.getframerate() or 1)
        except (wave.Error, EOFError):
            return 0.0

    def __repr__(self) -> str:  # the bytes would flood test output
        return (
            f"Audio(format={self.format!r}, {len(self.data)} bytes, "
            f"sample_rate={self.sample_rate}, channels={self.channels})"
        )

    __str__ = __repr__


class _ToolCallFields(BaseModel):
    """What a tool call given as a mapping must hold (russo's ToolCall fields)."""

    model_config = ConfigDict(title="ToolCall")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


def new_call(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    id: str = "",
    raw_arguments: str = "",
) -> Call:
    """A tool call from russo's fields, checked as russo's ToolCall checked them
    (a ValidationError for a name that is not text or arguments that are not a mapping)."""
    given = {} if arguments is None else arguments
    fields = _ToolCallFields.model_validate({"name": name, "arguments": given})
    return Call(id, fields.name, fields.arguments, raw_arguments)


def as_call(value: Any) -> Call:
    """The one conversion to a tool call as russo promises it: a `helios.models.ToolCall`
    whose arguments are a dict (arguments a model sent as unreadable JSON are kept, as
    text, under `_raw`, so the diff shows them); from a ToolCall or a mapping with
    `name` and `arguments` (a ValidationError if it has no such fields)."""
    if isinstance(value, Call):
        if value.arguments is None:
            return Call(value.id, value.name, {"_raw": value.raw_arguments}, value.raw_arguments)
        return value
    fields = _ToolCallFields.model_validate(value)
    return Call("", fields.name, fields.arguments)


def call_document(call: Call) -> dict[str, Any]:
    """A tool call in results and reports: its name and arguments (as russo's were)."""
    return {"name": call.name, "arguments": call.arguments}


class _CallSchema:
    """How the result models below validate and serialize a `helios.models.ToolCall`."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        fields = handler.generate_schema(_ToolCallFields)

        def validate(value: Any, inner: core_schema.ValidatorFunctionWrapHandler) -> Call:
            if isinstance(value, Call):
                return as_call(value)
            parsed = inner(value)
            return Call("", parsed.name, parsed.arguments)

        serialize = core_schema.plain_serializer_function_ser_schema(call_document)
        return core_schema.no_info_wrap_validator_function(validate, fields,
                                                           serialization=serialize)  # fmt: skip


#: a tool call as a field of the result models
ToolCallField = Annotated[Call, _CallSchema]


if TYPE_CHECKING:
    # russo's class name, kept for its users: to a type checker, what it is
    ToolCall = new_call
else:

    class _RussoToolCall(type):
        """`helios.toolcalls.ToolCall(name, arguments)` makes a `helios.models.ToolCall`
        (there is one tool-call type), and `isinstance(x, ToolCall)` asks for one."""

        def __call__(cls, name, arguments=None, *, id="", raw_arguments=""):
            return new_call(name, arguments, id=id, raw_arguments=raw_arguments)

        def __instancecheck__(cls, instance):
            return isinstance(instance, Call)

        def __subclasscheck__(cls, subclass):
            return issubclass(subclass, Call)

    class ToolCall(metaclass=_RussoToolCall):
        """russo's `ToolCall(name, arguments)`: makes a `helios.models.ToolCall`.

        The name and arguments are russo's (by keyword or by position); the id and the
        raw argument text are the model layer's, empty for an expected call. Calls are
        equal when their names and arguments are; they hash alike and print as
        `name(key=value, ...)`."""

        @classmethod
        def __get_pydantic_core_schema__(cls, source, handler):
            return _CallSchema.__get_pydantic_core_schema__(Call, handler)

        @classmethod
        def model_validate(cls, value):
            return as_call(value)


class AgentResponse(Positional):
    """What an agent did: the tool calls it made, and its raw reply for debugging."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool_calls: list[ToolCallField] = Field(default_factory=list)
    raw: Any | None = None


class ToolCallMatch(Positional):
    """One expected call and the actual call it matched, or the closest one."""

    expected: ToolCallField
    actual: ToolCallField | None = None
    matched: bool = False
    details: str = ""


class EvalResult(Positional):
    """How one run's actual calls compared with the expected ones."""

    passed: bool
    expected: list[ToolCallField] = Field(default_factory=list)
    actual: list[ToolCallField] = Field(default_factory=list)
    matches: list[ToolCallMatch] = Field(default_factory=list)
    #: the run failed before it could be evaluated (synthesis, agent, evaluator)
    error: ErrorInfo | None = None

    @property
    def match_rate(self) -> float:
        """Fraction of expected calls that matched (1.0 when none were expected)."""
        if self.error is not None:
            return 0.0
        if not self.expected:
            return 1.0 if self.passed else 0.0
        matched = sum(1 for m in self.matches if m.matched and m.expected.name != EXTRA_CALL)
        return matched / len(self.expected)

    def summary(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        lines = [f"{status} ({self.match_rate:.0%} match rate)"]
        if self.error is not None:
            lines.append(f"  error in {self.error.phase}: {self.error.type}: {self.error.message}")
        for match in self.matches:
            icon = "+" if match.matched else "-"
            if match.expected.name == EXTRA_CALL:
                lines.append(f"  [{icon}] unexpected call {match.actual}")
            else:
                got = f" -> {match.actual}" if match.actual else " -> (no match)"
                lines.append(f"  [{icon}] {match.expected}{got}")
            if match.details:
                lines.append(f"      {match.details}")
        return "\n".join(lines)


#: the `expected.name` of a match that reports an unexpected extra call
EXTRA_CALL = "(none)"


class SingleRunResult(Positional):
    """One run of one prompt."""

    prompt: str
    run_index: int
    eval_result: EvalResult
    #: the test this run belongs to (the YAML config's id, the pytest node id)
    test_id: str | None = None
    #: seconds from the run's start to its verdict (synthesis shared by a prompt's runs)
    duration: float = 0.0
    #: retries of transient errors (429, 5xx, timeouts) this run waited out
    retries: int = 0
    #: the model's tokens and cost in this run, when the agent's calls go through
    #: Helios's model services (ModelAgent); None when Helios cannot see them
    usage: Usage | None = None

    @property
    def passed(self) -> bool:
        return self.eval_result.passed

    @property
    def error(self) -> ErrorInfo | None:
        return self.eval_result.error


class BatchResult(Positional):
    """Every run of a batch: prompts × runs, in prompt order then run order."""

    runs: list[SingleRunResult] = Field(default_factory=list)
    #: the budgets, which one stopped the run and the run's spend (`engine.budget`,
    #: run.json's `budget`); None: no budget
    budget: dict[str, Any] | None = None

    @property
    def budget_stopped(self) -> str | None:
        """Which budget stopped the run, and the spend, in one line (None: none did)."""
        if self.budget is None or not self.budget.get("stopped_by"):
            return None
        return str(self.budget.get("reason") or self.budget["stopped_by"])

    @property
    def total(self) -> int:
        return len(self.runs)

    @property
    def passed_count(self) -> int:
        return sum(1 for run in self.runs if run.eval_result.passed)

    @property
    def failed_count(self) -> int:
        return self.total - self.passed_count

    @property
    def error_count(self) -> int:
        """Failed runs that raised (as opposed to runs that made the wrong calls)."""
        return sum(1 for run in self.runs if run.eval_result.error is not None)

    @property
    def passed(self) -> bool:
        """True only if every run passed."""
        return all(run.eval_result.passed for run in self.runs)

    @property
    def pass_rate(self) -> float:
        return self.passed_count / self.total if self.runs else 1.0

    @property
    def match_rate(self) -> float:
        if not self.runs:
            return 1.0
        return sum(run.eval_result.match_rate for run in self.runs) / self.total

    @property
    def usage(self) -> Usage | None:
        """Tokens and cost over the runs that counted them (None: none did). The cost
        is None when unknown (no price for the model), with `cost_unknown_reason`."""
        counted = [run.usage for run in self.runs if run.usage is not None]
        return Usage.sum(counted) if counted else None

    @property
    def errors(self) -> list[SingleRunResult]:
        return [run for run in self.runs if run.eval_result.error is not None]

    def by_prompt(self) -> dict[str, list[SingleRunResult]]:
        groups: dict[str, list[SingleRunResult]] = {}
        for run in self.runs:
            groups.setdefault(run.prompt, []).append(run)
        return groups

    def summary(self) -> str:
        """russo's lines, plus each failed run's error under its line."""
        status = "PASSED" if self.passed else "FAILED"
        lines = [
            f"{status} ({self.pass_rate:.0%} pass rate, {self.total} runs)",
            f"  Passed: {self.passed_count}/{self.total}",
        ]
        for prompt, runs in self.by_prompt().items():
            passed = sum(1 for run in runs if run.eval_result.passed)
            lines.append(f"  Prompt: {prompt!r}")
            lines.append(f"    {passed}/{len(runs)} passed")
            for run in runs:
                result = run.eval_result
                icon = "+" if result.passed else "-"
                lines.append(f"    [{icon}] run {run.run_index}: {result.match_rate:.0%} match")
                if result.error is not None:
                    error = result.error
                    lines.append(f"        error in {error.phase}: {error.type}: {error.message}")
                elif not result.passed:
                    lines.extend(f"        {detail}" for detail in _failure_details(result))
        return "\n".join(lines)


def _failure_details(result: EvalResult) -> list[str]:
    details = []
    for match in result.matches:
        if match.matched:
            continue
        if match.expected.name == EXTRA_CALL:
            details.append(f"unexpected call {match.actual}")
        else:
            details.append(f"expected {match.expected}: {match.details or 'no match'}")
    return details
