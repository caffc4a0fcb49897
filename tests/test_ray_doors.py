"""`--executor ray` through `helios run` and `helios toolcalls` (issue 33), without a
cluster: what is refused before anything runs, in one line, and what the tool-call door
shares with the whole run. The runs on the three-node cluster are in
tests/test_ray_executor.py (its fixture)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from helios.cli.app import app

from .conftest import TaskMaker

HINT = "--executor ray needs Ray, which is not installed: pip install 'helios-harness[ray]'"

TOOLCALLS = """
synthesizer: null
agent: {name: model, params: {model: openai-compatible/scripted, base_url: "http://127.0.0.1:9/v1",
        api_key: sk-unused, tools: [{name: book}]}}
tests:
  - {id: one, prompt: "book now", expect: [{name: book}]}
"""


def _invoke(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def _doors(tmp_path: Path, make_task: TaskMaker) -> dict[str, list[str]]:
    """The command line of each door, up to its executor flags."""
    make_task("t0")
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(TOOLCALLS))
    out = str(tmp_path / "out")
    return {
        "run": ["run", str(tmp_path / "tasks" / "t0"), "--provider", "local", "--agent",
                "oracle", "-q", "-o", out],
        "toolcalls": ["toolcalls", "--config", str(config), "-o", out],
    }  # fmt: skip


@pytest.mark.parametrize("door", ["run", "toolcalls"])
def test_without_ray_installed_each_door_says_how_to_get_it(
    door: str, tmp_path: Path, make_task: TaskMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    code, lines = _invoke(*_doors(tmp_path, make_task)[door], "--executor", "ray")
    assert code == 2, lines
    assert len(lines) == 1 and HINT in lines[0], lines
    assert not (tmp_path / "out").exists()  # refused before a run folder


@pytest.mark.parametrize("door", ["run", "toolcalls"])
def test_an_unreachable_cluster_is_one_line_for_each_door(
    door: str, tmp_path: Path, make_task: TaskMaker, closed_port: int
) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{closed_port}"
    code, lines = _invoke(*_doors(tmp_path, make_task)[door], "--executor", "ray",
                          "--ray-address", address)  # fmt: skip
    assert code == 2, lines
    assert [line for line in lines if "error" in line.lower()] == lines[-1:], lines
    assert f"cannot reach the Ray cluster at {address}" in lines[-1]
    assert not any("Traceback" in line for line in lines)


@pytest.mark.parametrize("door", ["run", "toolcalls"])
def test_a_ray_address_without_the_ray_executor_is_one_line(
    door: str, tmp_path: Path, make_task: TaskMaker
) -> None:
    code, lines = _invoke(*_doors(tmp_path, make_task)[door], "--ray-address", "auto")
    assert code == 2, lines
    assert len(lines) == 1 and "--ray-address needs --executor ray" in lines[0], lines


def test_helios_run_interactive_is_refused_on_the_ray_executor(
    tmp_path: Path, make_task: TaskMaker
) -> None:
    pytest.importorskip("ray")
    code, lines = _invoke(*_doors(tmp_path, make_task)["run"], "-i", "--executor", "ray")
    assert code == 2, lines
    assert len(lines) == 1 and "not with --executor ray" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_both_doors_list_the_executor_options_in_their_help() -> None:
    for door in ("run", "toolcalls"):
        result = CliRunner().invoke(app, [door, "--help"], terminal_width=200)
        assert "--executor" in result.output and "--ray-address" in result.output, door


class _Box:
    """A stand-in for the run's `LimitsBox` actor: what it is asked, by model or endpoint."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        box = self

        class _Method:
            def __init__(self, name: str) -> None:
                self.name = name

            def remote(self, *args: Any) -> Any:
                if self.name != "acquire":
                    return None  # a release is sent, never awaited
                box.asked.append(args[0])

                async def lease() -> int:
                    return 1

                return lease()

        self.acquire, self.release = _Method("acquire"), _Method("release")


