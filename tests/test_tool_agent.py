"""The built-in tool agent end to end: scripted model servers on 127.0.0.1, real sandboxes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.models.retry import RetryPolicy
from helios.tasks.summary import BatchResult
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories import validate_trajectory

from .conftest import TaskMaker

KEY = "sk-helios-test-4c0ffee5ecret"
SCRIPT_PATH = Path(__file__).parent / "fixtures" / "scripted_examples.json"
SCRIPT = json.loads(SCRIPT_PATH.read_text())
FAST_RETRIES = RetryPolicy(max_attempts=12, base_delay=0.05, max_delay=0.5)


def _run(
    server: MockLLMServer, tasks: Path, out: Path, api: str = "openai", **kwargs: Any
) -> BatchResult:
    if api == "anthropic":
        model, url = "anthropic/claude-scripted", server.anthropic_base_url
    else:
        model, url = "openai-compatible/scripted", server.openai_base_url
    kwargs.setdefault("provider", "local")
    kwargs.setdefault("n_concurrent", 4)
    kwargs.setdefault("retry_policy", FAST_RETRIES)
    runner = ParallelRunner(
        tasks, model=model, base_url=url, api_key=KEY, output_dir=out, show_progress=False, **kwargs
    )
    return asyncio.run(runner.run())


def _scenario_for(instruction: str) -> dict[str, Any]:
    return next(s for s in SCRIPT["scenarios"] if s["match"] in instruction)


def _check_trajectories(batch: BatchResult) -> None:
    assert batch.output_dir is not None
    for result in batch.results:
        folder = batch.output_dir / result.folder
        doc = json.loads((folder / "agent" / "trajectory.json").read_text())
        assert validate_trajectory(doc) == [], result.name
        instruction = next(s["message"] for s in doc["steps"] if s["source"] == "user")
        expected = _scenario_for(instruction)["turns"]
        agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
        assert len(agent_steps) == len(expected), result.name
        for step, turn in zip(agent_steps, expected, strict=True):
            calls = [(c["function_name"], c["arguments"]) for c in step.get("tool_calls") or []]
            assert calls == [(c["name"], c["arguments"]) for c in turn["tool_calls"]]
            results = (step.get("observation") or {}).get("results", [])
            assert len(results) == len(calls)
            assert step["metrics"]["completion_tokens"] > 0
        assert doc["agent"]["model_name"].endswith("scripted")
        assert {t["function"]["name"] for t in doc["agent"]["tool_definitions"]} == {
            "bash",
            "editor",
            "submit",
        }


def _assert_no_key(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


@pytest.mark.usefixtures("need_bwrap")
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_scripted_model_solves_examples_locally(
    api: str, examples_copy: Path, tmp_path: Path
) -> None:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        batch = _run(server, examples_copy, tmp_path / "out", api=api)
    assert batch.passed == batch.total_tasks >= 6, [r.error for r in batch.results]
    assert all(r.reward == 1.0 for r in batch.results)
    _check_trajectories(batch)
    _assert_no_key(tmp_path / "out")
    # the script's task scenarios (the others answer examples/prompts for helios generate)
    tasks = [s for s in SCRIPT["scenarios"] if s.get("_door") != "generate"]
    assert batch.usage.calls == sum(len(s["turns"]) for s in tasks)


@pytest.mark.usefixtures("need_docker")
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_scripted_model_solves_examples_on_docker(
    api: str, examples_copy: Path, tmp_path: Path
) -> None:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        batch = _run(server, examples_copy, tmp_path / "out", api=api, provider="docker")
    assert batch.passed == batch.total_tasks >= 6, [r.error for r in batch.results]
    _check_trajectories(batch)
    _assert_no_key(tmp_path / "out")


@pytest.mark.usefixtures("need_bwrap")
def test_rate_limits_and_faults_are_retried(examples_copy: Path, tmp_path: Path) -> None:
    with MockLLMServer(script=SCRIPT, rate_429=0.3, retry_after=1, seed=7) as server:
        batch = _run(server, examples_copy, tmp_path / "a", n_concurrent=8)
        injected = server.stats["injected_429"]
    assert batch.passed == batch.total_tasks and batch.errored == 0
    assert injected > 0 and batch.usage.retries == injected
    summary = json.loads((batch.output_dir / "batch_summary.json").read_text())  # type: ignore[operator]
    assert summary["usage"]["retries"] == injected
    with MockLLMServer(script=SCRIPT, rate_500=0.15, drop=0.15, malformed=0.05, seed=3) as server:
        noisy = _run(server, examples_copy, tmp_path / "b", n_concurrent=8)
        faults = server.stats["injected_500"] + server.stats["dropped"] + server.stats["malformed"]
    assert noisy.passed == noisy.total_tasks and noisy.errored == 0
    assert faults > 0 and noisy.usage.retries == faults


@pytest.mark.usefixtures("need_bwrap")
def test_auth_errors_are_not_retried(examples_copy: Path, tmp_path: Path) -> None:
    with MockLLMServer(script=SCRIPT, require_key="the-right-key-xyz") as server:
        batch = _run(server, examples_copy / "hello-file", tmp_path / "out")
        assert server.stats["requests"] == 1
    (result,) = batch.results
    assert result.status == "error" and (result.error or "").startswith("AuthError")
    _assert_no_key(tmp_path / "out")


def _probe(
    make_task: TaskMaker,
    tmp_path: Path,
    turns: list[dict[str, Any]],
    api: str = "openai",
    **kwargs: Any,
) -> tuple[BatchResult, MockLLMServer, dict[str, Any]]:
    make_task(
        "probe",
        root=tmp_path / "tasks",
        instruction="PROBE: create /app/done\n",
        test="if test -e /app/done; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
    )
    script = {"scenarios": [{"match": "PROBE", "turns": turns}]}
    with MockLLMServer(script=script, strict_history=False) as server:
        batch = _run(server, tmp_path / "tasks", tmp_path / "out", api=api, **kwargs)
    (result,) = batch.results
    record = json.loads((batch.output_dir / result.folder / "result.json").read_text())  # type: ignore[operator]
    return batch, server, record


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


SUBMIT = {"tool_calls": [{"name": "submit", "arguments": {}}]}


@pytest.mark.usefixtures("need_bwrap")
def test_bad_replies_go_back_to_the_model_and_it_recovers(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    turns = [
        {"tool_calls": [{"name": "teleport", "arguments": {"to": "mars"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "x"}, "bad_arguments": True}]},
        {"tool_calls": [_bash("touch /app/done")]},
        SUBMIT,
    ]
    batch, server, record = _probe(make_task, tmp_path, turns)
    assert batch.passed == 1 and record["agent_error"] is None
    sent = json.dumps([r.body for r in server.requests])
    assert "no tool named 'teleport'" in sent and "not valid JSON" in sent


@pytest.mark.usefixtures("need_bwrap")
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_repeated_invalid_replies_end_as_partial(
    api: str, make_task: TaskMaker, tmp_path: Path
) -> None:
    turns = [
        {"tool_calls": [_bash("touch /app/done")]},
        {"empty": True},
        {"tool_calls": [{"name": "nope", "arguments": {}}]},
        {"empty": True},
    ]
    batch, server, record = _probe(make_task, tmp_path, turns, api=api)
    assert record["agent_error"]["type"] == "InvalidReplies"
    # partial, but still verified: the file was made before the bad replies
    assert batch.passed == 1 and record["status"] == "passed"
    assert server.stats["requests"] == 4


@pytest.mark.usefixtures("need_bwrap")
def test_context_overflow_and_max_turns_end_as_partial(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    _batch, _, record = _probe(make_task, tmp_path, [{"context_overflow": True}])
    assert record["agent_error"]["type"] == "ContextWindowExceeded"
    assert record["status"] == "failed" and record["error"] is None
    turns = [{"tool_calls": [_bash("echo working")]}] * 5
    _, server, record = _probe(
        make_task, tmp_path / "again", turns, agent_settings={"max_turns": 2}
    )
    assert record["agent_error"]["type"] == "MaxTurns"
    assert server.stats["requests"] == 2


@pytest.mark.usefixtures("need_bwrap")
def test_system_prompt_override_and_trial_identity(make_task: TaskMaker, tmp_path: Path) -> None:
    turns = [{"tool_calls": [_bash("touch /app/done")]}, SUBMIT]
    _, server, record = _probe(
        make_task, tmp_path, turns, agent_settings={"system_prompt": "You are PROBE-BOT."}
    )
    first = server.requests[0].body["messages"][0]
    assert first == {"role": "system", "content": "You are PROBE-BOT."}
    _, _, other = _probe(make_task, tmp_path / "b", turns)
    assert other["trial_id"] != record["trial_id"]


@pytest.mark.usefixtures("need_bwrap")
def test_rejected_key_stops_the_batch_early(examples_copy: Path, tmp_path: Path) -> None:
    with MockLLMServer(script=SCRIPT, require_key="the-right-key-xyz") as server:
        batch = _run(server, examples_copy, tmp_path / "out", n_concurrent=2)
        requests = server.stats["requests"]
    assert batch.aborted is not None and batch.aborted.startswith("AuthError")
    # only the trials already in flight ran; the rest were never started
    assert requests <= 3 and batch.total_tasks == requests
    summary = json.loads((batch.output_dir / "batch_summary.json").read_text())  # type: ignore[operator]
    assert summary["aborted"].startswith("AuthError")
    assert summary["not_run"] == 8 - requests
