"""The data of a tool-call test: audio in, tool calls out, and how they scored.

The names and fields are russo's, so `from helios import toolcalls as russo`
keeps user code working. Differences, all fixes:
- `ToolCall` hashes nested dict and list arguments (russo's hash raised);
- a run that raised keeps its error (`SingleRunResult.error`), shown in `summary()`.
"""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helios.failures import ErrorInfo

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


def canonical_json(value: Any) -> str:
    """One text per value: key order and tuple/list do not matter."""
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


class ToolCall(Positional):
    """A provider-neutral tool call: a name and its arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return self.name == other.name and self.arguments == other.arguments

    def __hash__(self) -> int:
        return hash((self.name, canonical_json(self.arguments)))

    def __str__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.arguments.items())
        return f"{self.name}({args})"


class AgentResponse(Positional):
    """What an agent did: the tool calls it made, and its raw reply for debugging."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool_calls: list[ToolCall] = Field(default_factory=list)
    raw: Any | None = None


class ToolCallMatch(Positional):
    """One expected call and the actual call it matched, or the closest one."""

    expected: ToolCall
    actual: ToolCall | None = None
    matched: bool = False
    details: str = ""


class EvalResult(Positional):
    """How one run's actual calls compared with the expected ones."""

    passed: bool
    expected: list[ToolCall] = Field(default_factory=list)
    actual: list[ToolCall] = Field(default_factory=list)
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

    @property
    def passed(self) -> bool:
        return self.eval_result.passed

    @property
    def error(self) -> ErrorInfo | None:
        return self.eval_result.error


class BatchResult(Positional):
    """Every run of a batch: prompts × runs, in prompt order then run order."""

    runs: list[SingleRunResult] = Field(default_factory=list)

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
