"""ATIF v1.5 recorder, schema and validator."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from helios import atomic_write
from helios.trajectories import (
    ATIF_VERSION,
    StepMetrics,
    ToolCallRecord,
    TrajectoryRecorder,
    atif,
    load_schema,
    validate_trajectory,
)

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command in the task container.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def build_recorder() -> TrajectoryRecorder:
    """A realistic run: system, user, two parallel tool calls, a reasoning turn, an answer."""
    rec = TrajectoryRecorder(
        session_id="trial-0001",
        agent_name="helios-react",
        agent_version="0.1.0",
        model_name="gpt-4.1-mini",
        tool_definitions=[BASH_TOOL],
    )
    rec.add_system("You are a careful engineer working in /app.")
    rec.add_user("Which Python version is installed, and how big is /app?")
    step = rec.add_agent(
        message="I'll check both at once.",
        tool_calls=[
            ToolCallRecord("call_py", "bash", {"command": "python3 --version"}),
            ToolCallRecord("call_du", "bash", {"command": "du -sh /app"}),
        ],
        metrics=StepMetrics(
            prompt_tokens=900,
            completion_tokens=60,
            cached_tokens=512,
            cost_usd=0.0012,
            reasoning_tokens=24,
        ),
    )
    # Results arrive out of order, as parallel tools finish.
    rec.add_observation(step, "call_du", "4.0K\t/app")
    rec.add_observation(step, "call_py", "Python 3.12.3 — ok")
    rec.add_agent(
        message="",
        reasoning="Both results are in; /app is nearly empty.",
        metrics=StepMetrics(
            prompt_tokens=1000, completion_tokens=30, cached_tokens=900, cost_usd=0.0004
        ),
        model_name="o4-mini",
    )
    rec.add_agent(
        message="Python 3.12.3 is installed and /app holds 4 KiB.",
        metrics=StepMetrics(prompt_tokens=1040, completion_tokens=20, cost_usd=0.0003),
    )
    return rec


@pytest.fixture
def valid_doc() -> dict[str, Any]:
    doc = build_recorder().to_dict()
    # Baseline for the negative tests: each mutation alone must cause the failure.
    assert validate_trajectory(doc) == []
    return copy.deepcopy(doc)


def test_realistic_trajectory_writes_reloads_and_validates(tmp_path: Path) -> None:
    rec = build_recorder()
    path = tmp_path / "agent" / "trajectory.json"
    rec.write(path)
    doc = json.loads(path.read_text(encoding="utf-8"))

    assert validate_trajectory(doc) == []
    assert doc == rec.to_dict()
    assert doc["schema_version"] == ATIF_VERSION == "ATIF-v1.5"
    assert doc["agent"] == {
        "name": "helios-react",
        "version": "0.1.0",
        "model_name": "gpt-4.1-mini",
        "tool_definitions": [BASH_TOOL],
    }
    steps = doc["steps"]
    assert [s["step_id"] for s in steps] == [1, 2, 3, 4, 5]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent", "agent"]
    for step in steps[:2]:
        assert set(step) == {"step_id", "timestamp", "source", "message"}
    calls = steps[2]["tool_calls"]
    assert [c["tool_call_id"] for c in calls] == ["call_py", "call_du"]
    assert calls[0] == {
        "tool_call_id": "call_py",
        "function_name": "bash",
        "arguments": {"command": "python3 --version"},
    }
    assert steps[2]["observation"] == {
        "results": [
            {"source_call_id": "call_du", "content": "4.0K\t/app"},
            {"source_call_id": "call_py", "content": "Python 3.12.3 — ok"},
        ]
    }
    assert steps[2]["metrics"]["extra"] == {"reasoning_tokens": 24}
    assert steps[2]["model_name"] == "gpt-4.1-mini"
    assert steps[3]["model_name"] == "o4-mini"
    assert steps[3]["reasoning_content"] == "Both results are in; /app is nearly empty."
    assert "tool_calls" not in steps[3] and "observation" not in steps[4]
    final = doc["final_metrics"]
    assert final["total_prompt_tokens"] == 2940
    assert final["total_completion_tokens"] == 110
    assert final["total_cached_tokens"] == 1412
    assert final["total_cost_usd"] == pytest.approx(0.0019)
    assert final["total_steps"] == 5
    assert final["extra"] == {"total_reasoning_tokens": 24}


def test_timestamps_are_utc_iso8601_in_order() -> None:
    before = datetime.now(UTC)
    doc = build_recorder().to_dict()
    after = datetime.now(UTC)
    stamps = [datetime.fromisoformat(s["timestamp"]) for s in doc["steps"]]
    assert all(s.utcoffset() is not None and s.utcoffset().total_seconds() == 0 for s in stamps)
    assert stamps == sorted(stamps)
    # Millisecond precision truncates, so allow the first stamp to read just before `before`.
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= stamps[0]
    assert stamps[-1] <= after


def test_write_is_atomic_pretty_and_keeps_unicode(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text("stale", encoding="utf-8")
    build_recorder().write(path)
    text = path.read_text(encoding="utf-8")
    assert "Python 3.12.3 — ok" in text  # ensure_ascii=False: not "\u2014"
    assert text.startswith('{\n  "schema_version": "ATIF-v1.5",')
    assert [p.name for p in tmp_path.iterdir()] == ["trajectory.json"]  # no temp file left
    assert path.stat().st_mode & 0o777 == 0o644


def test_failed_write_leaves_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text("previous", encoding="utf-8")

    def boom(src: str, dst: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic_write.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        build_recorder().write(path)
    assert path.read_text(encoding="utf-8") == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["trajectory.json"]


def test_recording_a_turn_neither_serialises_nor_validates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("per-turn work must not serialise or validate")

    monkeypatch.setattr(atif.json, "dumps", forbidden)
    monkeypatch.setattr(atif, "_validator", forbidden)
    rec = build_recorder()  # every add_* call runs here
    assert rec.to_dict()["final_metrics"]["total_steps"] == 5


def test_no_model_name_is_omitted_not_null() -> None:
    rec = TrajectoryRecorder(
        session_id="s", agent_name="a", agent_version="1", model_name=None, tool_definitions=[]
    )
    rec.add_user("hi")
    rec.add_agent(message="hello")
    doc = rec.to_dict()
    assert "model_name" not in doc["agent"] and "model_name" not in doc["steps"][1]
    assert "metrics" not in doc["steps"][1]
    assert doc["final_metrics"]["total_prompt_tokens"] == 0
    assert validate_trajectory(doc) == []


def test_recorder_rejects_bad_observations_and_duplicate_call_ids() -> None:
    rec = build_recorder()
    with pytest.raises(ValueError, match="not an agent step"):
        rec.add_observation(2, "call_py", "x")
    with pytest.raises(ValueError, match="no tool call with id 'call_zz'"):
        rec.add_observation(3, "call_zz", "x")
    with pytest.raises(ValueError, match="no step 9"):
        rec.add_observation(9, "call_py", "x")
    call = ToolCallRecord("dup", "bash", {})
    with pytest.raises(ValueError, match="duplicate tool_call_id"):
        rec.add_agent(message="", tool_calls=[call, call])
    assert len(rec.to_dict()["steps"]) == 5  # the rejected turn was not recorded


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation that sets doc[a][b]... (ints index lists) to `value`."""
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]

    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return mutate


