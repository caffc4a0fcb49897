"""Installed agents (helios.agents.installed): the real Claude Code client, installed
from npm once into the host's agent cache, solving an example task against the
scripted Anthropic server on loopback; and the bad cases (a failed install, a
hang, a key printed)."""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from helios import ParallelRunner
from helios.agents.installed.cache import (
    InstallError,
    Package,
    check_reachable,
    ensure_installed,
)
from helios.agents.installed.claude_code import ClaudeCodeAgent, stream_json_messages
from helios.agents.registry import create_agent
from helios.errors import ConfigError
from helios.models.routing import resolve_model
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory
from helios.usage import Usage
from tests.agent_installs import install

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
MODEL = "anthropic/claude-scripted"
KEY = "sk-ant-helios-test-key-0123456789"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"


def _script(command: str) -> dict[str, Any]:
    return {"scenarios": [{"match": "*", "turns": [
        {"tool_calls": [{"name": "Bash", "arguments": {"command": command,
                                                       "description": "write the file"}}]},
        {"text": "Done."}]}]}  # fmt: skip


def _task(tmp_path: Path, name: str = "hello-file") -> Path:
    """hello-file with the network on (the agent reaches the server on loopback) and
    1 GiB of memory: Claude Code's runtime (Bun) aborts at start under 1 GiB of
    RLIMIT_DATA, the local sandbox's memory bound without cgroups."""
    task = tmp_path / "tasks" / name
    shutil.copytree(EXAMPLE, task)
    toml = task / "task.toml"
    text = toml.read_text().replace("allow_internet = false", "allow_internet = true")
    toml.write_text(text.replace("memory_mb = 512", "memory_mb = 1536"))
    return task


@pytest.fixture(scope="session")
def claude_install() -> Path:
    """Claude Code from npm in the host's agent cache: installed once (by
    tests/agent_installs.py ahead of the suite, else here), then found."""
    return install(ClaudeCodeAgent)[0]


def _batch(tmp_path: Path, tasks: list[Path], script: dict[str, Any], **more: Any) -> Any:
    more.setdefault("provider", "local")
    with MockLLMServer(script=script) as server:
        runner = ParallelRunner(
            tasks, output_dir=str(tmp_path / "out"), model=MODEL,
            agent="claude-code", base_url=server.anthropic_base_url, api_key=KEY,
            show_progress=False, **more,
        )  # fmt: skip
        return asyncio.run(runner.run())


def _trial(batch: Any) -> tuple[Path, dict[str, Any]]:
    (result_file,) = batch.output_dir.glob("*/result.json")
    return result_file.parent, json.loads(result_file.read_text())


# -- the log to ATIF ---------------------------------------------------------------
STREAM = [
    {"type": "system", "subtype": "init", "session_id": "s"},
    {"type": "assistant", "message": {"id": "m0", "model": "claude-scripted", "content": [
        {"type": "text", "text": "I will write it."}],
        "usage": {"input_tokens": 100, "output_tokens": 3}}},
    {"type": "assistant", "message": {"id": "m0", "model": "claude-scripted", "content": [
        {"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "ls"}}],
        "usage": {"input_tokens": 100, "output_tokens": 9}}},
    {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t0", "content": "a.txt", "is_error": False}]}},
    {"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": "Done."}],
                                      "usage": {"input_tokens": 120, "output_tokens": 1}}},
    {"type": "result", "num_turns": 2, "total_cost_usd": 0.0123,
     "usage": {"input_tokens": 220, "output_tokens": 10, "cache_read_input_tokens": 5}},
]  # fmt: skip


def test_stream_json_becomes_one_message_per_reply_with_the_result_usage() -> None:
    usage = Usage()
    log = "\n".join(json.dumps(r) for r in STREAM) + "\nnot json\n"
    messages = stream_json_messages(log, usage)
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[0].content == "I will write it."
    assert [(c.id, c.name, c.arguments) for c in messages[0].tool_calls] == [
        ("t0", "Bash", {"command": "ls"})
    ]
    assert messages[1].tool_call_id == "t0" and messages[1].content == "a.txt"
    assert messages[0].usage is not None and messages[0].usage.output_tokens == 9
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (220, 10, 5)
    assert usage.cost_usd == pytest.approx(0.0123) and usage.calls == 2


def test_the_version_is_pinned_and_recorded_in_the_identity() -> None:
    agent = create_agent("claude-code", version="2.0.0")
    assert agent.identity()["package"] == "@anthropic-ai/claude-code@2.0.0"
    assert create_agent("claude-code").identity()["package"].endswith(
        f"@{ClaudeCodeAgent.default_version}"
    )
    with pytest.raises(ConfigError, match="takes no setting 'turns'"):
        create_agent("claude-code", turns=3)


# -- the install cache ---------------------------------------------------------------
def _fake_npm(folder: Path, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    npm = folder / "npm"
    npm.write_text(f"#!/bin/sh\n{body}\n")
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)


