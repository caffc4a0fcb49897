"""Harbor schema features end to end through the task door, on docker and on the
local sandbox: users, workdir, env per phase, images, healthchecks and network modes."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.view import as_user
from helios.errors import EnvironmentExecError
from helios.tasks.task import load_task
from helios.testing.mock_llm import MockLLMServer

from .harbor_tasks import (
    USERS_DOCKERFILE,
    USERS_SOLVE,
    USERS_TEST,
    USERS_TOML,
    only_record,
    provider,
    records_of,
    run_tasks,
    task,
    write,
)

__all__ = ["provider"]  # the fixture, shared with test_harbor_steps


# -- users, workdir, env per phase -------------------------------------------------------


def test_users_workdir_and_env_per_phase(provider: str, tmp_path: Path) -> None:
    task(
        tmp_path / "tasks", "users", USERS_TOML,
        solve=USERS_SOLVE, test=USERS_TEST, dockerfile=USERS_DOCKERFILE,
    )  # fmt: skip
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", provider))
    assert record["reward"] == 1.0, record["error"]


def test_tool_agent_commands_and_files_are_the_users(provider: str, tmp_path: Path) -> None:
    # On local every uid is the one host user that owns the sandbox (see
    # `_local_users`), so ownership says nothing there.
    owner = "agent" if provider == "docker" else "checker"
    test = f"""
    cd /custom-workdir
    ok=1
    [ "$(cat tool.txt)" = "agent /custom-workdir" ] || {{ echo "bash: $(cat tool.txt)"; ok=0; }}
    [ "$(stat -c %U edited.txt)" = {owner} ] || {{ echo "editor: $(stat -c %U edited.txt)"; ok=0; }}
    [ ! -e /usr/local/forbidden.txt ] || {{ echo "the editor wrote as root"; ok=0; }}
    echo $ok > /logs/verifier/reward.txt
    """
    task(
        tmp_path / "tasks", "tool", USERS_TOML,
        solve=None, test=test, dockerfile=USERS_DOCKERFILE, instruction="USERPROBE\n",
    )  # fmt: skip
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": 'echo "$(whoami) $PWD" > tool.txt'}}]},  # noqa: E501
        {"tool_calls": [{"name": "editor", "arguments": {
            "command": "create", "path": "/custom-workdir/edited.txt", "file_text": "x\n"}}]},
        # not the agent's to write: refused to the model, as `echo > file` would be
        {"tool_calls": [{"name": "editor", "arguments": {
            "command": "create", "path": "/usr/local/forbidden.txt", "file_text": "x\n"}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]  # fmt: skip
    with MockLLMServer(script={"scenarios": [{"match": "USERPROBE", "turns": turns}]}) as server:
        batch = run_tasks(
            tmp_path / "tasks", tmp_path / "out", provider, agent="tool",
            model="openai-compatible/scripted", base_url=server.openai_base_url, api_key="k",
        )  # fmt: skip
    record = only_record(batch)
    assert record["reward"] == 1.0, (record["error"], record["agent_error"])
    assert batch.output_dir is not None
    trajectory = (batch.output_dir / record["folder"] / "agent" / "trajectory.json").read_text()
    assert "/usr/local/forbidden.txt" in trajectory and "not writable" in trajectory


@pytest.mark.usefixtures("need_docker")
def test_an_unknown_user_is_an_error_not_a_silent_root(tmp_path: Path) -> None:
    toml = '[agent]\nuser = "nobody-here"\n[environment]\nmemory_mb = 256\n'
    task(tmp_path / "tasks", "ghost", toml, solve="whoami > /app/who\n")
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", "docker"))
    assert record["status"] == "error" and "nobody-here" in record["error"]["message"]


@pytest.mark.usefixtures("need_docker")
def test_uploads_for_a_user_are_written_as_that_user(tmp_path: Path) -> None:
    folder = task(tmp_path, "up", USERS_TOML, dockerfile=USERS_DOCKERFILE)
    env = DockerEnvironment(load_task(folder).sandbox_spec(), trial_id="up", run_id="pytest")
    view = as_user(env, "agent")
    payload = write(tmp_path / "payload.txt", "hi\n", 0o600)

    async def go() -> tuple[str, str]:
        await env.build()
        await env.start()
        try:
            await view.upload(payload, "/home/agent/mine.txt")  # the user's own folder
            await view.upload(payload, "/solution/solve.sh")  # Helios's: given to the user
            with pytest.raises(EnvironmentExecError, match=r"upload to /usr/local/x\.txt failed"):
                await view.upload(payload, "/usr/local/x.txt")
            owners = await env.exec("stat -c %U /home/agent/mine.txt /solution/solve.sh")
            absent = await env.exec("test -e /usr/local/x.txt || echo absent; ls -A /tmp")
            return owners.stdout, absent.stdout
        finally:
            await env.stop()

    owners, absent = asyncio.run(go())
    assert owners.split() == ["agent", "agent"]
    assert absent.strip() == "absent"  # and no staging folder left in /tmp


# -- images -------------------------------------------------------------------------------


def test_a_ready_image_gets_the_environment_files(provider: str, tmp_path: Path) -> None:
    folder = task(
        tmp_path / "tasks", "ready",
        '[environment]\ndocker_image = "debian:bookworm-slim"\nmemory_mb = 256\n',
        # in the working directory: the image's on docker (`/`: it has no WORKDIR, as
        # in Harbor), /app on local (no image: the fallback)
        dockerfile=None, solve="cp data/payload.txt /tmp/copied.txt\n",
        test='[ "$(cat /tmp/copied.txt)" = payload ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    write(folder / "environment" / "data" / "payload.txt", "payload\n")
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", provider))
    assert record["reward"] == 1.0, record["error"]


@pytest.mark.usefixtures("need_docker")
def test_an_image_whose_user_is_not_root(tmp_path: Path) -> None:
    # Helios's own folders are made as root; solve.sh (copied in 0600) is readable
    # by the image's USER, who runs it.
    dockerfile = "FROM debian:bookworm-slim\nRUN useradd -m runner\nUSER runner\n"
    task(
        tmp_path / "tasks", "runner",
        '[environment]\nworkdir = "/srv/work"\nmemory_mb = 256\n', dockerfile=dockerfile,
        solve='echo "$(whoami) $PWD" > /tmp/who\n',
        test='[ "$(cat /tmp/who)" = "runner /srv/work" ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", "docker"))
    assert record["reward"] == 1.0, record["error"]


# -- healthcheck -------------------------------------------------------------------------

HEALTH_TOML = """
[agent]
timeout_sec = 60
[environment]
memory_mb = 256
[environment.healthcheck]
command = "{command}"
interval_sec = 0.1
start_period_sec = {start_period}
start_interval_sec = 0.1
retries = 3
timeout_sec = 5
"""


def test_agent_starts_only_once_healthy(provider: str, tmp_path: Path) -> None:
    # Unhealthy on the first check (within the start period), then healthy; the
    # solution needs what only the passing check leaves behind.
    command = (
        "if [ -e /tmp/checked ]; then echo up > /app/healthy; "
        "else touch /tmp/checked; echo booting; exit 1; fi"
    )
    task(
        tmp_path / "tasks", "slow-start",
        HEALTH_TOML.format(command=command, start_period=30),
        solve="cp /app/healthy /app/seen\n",
        test='[ "$(cat /app/seen)" = up ] && echo 1 > /logs/verifier/reward.txt || '
        "echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", provider))
    assert record["reward"] == 1.0, record["error"]


def test_never_healthy_is_an_infrastructure_error(provider: str, tmp_path: Path) -> None:
    command = "echo still-warming-up; exit 7"
    task(
        tmp_path / "tasks", "sick", HEALTH_TOML.format(command=command, start_period=0),
        solve="touch /app/ran\n",
    )  # fmt: skip
    started = time.monotonic()
    batch = run_tasks(tmp_path / "tasks", tmp_path / "out", provider)
    record = only_record(batch)
    assert time.monotonic() - started < 60
    assert record["status"] == "error" and record["error"]["type"] == "EnvironmentUnhealthy"
    assert record["error"]["infrastructure"] is True
    assert "exit 7" in record["error"]["message"]
    assert "still-warming-up" in record["error"]["message"]
    assert record["turns"] == 0  # the agent never ran
    assert batch.output_dir is not None
    assert not (batch.output_dir / record["folder"] / "agent" / "oracle.txt").exists()


# -- network -----------------------------------------------------------------------------


@pytest.fixture
def loopback_port() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1: reachable only with the host's network."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


def _probe(port: int, out: str) -> str:
    return (
        f"if timeout 5 bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null; "
        f"then echo open > {out}; else echo closed > {out}; fi\n"
    )


def _network_task(root: Path, name: str, toml: str, port: int, expect: str) -> None:
    test = _probe(port, "/tmp/verifier-net") + (
        f'[ "$(cat /app/agent-net)" = {expect.split("/")[0]} ] && '
        f'[ "$(cat /tmp/verifier-net)" = {expect.split("/")[1]} ] && echo 1 > '
        "/logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )
    task(root, name, toml, solve=_probe(port, "/app/agent-net"), test=test)


def test_network_modes(
    provider: str, tmp_path: Path, loopback_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "public" on these machines' docker is the host network (no bridge here).
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", "host")
    tasks = tmp_path / "tasks"
    base = "[environment]\nmemory_mb = 256\n"
    _network_task(tasks, "public", base + 'network_mode = "public"\n', loopback_port, "open/open")
    _network_task(tasks, "offline", base + 'network_mode = "no-network"\n', loopback_port,
                  "closed/closed")  # fmt: skip
    _network_task(tasks, "legacy", base + "allow_internet = true\n", loopback_port, "open/open")
    per_phase = (
        base + 'network_mode = "no-network"\n[agent]\nnetwork_mode = "public"\n'
        '[verifier]\nnetwork_mode = "no-network"\n'
    )
    _network_task(tasks, "agent-only", per_phase, loopback_port, "open/closed")
    # unset is public, as in Harbor
    _network_task(tasks, "unset", base, loopback_port, "open/open")
    # Harbor's npm-dynamic-e-v-diff: the environment unset (public), the verifier
    # without network: a phase switch, which Harbor's docker refuses
    verifier_off = base + '[verifier]\nnetwork_mode = "no-network"\n'
    _network_task(tasks, "e-v-diff", verifier_off, loopback_port, "open/closed")
    batch = run_tasks(tasks, tmp_path / "out", provider)
    records = records_of(batch)
    for name in ("public", "offline", "legacy", "unset"):
        assert records[name]["reward"] == 1.0, (name, records[name]["error"])
    if provider == "local":  # every exec is its own sandbox: the network can change per phase
        assert records["agent-only"]["reward"] == 1.0
        assert records["e-v-diff"]["reward"] == 1.0
        assert batch.unsupported == []
    else:  # as in Harbor, plain docker cannot switch a running container's network
        assert "agent-only" not in records and "e-v-diff" not in records
        skipped = sorted(u.error for u in batch.unsupported)
        assert len(skipped) == 2
        assert "unsupported: agent.network_mode" in skipped[0]
        assert "unsupported: verifier.network_mode" in skipped[1]


def test_network_default_none(
    provider: str, tmp_path: Path, loopback_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--network-default none`: a task that leaves its network unset gets none, and
    the run's saved config says so."""
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", "host")
    tasks = tmp_path / "tasks"
    _network_task(tasks, "unset", "[environment]\nmemory_mb = 256\n", loopback_port,
                  "closed/closed")  # fmt: skip
    batch = run_tasks(tasks, tmp_path / "out", provider, network_default="none")
    assert only_record(batch)["reward"] == 1.0
    assert batch.output_dir is not None
    run = json.loads((batch.output_dir / "run.json").read_text())
    assert run["config"]["settings"]["network_default"] == "none"