def _gap(doc: dict[str, Any]) -> None:
    for step in doc["steps"][2:]:
        step["step_id"] += 1


def _drop_agent_name(doc: dict[str, Any]) -> None:
    del doc["agent"]["name"]


def _duplicate_call(doc: dict[str, Any]) -> None:
    doc["steps"][2]["tool_calls"].append(dict(doc["steps"][2]["tool_calls"][0]))


INVALID = {
    "wrong schema_version": (_set("schema_version", "ATIF-v2.0"), "$.schema_version: 'ATIF-v2.0'"),
    "step_id gap": (_gap, "$.steps[2].step_id: expected 3"),
    "source bot": (_set("steps.1.source", "bot"), "$.steps[1].source: 'bot' is not one of"),
    "unknown source_call_id": (
        _set("steps.2.observation.results.0.source_call_id", "call_nope"),
        "$.steps[2].observation.results[0].source_call_id: 'call_nope' is not the tool_call_id",
    ),
    "missing agent.name": (_drop_agent_name, "$.agent: 'name' is a required property"),
    "prompt total mismatch": (
        _set("final_metrics.total_prompt_tokens", 2941),
        "$.final_metrics.total_prompt_tokens: 2941 but the steps' prompt_tokens values sum to 2940",
    ),
    "cost total mismatch": (_set("final_metrics.total_cost_usd", 0.5), "total_cost_usd: 0.5"),
    "total_steps mismatch": (_set("final_metrics.total_steps", 4), "total_steps: 4"),
    "agent-only field on user step": (
        _set("steps.1.reasoning_content", "hmm"),
        "$.steps[1].reasoning_content: 'reasoning_content' is only allowed on steps whose "
        "source is 'agent'",
    ),
    "tool_calls on system step": (_set("steps.0.tool_calls", []), "$.steps[0].tool_calls: "),
    "bad timestamp": (_set("steps.0.timestamp", "yesterday"), "'yesterday' is not an ISO 8601"),
    "duplicate tool_call_id": (_duplicate_call, "duplicate tool_call_id 'call_py'"),
    "unknown root field": (_set("trajectory", []), "Additional properties are not allowed"),
    "arguments not an object": (
        _set("steps.2.tool_calls.0.arguments", "ls"),
        "$.steps[2].tool_calls[0].arguments: 'ls' is not of type 'object'",
    ),
    "message missing": (_set("steps.4.message", None), "$.steps[4].message: None is not of type"),
    "tool definition not OpenAI format": (
        _set("agent.tool_definitions.0", {"name": "bash"}),
        "$.agent.tool_definitions[0]: 'type' is a required property",
    ),
    "negative tokens": (_set("steps.4.metrics.completion_tokens", -1), "-1 is less than"),
}