def test_an_install_is_made_once_and_two_at_once_wait_for_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "count"
    # the fake npm counts its runs and takes a moment, so the second caller waits on the lock
    _fake_npm(tmp_path / "bin", f'echo x >> {counter}; sleep 0.3; mkdir -p "$3/node_modules"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    package = Package("npm", "some-agent", "1.2.3")

    async def both() -> list[Any]:
        return await asyncio.gather(*(
            ensure_installed("some", package, root=tmp_path / "cache") for _ in range(2)
        ))  # fmt: skip

    first, second = asyncio.run(both())
    assert first.folder == second.folder == tmp_path / "cache" / "npm-some-agent-1.2.3"
    assert counter.read_text().count("x") == 1
    assert sorted([first.seconds > 0, second.seconds > 0]) == [False, True]
    again = asyncio.run(ensure_installed("some", package, root=tmp_path / "cache"))
    assert again.seconds == 0.0 and counter.read_text().count("x") == 1


def test_a_failed_install_says_the_installers_last_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_npm(tmp_path / "bin", "echo fetching; echo 'npm error 404 no such package' >&2; exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(InstallError, match=r"exit 1.*npm error 404 no such package"):
        asyncio.run(ensure_installed("x", Package("npm", "x", "9"), root=tmp_path / "c"))
    # a cut install is not taken for a finished one
    assert not (tmp_path / "c" / "npm-x-9" / ".installed").exists()


def test_a_cache_the_sandbox_cannot_reach_is_said(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(InstallError, match=r"closed to other users.*HELIOS_AGENT_CACHE"):
        check_reachable(closed / "cache" / "npm-x-9")
    check_reachable(Path("/usr/bin"))


@pytest.mark.usefixtures("need_bwrap")
def test_a_failed_install_is_an_infrastructure_error_and_the_batch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_npm(tmp_path / "bin", "echo 'npm error code E404' >&2; exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("HELIOS_AGENT_CACHE", str(tmp_path / "cache"))
    tasks = [_task(tmp_path, "a"), _task(tmp_path, "b")]
    batch = _batch(tmp_path, tasks, _script(WRITE), agent_settings={"version": "0.0.1"})
    results = [json.loads(p.read_text()) for p in batch.output_dir.glob("*/result.json")]
    assert len(results) == 2
    for result in results:
        error = result["error"]
        assert error["infrastructure"] is True
        assert "npm error code E404" in error["message"]


# -- the real client ------------------------------------------------------------------
@pytest.mark.usefixtures("need_bwrap")
def test_claude_code_solves_a_task_on_local(claude_install: Path, tmp_path: Path) -> None:
    batch = _batch(tmp_path, [_task(tmp_path)], _script(WRITE))
    trial, result = _trial(batch)
    assert result["reward"] == 1.0, result.get("error")
    config = json.loads((trial / "config.json").read_text())
    assert config["agent_version"] == ClaudeCodeAgent.default_version
    run = json.loads((batch.output_dir / "run.json").read_text())
    assert run["agent_version"] == ClaudeCodeAgent.default_version
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert validate_trajectory(trajectory) == []
    assert trajectory["agent"]["version"] == ClaudeCodeAgent.default_version
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls") or []]
    assert calls and calls[0]["function_name"] == "Bash"
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0
    install = json.loads((trial / "agent" / "install.json").read_text())
    assert install["package"] == f"@anthropic-ai/claude-code@{ClaudeCodeAgent.default_version}"
    assert (install["cached"], install["seconds"]) == (True, 0.0)  # the session's install
    assert install["placed"] == "mounted"  # bound, not copied
    log = (trial / "agent" / "claude-code.log").read_text()
    assert '"type":"result"' in log
    assert KEY not in log


@pytest.mark.usefixtures("need_docker")
def test_claude_code_solves_a_task_on_docker(claude_install: Path, tmp_path: Path) -> None:
    # a task without network: the agent reaches the server on the host's loopback
    # through the trial's egress proxy, and the install is in an image derived
    # from the task's (tests/test_installed_agent_sandbox.py)
    task = _task(tmp_path)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = true", "allow_internet = false"))
    batch = _batch(tmp_path, [task], _script(WRITE), provider="docker")
    trial, result = _trial(batch)
    assert result["reward"] == 1.0, result.get("error")
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert any(s.get("tool_calls") for s in trajectory["steps"])
    assert trajectory["final_metrics"]["total_prompt_tokens"] > 0


@pytest.mark.usefixtures("need_bwrap")
def test_a_printed_key_is_redacted_and_a_hang_is_stopped(
    claude_install: Path, tmp_path: Path
) -> None:
    # the first Bash call prints the key (it reaches the agent's log as a tool result),
    # the second hangs past the agent timeout
    task = _task(tmp_path)
    toml = task / "task.toml"
    # 15 s: Claude Code's start alone took over 4 s on a loaded machine (CI saw its log
    # empty at a 5 s timeout), and the salvage margin stops it a quarter earlier
    toml.write_text(toml.read_text().replace("timeout_sec = 120.0", "timeout_sec = 15.0"))
    bash = [{"name": "Bash", "arguments": {"command": c, "description": "run"}}
            for c in ("echo key=$ANTHROPIC_API_KEY", "tail -f /dev/null")]  # fmt: skip
    script = {"scenarios": [{"match": "*", "turns": [{"tool_calls": [call]} for call in bash]}]}
    batch = _batch(tmp_path, [task], script)
    trial, result = _trial(batch)
    assert result["reward"] == 0.0
    assert "timeout" in json.dumps([result.get("error"), result.get("agent_error")]).lower()
    assert "key=[REDACTED]" in (trial / "agent" / "claude-code.log").read_text()
    for path in trial.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


# -- the docs' example -----------------------------------------------------------------
def _docs_agent() -> type[Any]:
    """docs/agents.md's "Writing your own installed agent" code, as written."""
    page = (Path(__file__).parents[1] / "docs" / "agents.md").read_text()
    (code,) = [b for b in page.split("```python\n")[1:] if b.startswith("# my_agents.py")]
    namespace: dict[str, Any] = {}
    exec(compile(code.split("```")[0], "docs/agents.md", "exec"), namespace)
    return namespace["MyClaude"]  # type: ignore[no-any-return]


def test_the_cli_job_and_python_pin_the_version() -> None:
    from helios.cli.options import model_options
    from helios.tasks.job import JobAgent
    from helios.tasks.settings import TaskBatchSettings

    parsed = model_options(model=None, base_url=None, api_key=None, max_turns=None,
                           system_prompt_file=None, max_tokens=10, temperature=None,
                           reasoning_effort=None, no_reasoning=False, openrouter_routing=None,
                           prices=None, agent_version="2.0.1")  # fmt: skip
    assert parsed.agent_settings == {"version": "2.0.1"}
    s = TaskBatchSettings.from_kwargs(agent="claude-code", agent_version="2.0.2")
    assert s.agent_settings == {"version": "2.0.2"}
    assert JobAgent(name="claude-code", version="2.0.3").version == "2.0.3"


@pytest.mark.usefixtures("need_bwrap")
def test_the_docs_example_agent_solves_a_task_on_local(
    claude_install: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's module, saved as `my_agents.py`, and its entry point, read from the
    page's `[project.entry-points."helios.agents"]` block, found by `--agent my-claude`
    as an installed package's would be."""
    import tomllib
    from importlib.metadata import EntryPoint

    import helios.agents.registry as registry

    _docs_agent()  # the page's code block, as written
    page = (Path(__file__).parents[1] / "docs" / "agents.md").read_text()
    module = page.split("```python\n# my_agents.py\n")[1].split("```")[0]
    (tmp_path / "my_agents.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    toml = page.split('```toml\n[project.entry-points."helios.agents"]')[1].split("```")[0]
    declared = tomllib.loads(toml)
    group = registry.ENTRY_POINT_GROUP
    points = [EntryPoint(name, value, group) for name, value in declared.items()]
    assert [p.name for p in points] == ["my-claude"]
    found = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: (
        points if group == registry.ENTRY_POINT_GROUP else found(group=group)))  # fmt: skip
    assert "my-claude" in registry.available_agents()
    with MockLLMServer(script=_script(WRITE)) as server:
        runner = ParallelRunner(
            [_task(tmp_path)], output_dir=str(tmp_path / "out"), provider="local", model=MODEL,
            agent="my-claude", base_url=server.anthropic_base_url, api_key=KEY,
            show_progress=False,
        )  # fmt: skip
        batch = asyncio.run(runner.run())
    trial, result = _trial(batch)
    assert result["reward"] == 1.0, result.get("error")
    assert result["usage"]["input_tokens"] > 0
    trajectory = json.loads((trial / "agent" / "trajectory.json").read_text())
    assert any(s.get("tool_calls") for s in trajectory["steps"])


@pytest.mark.parametrize(("agent", "model", "host"), [
    ("claude-code", "anthropic/claude-sonnet-4", "api.anthropic.com"),
    ("codex", "openai/gpt-5", "api.openai.com"),
    ("hermes", "openai/gpt-5", "api.openai.com"),
    ("openhands", "openai/gpt-5", "api.openai.com"),
    ("gemini-cli", "gemini/gemini-2.5-pro", "generativelanguage.googleapis.com"),
])  # fmt: skip
def test_with_no_base_url_the_route_opened_is_the_providers_public_api(
    agent: str, model: str, host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider's own model (no --base-url) on a task without network: the agent's
    route goes to the provider's API, never nowhere (it had no route at all)."""
    for variable in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GEMINI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    spec = resolve_model(model, api_key="sk-test")
    url = create_agent(agent).endpoint(spec)  # type: ignore[attr-defined]
    assert url is not None and urlsplit(url).hostname == host, url
    assert urlsplit(url).scheme == "https"
