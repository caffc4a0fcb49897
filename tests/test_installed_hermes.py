"""The `hermes` installed agent (helios.agents.installed.hermes): the real Hermes
agent, installed from PyPI once into the host's agent cache, solving the example
task against the scripted server's Chat Completions on loopback; its session
snapshot and usage report read into messages and usage. The install carries its own
Python: the task image (Debian slim) has none."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.agents.installed.hermes import HermesAgent, config_yaml, session_messages
from helios.agents.registry import create_agent
from helios.errors import ConfigError
from helios.models.routing import ModelSpec
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage
from tests.agent_installs import install

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
MODEL = "openai/gpt-scripted"
KEY = "sk-hermes-helios-test-key-0123456789"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"
#: what the agent's commands see: none of the variables that ran Hermes's Python,
#: and no python3 of the image's (Debian slim has none)
PROBE = WRITE + ' && echo "vars=[$PYTHONHOME$PYTHONPATH$LD_LIBRARY_PATH]" && command -v python3'
#: Hermes's shell tool: `terminal` with `command`
SCRIPT = {"scenarios": [{"match": "*", "turns": [
    {"reasoning": "The file is one printf away.",
     "tool_calls": [{"name": "terminal", "arguments": {"command": PROBE}}]},
    {"text": "Done."}]}]}  # fmt: skip


@pytest.fixture(scope="session")
def hermes_install() -> Path:
    """Hermes from PyPI in the host's agent cache: installed once (by
    tests/agent_installs.py ahead of the suite, else here), then found."""
    return install(HermesAgent)[0]


def _task(tmp_path: Path) -> Path:
    """hello-file as it is, without network: the agent reaches the server on the
    host's loopback through the trial's egress proxy, and nothing else."""
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLE, task)
    return task


def _solve(task: Path, tmp_path: Path, provider: str) -> tuple[Path, dict[str, Any], Any]:
    with MockLLMServer(script=SCRIPT) as server:
        runner = ParallelRunner(
            [task], output_dir=str(tmp_path / "out"), model=MODEL, agent="hermes",
            base_url=server.openai_base_url, api_key=KEY, provider=provider,
            show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
        stats = server.stats
    (result_file,) = batch.output_dir.glob("*/result.json")
    return result_file.parent, json.loads(result_file.read_text()), stats


def _check_solved(
    trial: Path, result: dict[str, Any], stats: dict[str, Any], *, python3: bool
) -> None:
    assert result["reward"] == 1.0, result.get("error")
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert validate_trajectory(trajectory) == []
    assert trajectory["agent"]["version"] == HermesAgent.default_version
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert [(c["function_name"], c["arguments"]) for c in calls] == [
        ("terminal", {"command": PROBE})
    ]
    seen = json.loads(trajectory["steps"][1]["observation"]["results"][0]["content"])
    assert "vars=[]" in seen["output"]
    assert (seen["exit_code"] == 0) is python3, seen  # the image's python3, or none
    steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert steps[0]["reasoning_content"] == "The file is one printf away."
    assert steps[-1]["message"] == "Done."
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0
    assert result["usage"]["calls"] == 2
    # the two model calls went to the scripted server's Chat Completions
    assert stats["per_path"].get("/v1/chat/completions") == 2
    for path in trial.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


# -- the log to ATIF ---------------------------------------------------------------
SESSION = {"session_id": "s1", "messages": [
    {"role": "user", "content": "write hello"},
    {"role": "assistant", "content": "", "reasoning_content": "Think.", "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "terminal", "arguments": "{\"command\": \"false\"}"}}]},
    {"role": "tool", "tool_call_id": "call_0",
     "content": "{\"output\": \"\", \"exit_code\": 1, \"error\": null}"},
    {"role": "assistant", "content": "Done."},
]}  # fmt: skip
USAGE = {"input_tokens": 900, "output_tokens": 21, "cache_read_tokens": 100,
         "reasoning_tokens": 3, "api_calls": 2, "session_id": "s1"}  # fmt: skip


def test_the_session_becomes_calls_results_and_the_runs_usage() -> None:
    usage = Usage()
    log = "\n".join([json.dumps({"type": "usage", "usage": USAGE, "exit_code": 0}),
                     json.dumps({"type": "session", "session": SESSION}), "noise"])  # fmt: skip
    messages = session_messages(log, usage)
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[0].reasoning == "Think."
    assert [(c.id, c.name, c.arguments) for c in messages[0].tool_calls] == [
        ("call_0", "terminal", {"command": "false"})
    ]
    assert messages[1].tool_call_id == "call_0" and messages[1].is_error
    assert messages[2].content == "Done." and messages[2].usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens,
            usage.reasoning_tokens, usage.calls) == (900, 100, 21, 3, 2)  # fmt: skip


def test_the_config_names_the_endpoint_and_the_context_length() -> None:
    spec = ModelSpec("openai", "gpt-x", "openai", "http://127.0.0.1:9/v1", api_key=KEY)
    text = config_yaml(spec, key_variable=HermesAgent.key_variable)
    config = json.loads(text)  # JSON, which YAML reads
    assert KEY not in text
    assert config["model"] == {"default": "gpt-x", "provider": "custom:helios",
                               "context_length": 128_000}  # fmt: skip
    assert config["providers"]["helios"]["base_url"] == "http://127.0.0.1:9/v1"
    assert config["providers"]["helios"]["key_env"] == HermesAgent.key_variable
    assert config["sessions"] == {"write_json_snapshots": True}
    assert create_agent("hermes").identity()["package"] == "hermes-agent==0.19.0"
    assert HermesAgent().endpoint(replace(spec, base_url=None)) == "https://api.openai.com/v1"
    with pytest.raises(ConfigError, match="Chat Completions"):
        HermesAgent().environment(ModelSpec("anthropic", "claude", "anthropic", None))


# -- the real client ------------------------------------------------------------------
@pytest.mark.usefixtures("need_bwrap")
def test_hermes_solves_a_task_on_local(hermes_install: Path, tmp_path: Path) -> None:
    # the local sandbox sees the host's /usr, with a python3 of its own
    _check_solved(*_solve(_task(tmp_path), tmp_path, "local"), python3=True)


@pytest.mark.slow  # the first run bakes 300 MB in 13,000 files into a derived image
@pytest.mark.usefixtures("need_docker")
def test_hermes_solves_a_task_on_docker_in_an_image_without_python(
    hermes_install: Path, tmp_path: Path
) -> None:
    _check_solved(*_solve(_task(tmp_path), tmp_path, "docker"), python3=False)


@pytest.mark.slow  # a 30 s agent timeout: their start takes 3-12 s here (LiteLLM's import)
@pytest.mark.usefixtures("need_bwrap")
def test_hermes_and_mini_swe_agent_stopped_at_the_timeout_keep_their_steps(
    hermes_install: Path, tmp_path: Path
) -> None:
    """Each one's second command hangs past the agent timeout (both in one batch, at
    once): the trial keeps the agent's raw log and the steps its structured log holds
    (Hermes's session snapshot, mini-swe-agent's trajectory file, read from the
    sandbox once it is stopped) as a partial ATIF trajectory, and is still scored."""
    from helios.agents.installed.mini_swe_agent import PYTHON, MiniSweAgent

    from .cli_inprocess import helios_inprocess

    if not Path(f"/usr/bin/python{PYTHON}").exists():  # the local sandbox shows the host's /usr
        pytest.skip(f"no /usr/bin/python{PYTHON} (Helios's Python) for mini-swe-agent")
    install(MiniSweAgent)
    task = _task(tmp_path)
    toml = task / "task.toml"
    # 60 s: under load mini-swe-agent had not run its first command at 30 s
    toml.write_text(toml.read_text().replace("timeout_sec = 120.0", "timeout_sec = 60.0", 1))

    def turns(tool: str) -> list[dict[str, Any]]:
        # hangs past every command timeout of the agent's own (mini-swe-agent ends a
        # command itself, then asks again): only Helios's agent timeout ends them
        return [{"tool_calls": [{"name": tool, "arguments": {"command": c}}]}
                for c in (WRITE, *["sleep 600"] * 30)]  # fmt: skip

    # Hermes's system prompt names it; mini-swe-agent's calls `bash`
    script = {"scenarios": [{"match": "You are Hermes Agent", "turns": turns("terminal")},
                            {"match": "*", "turns": turns("bash")}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        done = helios_inprocess(
            "batch", str(task.parent), "--provider", "local", "-a", "hermes,mini-swe-agent",
            "-m", MODEL, "--base-url", server.openai_base_url, "--api-key", KEY, "-n", "2",
            "-o", "out", "-q", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = {}
    for path in (tmp_path / "out").glob("*/*/result.json"):
        result = json.loads(path.read_text())
        results[result["agent"]] = (path.parent, result)
    assert sorted(results) == ["hermes", "mini-swe-agent"]
    for agent, (trial, result) in results.items():
        assert result["reward"] == 1.0, (agent, result.get("error"))  # the first command's file
        assert "timeout" in json.dumps(result.get("agent_error")).lower(), agent
        assert "timed out" in (trial / "agent" / f"{agent}.stderr").read_text()
        trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
        assert validate_trajectory(trajectory) == []
        assert trajectory["extra"] == {"partial": True, "ended": "AgentTimeout"}
        assert trajectory["notes"].startswith("partial")
        steps = [s for s in trajectory["steps"] if s.get("tool_calls")]
        assert steps[0]["tool_calls"][0]["arguments"] == {"command": WRITE}, (agent, steps)
        assert steps[0]["observation"]["results"], (agent, steps[0])
    hermes_log = (results["hermes"][0] / "agent" / "hermes.log").read_text()
    assert '"type": "session"' in hermes_log
    mini = json.loads((results["mini-swe-agent"][0] / "agent" / "trajectory.json").read_text())
    assert mini["final_metrics"]["total_prompt_tokens"] > 0