@pytest.mark.parametrize("case", list(INVALID), ids=list(INVALID))
def test_invalid_documents_are_reported(valid_doc: dict[str, Any], case: str) -> None:
    mutate, expected = INVALID[case]
    mutate(valid_doc)
    problems = validate_trajectory(valid_doc)
    assert any(expected in p for p in problems), problems


def test_total_steps_may_differ_when_notes_explain(valid_doc: dict[str, Any]) -> None:
    valid_doc["final_metrics"]["total_steps"] = 7
    valid_doc["notes"] = "Two steps were dropped when the context was summarised."
    assert validate_trajectory(valid_doc) == []


def test_hand_written_document_from_another_producer_is_valid() -> None:
    # Exercises optional spec fields the recorder never emits, including explicit nulls.
    doc: dict[str, Any] = {
        "schema_version": "ATIF-v1.4",
        "session_id": "other-run",
        "agent": {"name": "other-agent", "version": "2.3.1", "model_name": None, "extra": {}},
        "steps": [
            {
                "step_id": 1,
                "source": "user",
                "message": "Summarise the repo.",
                "model_name": None,
                "extra": {"channel": "cli"},
            },
            {
                "step_id": 2,
                "timestamp": "2025-10-11T10:30:02+02:00",
                "source": "agent",
                "message": "Delegating.",
                "reasoning_effort": 0.7,
                "tool_calls": [
                    {"tool_call_id": "c1", "function_name": "delegate", "arguments": {}}
                ],
                "observation": {
                    "results": [
                        {
                            "source_call_id": "c1",
                            "subagent_trajectory_ref": [
                                {"session_id": "sub-1", "trajectory_path": "sub-1.json"}
                            ],
                        },
                        {"source_call_id": None, "content": "context trimmed"},
                    ]
                },
                "metrics": {
                    "prompt_tokens": 10,
                    "completion_tokens": 3,
                    "completion_token_ids": [1, 2, 3],
                    "logprobs": [-0.1, -0.2, -0.3],
                    "extra": {"cache_creation_input_tokens": 5},
                },
                "is_copied_context": False,
            },
            {
                "step_id": 3,
                "source": "system",
                "message": "Checkpoint saved.",
                "observation": {"results": [{"content": "checkpoint-7"}]},
            },
        ],
        "final_metrics": {
            "total_prompt_tokens": 10,
            "total_completion_tokens": 3,
            "total_steps": 3,
        },
        "continued_trajectory_ref": None,
    }
    assert validate_trajectory(doc) == []


def test_non_object_input_is_reported_not_crashing() -> None:
    assert validate_trajectory([])  # type: ignore[arg-type]
    problems = validate_trajectory({"steps": ["nope", {"step_id": 3}]})
    assert any("$: 'schema_version' is a required property" in p for p in problems)
    assert any("$.steps[0]: 'nope' is not of type 'object'" in p for p in problems)
    # Semantic checks skip the malformed step but keep real indexes.
    assert any("$.steps[1].step_id: expected 2" in p and "got 3" in p for p in problems)


def test_schema_ships_in_package_and_is_valid_draft_2020_12() -> None:
    shipped = resources.files("helios.trajectories").joinpath("atif_schema.json")
    schema = json.loads(shipped.read_text(encoding="utf-8"))
    assert schema == load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert ATIF_VERSION in schema["properties"]["schema_version"]["enum"]


def test_missing_jsonschema_gives_actionable_import_error(
    monkeypatch: pytest.MonkeyPatch, valid_doc: dict[str, Any]
) -> None:
    atif._validator.cache_clear()
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # makes `import jsonschema` fail
    try:
        with pytest.raises(ImportError, match=r"helios-harness\[validate\]"):
            validate_trajectory(valid_doc)
    finally:
        atif._validator.cache_clear()


def test_the_extra_named_for_jsonschema_installs_it() -> None:
    """The ImportError above sends users to the `validate` extra: it must exist."""
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert any(req.startswith("jsonschema") for req in extras["validate"])


def test_a_trajectory_of_an_agent_stopped_early_says_it_is_partial() -> None:
    from helios.models.base import Message
    from helios.trajectories.atif_writer import conversation_to_atif

    meta: dict[str, Any] = {"session_id": "s", "agent_name": "a", "agent_version": "1",
                            "model_name": "m", "tool_definitions": []}  # fmt: skip
    talk = [Message("user", "hi"), Message("assistant", "working")]
    whole = conversation_to_atif(talk, **meta)
    assert "notes" not in whole and "extra" not in whole
    partial = conversation_to_atif(talk, partial="AgentTimeout", **meta)
    assert validate_trajectory(partial) == []
    assert partial["extra"] == {"partial": True, "ended": "AgentTimeout"}
    assert partial["notes"].startswith("partial: the agent stopped early (AgentTimeout)")
