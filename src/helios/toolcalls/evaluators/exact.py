"""Exact matching of tool calls by name and arguments.

Fixes of russo's behaviour:
- ordered matching (`match_order=True`) checks that the expected calls occur
  in the actual calls in the same relative order; russo compared positions in
  a list it had already shrunk, so [A, B] against [A, B] failed;
- an empty `expect` with `ignore_extra_calls=False` fails when calls were made;
- every unmatched expected call reports the closest actual call and a diff.
"""

from __future__ import annotations

from typing import Any

from helios.models.base import ToolCall
from helios.toolcalls.types import EXTRA_CALL, EvalResult, ToolCallMatch, as_call, new_call


class ExactEvaluator:
    def __init__(
        self,
        *,
        match_order: bool = False,
        ignore_extra_args: bool = False,
        ignore_extra_calls: bool = True,
    ) -> None:
        self.match_order = match_order
        self.ignore_extra_args = ignore_extra_args
        self.ignore_extra_calls = ignore_extra_calls

    def __repr__(self) -> str:
        return (
            f"ExactEvaluator(match_order={self.match_order}, "
            f"ignore_extra_args={self.ignore_extra_args}, "
            f"ignore_extra_calls={self.ignore_extra_calls})"
        )

    def evaluate(self, expected: list[ToolCall], actual: list[ToolCall]) -> EvalResult:
        used: set[int] = set()
        matches = [self._match_one(exp, actual, used) for exp in expected]
        leftovers = [call for i, call in enumerate(actual) if i not in used]
        passed = all(m.matched for m in matches)
        if not self.ignore_extra_calls and leftovers:
            passed = False
            matches.extend(
                ToolCallMatch(
                    expected=new_call(EXTRA_CALL),
                    actual=call,
                    matched=False,
                    details=f"unexpected extra tool call: {call}",
                )
                for call in leftovers
            )
        return EvalResult(passed=passed, expected=list(expected), actual=list(actual),
                          matches=matches)  # fmt: skip

    def _match_one(
        self, expected: ToolCall, actual: list[ToolCall], used: set[int]
    ) -> ToolCallMatch:
        # In order: only calls after the last one matched may match the next.
        start = max(used) + 1 if self.match_order and used else 0
        for i in range(start, len(actual)):
            if i not in used and self.is_match(expected, actual[i]):
                used.add(i)
                return ToolCallMatch(expected=expected, actual=actual[i], matched=True)
        free = [call for i, call in enumerate(actual) if i not in used]
        if not free:
            why = "no actual tool calls" if not actual else "every actual call matched another"
            return ToolCallMatch(expected=expected, matched=False, details=why)
        closest = min(free, key=lambda call: self.distance(expected, call))
        details = self.diff(expected, closest)
        if self.match_order and self.is_match(expected, closest):
            details = f"out of order: {closest} came before an earlier expected call"
        return ToolCallMatch(expected=expected, actual=closest, matched=False, details=details)

    def is_match(self, expected: ToolCall, actual: ToolCall) -> bool:
        if expected.name != actual.name:
            return False
        want, got = _arguments(expected), _arguments(actual)
        if self.ignore_extra_args:
            return all(key in got and got[key] == value for key, value in want.items())
        return want == got

    def distance(self, expected: ToolCall, actual: ToolCall) -> int:
        want, got = _arguments(expected), _arguments(actual)
        score = 0 if expected.name == actual.name else 10
        for key, value in want.items():
            if key not in got:
                score += 2
            elif got[key] != value:
                score += 1
        if not self.ignore_extra_args:
            score += sum(1 for key in got if key not in want)
        return score

    def diff(self, expected: ToolCall, actual: ToolCall) -> str:
        """A readable diff: `name: expected 'a', got 'b'; arg 'x': expected 1, got 2`."""
        want, got = _arguments(expected), _arguments(actual)
        parts: list[str] = []
        if expected.name != actual.name:
            parts.append(f"name: expected {expected.name!r}, got {actual.name!r}")
        for key, value in want.items():
            if key not in got:
                parts.append(f"arg {key!r}: missing (expected {_short(value)})")
            elif got[key] != value:
                parts.append(f"arg {key!r}: expected {_short(value)}, got {_short(got[key])}")
        if not self.ignore_extra_args:
            parts.extend(
                f"arg {key!r}: not expected (got {_short(value)})"
                for key, value in got.items()
                if key not in want
            )
        return "; ".join(parts) if parts else "no difference"


def _arguments(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the evaluator compares them (`types.as_call`: arguments a
    model sent as unreadable JSON are their text under `_raw`)."""
    return as_call(call).arguments or {}


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