def test_the_tool_call_doors_endpoints_share_the_runs_limiter() -> None:
    """On a cluster, each run's copy of the door asks the run's one limiter of its agent
    and synthesizer endpoints (`endpoint_limits` makes them, `share_endpoints` points a
    copy's calls at them), as a model's calls ask the run's limiter of that model."""
    import asyncio

    from helios.engine.calls import EndpointCalls
    from helios.engine.ray_limits import endpoint_limits, share_endpoints
    from helios.engine.shared_limits import SharedLimiter
    from helios.models.retry import RetryPolicy
    from helios.toolcalls.door import ToolCallDoor
    from helios.toolcalls.evaluators.exact import ExactEvaluator

    def calls() -> EndpointCalls:
        return EndpointCalls(policy=RetryPolicy(max_attempts=1), limit=6, timeout=None)

    door = ToolCallDoor(synthesizer=None, agent=object(), evaluator=ExactEvaluator(),
                        text_mode=False, agent_calls=calls(),
                        synthesizer_calls=calls())  # fmt: skip
    limits = endpoint_limits(door)
    assert sorted(limits) == ["endpoint:agent", "endpoint:synthesizer"]
    assert limits["endpoint:agent"]["initial"] == limits["endpoint:agent"]["maximum"] == 6
    box = _Box()
    share_endpoints(door, box)
    assert door.agent_calls is not None and isinstance(door.agent_calls.limiter, SharedLimiter)

    async def one_call() -> str:
        assert door.agent_calls is not None
        value, _ = await door.agent_calls.call(lambda: asyncio.sleep(0, "answered"))
        return value

    assert asyncio.run(one_call()) == "answered"
    assert box.asked == ["endpoint:agent"]
    # a door without endpoints of its own (text mode) has nothing to share
    text = ToolCallDoor(synthesizer=None, agent=object(), evaluator=ExactEvaluator(),
                        text_mode=True, agent_calls=None, synthesizer_calls=None)  # fmt: skip
    assert endpoint_limits(text) == {}


def test_the_model_agent_calls_through_the_services_the_engine_hands_its_run() -> None:
    """On a Ray node the run's context holds the node's copy of the agent's services
    (shared limiter, usage counted for the run): the agent calls through it, not
    through the copy that came pickled with it; another model's services are not its."""
    from helios.toolcalls.adapters.model import ModelAgent

    agent = ModelAgent("openai-compatible/a", base_url="http://127.0.0.1:9/v1", api_key="k")
    other = ModelAgent("openai-compatible/b", base_url="http://127.0.0.1:9/v1", api_key="k")
    copy = agent.services.detached()

    class Ctx:
        services: Any = None

    ctx = Ctx()
    assert agent._services(None) is agent.services
    assert agent._services(ctx) is agent.services
    ctx.services = copy
    assert agent._services(ctx) is copy
    ctx.services = other.services
    assert agent._services(ctx) is agent.services


ECHO_AGENTS = '''
from helios import toolcalls

class Echo:
    async def run(self, audio):
        word = audio.transcript.split()[0]
        return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call(word)])

class Synth:
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)
'''
ECHO_CONFIG = """
synthesizer: ray_doors_agents:Synth
agent: ray_doors_agents:Echo
tests:
  - {id: one, prompts: ["book a", "book b"], expect: [{name: book}]}
"""


def test_a_tool_call_run_of_a_cluster_resumes_there_or_here_when_asked(
    tmp_path: Path, closed_port: int
) -> None:
    """A run folder that says it ran on a Ray cluster resumes there: its address must be
    given again (a folder never chooses where to connect), one line otherwise; with
    `--executor local` it resumes on this machine."""
    import json

    (tmp_path / "ray_doors_agents.py").write_text(ECHO_AGENTS)
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(ECHO_CONFIG))
    code, lines = _invoke("toolcalls", "--config", str(config), "-o", str(tmp_path / "out"), "-q")
    assert code == 0, lines
    (run_dir,) = (tmp_path / "out").iterdir()
    run_file = run_dir / "run.json"
    run = json.loads(run_file.read_text())
    assert run["config"]["settings"]["executor"] == "local" and "ray_address" not in run
    # as a run on a cluster records itself; one of its two runs still to do
    run.update(executor="ray", ray_address="10.0.0.1:6379")
    run["config"]["settings"]["executor"] = "ray"
    run_file.write_text(json.dumps(run))
    results = run_dir / "results.jsonl"
    results.write_text(results.read_text().splitlines(keepends=True)[0])
    code, lines = _invoke("toolcalls", "--resume", str(run_dir))
    assert code == 2, lines
    assert len(lines) == 1 and "resume with --ray-address given again" in lines[0], lines
    # named again, the run goes on on the Ray executor (this address answers nothing)
    address = f"127.0.0.1:{closed_port}"
    code, lines = _invoke("toolcalls", "--resume", str(run_dir), "--ray-address", address)
    assert code == 2 and f"cannot reach the Ray cluster at {address}" in lines[-1], lines
    code, lines = _invoke("toolcalls", "--resume", str(run_dir), "--executor", "local", "-q")
    assert code == 0, lines
    assert len(results.read_text().splitlines()) == 2
