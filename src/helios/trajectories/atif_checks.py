"""The rules of an ATIF document that a JSON Schema cannot express: consecutive
step_ids from 1, ISO 8601 timestamps, observation results pointing at a tool call of
their own step, final_metrics equal to the sums, and content parts only from v1.6.
Each check returns human-readable problems (empty: none)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

#: final_metrics total -> the per-step metrics field it sums (RFC: FinalMetricsSchema)
_TOTALS = (
    ("total_prompt_tokens", "prompt_tokens"),
    ("total_completion_tokens", "completion_tokens"),
    ("total_cached_tokens", "cached_tokens"),
    ("total_cost_usd", "cost_usd"),
)


def check_content_parts(
    doc: dict[str, Any], steps: dict[int, dict[str, Any]], before_parts: frozenset[str]
) -> list[str]:
    """Content parts appeared in v1.6: a document claiming an earlier version (one of
    `before_parts`) has none."""
    version = doc.get("schema_version")
    if version not in before_parts:
        return []
    problems = []
    for index, step in steps.items():
        if isinstance(step.get("message"), list):
            problems.append(
                f"$.steps[{index}].message: content parts need ATIF-v1.6 or later "
                f"(the document says {version})"
            )
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        for r_index, result in enumerate(results if isinstance(results, list) else []):
            if isinstance(result, dict) and isinstance(result.get("content"), list):
                problems.append(
                    f"$.steps[{index}].observation.results[{r_index}].content: content "
                    f"parts need ATIF-v1.6 or later (the document says {version})"
                )
    return problems


def check_steps(steps: dict[int, dict[str, Any]]) -> list[str]:
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


def check_tool_call_refs(steps: dict[int, dict[str, Any]]) -> list[str]:
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


def check_final_metrics(
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
