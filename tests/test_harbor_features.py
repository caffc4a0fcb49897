"""Harbor schema features end to end through the task door, on docker and on the
local sandbox: users, workdir, env per phase, a separate verifier with
artifacts, healthchecks, network modes and a two-step task with min_reward."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.view import as_user
from helios.errors import EnvironmentExecError
from helios.tasks.runner import ParallelRunner
from helios.tasks.summary import BatchResult
from helios.tasks.task import load_task
from helios.testing.mock_llm import MockLLMServer

from .harbor_tasks import (
    USERS_DOCKERFILE,
    USERS_SOLVE,
    USERS_TEST,
    USERS_TOML,
    step,
    task,
    write,
)


@pytest.fixture(params=["docker", "local"])
def provider(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue("need_docker" if request.param == "docker" else "need_bwrap")
    return str(request.param)


def _run(tasks: Path, out: Path, provider: str, **kwargs: Any) -> BatchResult:
    kwargs.setdefault("agent", "oracle")
    runner = ParallelRunner(
        tasks, provider=provider, output_dir=out, show_progress=False, n_concurrent=2, **kwargs
    )
    return asyncio.run(runner.run())


def _records(batch: BatchResult) -> dict[str, dict[str, Any]]:
    assert batch.output_dir is not None
    return {
        r.name: json.loads((batch.output_dir / r.folder / "result.json").read_text())
        for r in batch.results
    }


def _only(batch: BatchResult) -> dict[str, Any]:
    (record,) = _records(batch).values()
    return record


# -- users, workdir, env per phase -------------------------------------------------------


def test_users_workdir_and_env_per_phase(provider: str, tmp_path: Path) -> None:
    task(
        tmp_path / "tasks", "users", USERS_TOML,
        solve=USERS_SOLVE, test=USERS_TEST, dockerfile=USERS_DOCKERFILE,
    )  # fmt: skip
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", provider))
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
        batch = _run(
            tmp_path / "tasks", tmp_path / "out", provider, agent="tool",
            model="openai-compatible/scripted", base_url=server.openai_base_url, api_key="k",
        )  # fmt: skip
    record = _only(batch)
    assert record["reward"] == 1.0, (record["error"], record["agent_error"])
    assert batch.output_dir is not None
    trajectory = (batch.output_dir / record["folder"] / "agent" / "trajectory.json").read_text()
    assert "/usr/local/forbidden.txt" in trajectory and "not writable" in trajectory


@pytest.mark.usefixtures("need_docker")
def test_an_unknown_user_is_an_error_not_a_silent_root(tmp_path: Path) -> None:
    toml = '[agent]\nuser = "nobody-here"\n[environment]\nmemory_mb = 256\n'
    task(tmp_path / "tasks", "ghost", toml, solve="whoami > /app/who\n")
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", "docker"))
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


# -- a separate verifier -----------------------------------------------------------------

SEPARATE_TOML = """
schema_version = "1.4"
artifacts = [
  "/app/answer.txt",
  { source = "/app/out", destination = "outdir", exclude = ["*.tmp"] },
]
[agent]
timeout_sec = 60
[verifier]
timeout_sec = 60
environment_mode = "separate"
[environment]
memory_mb = 512
"""

SEPARATE_SOLVE = """
echo {answer} > /app/answer.txt
echo junk > /app/junk.txt
mkdir -p /app/out /logs/artifacts && echo keep > /app/out/a.txt && echo drop > /app/out/b.tmp
echo note > /logs/artifacts/note.txt
# forgeries: a reward, and a test.sh that always passes
echo 1 > /logs/verifier/reward.txt
mkdir -p /tests && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh
"""

SEPARATE_TEST = """
ok=1
[ "$(cat /app/answer.txt)" = 42 ] || { echo "wrong answer"; ok=0; }
[ ! -e /app/junk.txt ] || { echo "a file that is no artifact came over"; ok=0; }
[ "$(cat /app/out/a.txt)" = keep ] || { echo "no out/a.txt"; ok=0; }
[ ! -e /app/out/b.tmp ] || { echo "an excluded file came over"; ok=0; }
[ "$(cat /logs/artifacts/note.txt)" = note ] || { echo "no /logs/artifacts"; ok=0; }
[ -e /tests/Dockerfile ] || { echo "no tests/ in /tests"; ok=0; }
echo $ok > /logs/verifier/reward.txt
"""


def _separate_task(root: Path, name: str, answer: int) -> Path:
    folder = task(
        root, name, SEPARATE_TOML,
        solve=SEPARATE_SOLVE.format(answer=answer), test=SEPARATE_TEST,
    )  # fmt: skip
    write(folder / "tests" / "Dockerfile", "FROM debian:bookworm-slim\nCOPY . /tests/\n")
    return folder


def test_separate_verifier_sees_only_the_artifacts(provider: str, tmp_path: Path) -> None:
    _separate_task(tmp_path / "tasks", "right", 42)
    _separate_task(tmp_path / "tasks", "wrong", 41)
    started = time.time()
    batch = _run(tmp_path / "tasks", tmp_path / "out", provider)
    records = _records(batch)
    assert records["right"]["reward"] == 1.0, records["right"]["error"]
    assert records["wrong"]["reward"] == 0.0  # the planted reward and test.sh did not count
    assert batch.output_dir is not None
    artifacts = batch.output_dir / records["right"]["folder"] / "artifacts"
    assert (artifacts / "app" / "answer.txt").read_text() == "42\n"
    assert (artifacts / "outdir" / "a.txt").exists()
    assert not (artifacts / "outdir" / "b.tmp").exists()
    assert (artifacts / "logs" / "artifacts" / "note.txt").read_text() == "note\n"
    manifest = json.loads((artifacts / "manifest.json").read_text())
    assert {m["source"]: m["status"] for m in manifest} == {
        "/logs/artifacts": "ok", "/app/answer.txt": "ok", "/app/out": "ok",
    }  # fmt: skip
    if provider == "docker":
        run_id = json.loads((batch.output_dir / "run.json").read_text())["run_id"]
        _check_agent_container_gone_first(run_id, started)


def _check_agent_container_gone_first(run_id: str, since: float) -> None:
    """Each trial's agent container is destroyed before its verifier's is created."""
    events = subprocess.run(
        ["docker", "events", "--since", f"{since - 1:.0f}", "--until", f"{time.time() + 1:.0f}",
         "--filter", f"label=helios.run={run_id}", "--filter", "type=container",
         "--format", '{{.Action}} {{index .Actor.Attributes "helios.trial"}} {{.Actor.ID}}'],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    by_trial: dict[str, list[tuple[str, str]]] = {}
    for line in events:
        action, trial, cid = line.rsplit(" ", 2)
        if action in ("create", "destroy"):
            by_trial.setdefault(trial, []).append((action, cid))
    assert len(by_trial) == 2, events
    for seen in by_trial.values():
        creates = [cid for action, cid in seen if action == "create"]
        assert len(creates) == 2, seen
        agent, verifier = creates
        assert seen.index(("destroy", agent)) < seen.index(("create", verifier)), seen


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
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", provider))
    assert record["reward"] == 1.0, record["error"]


def test_never_healthy_is_an_infrastructure_error(provider: str, tmp_path: Path) -> None:
    command = "echo still-warming-up; exit 7"
    task(
        tmp_path / "tasks", "sick", HEALTH_TOML.format(command=command, start_period=0),
        solve="touch /app/ran\n",
    )  # fmt: skip
    started = time.monotonic()
    batch = _run(tmp_path / "tasks", tmp_path / "out", provider)
    record = _only(batch)
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
    batch = _run(tasks, tmp_path / "out", provider)
    records = _records(batch)
    for name in ("public", "offline", "legacy"):
        assert records[name]["reward"] == 1.0, (name, records[name]["error"])
    if provider == "local":  # every exec is its own sandbox: the network can change per phase
        assert records["agent-only"]["reward"] == 1.0
        assert batch.unsupported == []
    else:  # as in Harbor, plain docker cannot switch a running container's network
        assert "agent-only" not in records
        (skipped,) = batch.unsupported
        assert "unsupported: agent.network_mode" in skipped.error


# -- multi-step --------------------------------------------------------------------------

STEPS_TOML = """
schema_version = "1.4"
multi_step_reward_strategy = "{strategy}"
[agent]
timeout_sec = 60
[environment]
memory_mb = 256
[[steps]]
name = "first"
min_reward = 1.0
[[steps]]
name = "second"
[steps.verifier]
timeout_sec = 30
"""

#: shared helper in the task's tests/, used by both steps' own test.sh
CHECK_LIB = 'check() { if [ "$(cat "$1" 2>/dev/null)" = "$2" ]; then echo 1; else echo 0; fi; }\n'


def _steps_task(root: Path, name: str, strategy: str, first_answer: str) -> Path:
    folder = task(root, name, STEPS_TOML.format(strategy=strategy), solve=None, test=None)
    write(folder / "tests" / "lib.sh", CHECK_LIB)
    first = step(
        folder, "first",
        solve=f"echo {first_answer} > /app/first.txt\n",
        test=". /tests/lib.sh\n"
        'if [ "$(check /app/seed.txt seeded)" = 1 ] && [ ! -e /app/setup.sh ]; then '
        "check /app/first.txt 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n",
    )  # fmt: skip
    write(first / "workdir" / "setup.sh", 'echo seeded > seed.txt\nrm -- "$0"\n')
    write(first / "workdir" / "data.txt", "data\n")
    step(
        folder, "second",
        solve="echo 2 > /app/second.txt\n",
        # the first step's files are still there; half the reward without data.txt
        test=". /tests/lib.sh\n"
        'a=$(check /app/second.txt 2); b=$(check /app/data.txt data)\n'
        'echo "{\\"reward\\": $a, \\"data\\": $b}" > /logs/verifier/reward.json\n',
    )  # fmt: skip
    return folder


def test_two_step_task_runs_in_order_and_stops_below_min_reward(
    provider: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    _steps_task(tasks, "both-pass", "mean", first_answer="1")
    _steps_task(tasks, "gated", "mean", first_answer="0")
    batch = _run(tasks, tmp_path / "out", provider)
    records = _records(batch)
    passed = records["both-pass"]
    assert passed["reward"] == 1.0 and passed["status"] == "passed", passed["error"]
    assert [(s["name"], s["status"], s["reward"]) for s in passed["steps"]] == [
        ("first", "passed", 1.0), ("second", "passed", 1.0)
    ]  # fmt: skip
    # the per-key mean: the first step has no "data" key, which counts as 0
    assert passed["reward_strategy"] == "mean" and passed["rewards"] == {"reward": 1.0, "data": 0.5}
    gated = records["gated"]
    assert [(s["name"], s["status"]) for s in gated["steps"]] == [
        ("first", "failed"), ("second", "not_run")
    ]  # fmt: skip
    assert gated["steps"][0]["below_min_reward"] is True
    assert gated["reward"] == 0.0 and gated["status"] == "failed"
    assert batch.output_dir is not None
    folder = batch.output_dir / passed["folder"]
    for name in ("first", "second"):
        assert (folder / "steps" / name / "agent" / "oracle.txt").exists()
        assert (folder / "steps" / name / "verifier" / "test-stdout.txt").exists()
    summary = json.loads((batch.output_dir / "batch_summary.json").read_text())
    row = next(t for t in summary["tasks"] if t["name"] == "gated")
    assert [s["status"] for s in row["steps"]] == ["failed", "not_run"]


def test_final_strategy_takes_the_last_steps_rewards(provider: str, tmp_path: Path) -> None:
    folder = _steps_task(tmp_path / "tasks", "final", "final", first_answer="1")
    (folder / "steps" / "first" / "workdir" / "data.txt").unlink()  # second step: data = 0
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", provider))
    assert record["rewards"] == {"reward": 1.0, "data": 0.0} and record["reward"] == 1.0


# -- hostile agents against the new paths -------------------------------------------------


def test_hostile_artifacts_are_skipped_not_followed(provider: str, tmp_path: Path) -> None:
    folder = _separate_task(tmp_path / "tasks", "links", 42)
    write(
        folder / "solution" / "solve.sh",
        "#!/bin/sh\nln -s /etc/hostname /app/answer.txt\nmkfifo /app/out\n"
        "mkdir -p /logs/artifacts && ln -s /etc /logs/artifacts/etc\n",
        0o600,
    )
    batch = _run(tmp_path / "tasks", tmp_path / "out", provider)
    record = _only(batch)
    assert record["status"] == "failed" and record["error"] is None  # scored, not crashed
    assert batch.output_dir is not None
    manifest = json.loads(
        (batch.output_dir / record["folder"] / "artifacts" / "manifest.json").read_text()
    )
    status = {m["source"]: m["status"] for m in manifest}
    assert status["/app/answer.txt"].startswith("skipped")
    assert status["/app/out"].startswith("skipped")
    stdout = (batch.output_dir / record["folder"] / "verifier" / "test-stdout.txt").read_text()
    assert "wrong answer" in stdout


def test_a_step_cannot_leave_a_forger_for_the_next(provider: str, tmp_path: Path) -> None:
    toml = """
    [agent]
    timeout_sec = 60
    [environment]
    memory_mb = 256
    [[steps]]
    name = "a"
    [[steps]]
    name = "b"
    """
    folder = task(tmp_path / "tasks", "forger", toml, solve=None, test=None)
    forger = "while true; do echo 1 > /logs/verifier/reward.txt; sleep 0.01; done"
    step(
        folder, "a",
        solve=f"nohup sh -c '{forger}' >/dev/null 2>&1 &\necho done > /app/a.txt\n",
        test="sleep 0.3; echo 1 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    step(folder, "b", solve="true\n", test="echo 0 > /logs/verifier/reward.txt; sleep 0.3\n")
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", provider))
    assert [s["reward"] for s in record["steps"]] == [1.0, 0.0]
    assert record["reward"] == 0.5


# -- images -------------------------------------------------------------------------------


def test_a_ready_image_gets_the_environment_files(provider: str, tmp_path: Path) -> None:
    folder = task(
        tmp_path / "tasks", "ready",
        '[environment]\ndocker_image = "debian:bookworm-slim"\nmemory_mb = 256\n',
        dockerfile=None, solve="cp data/payload.txt /app/copied.txt\n",
        test='[ "$(cat /app/copied.txt)" = payload ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    write(folder / "environment" / "data" / "payload.txt", "payload\n")
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", provider))
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
    record = _only(_run(tmp_path / "tasks", tmp_path / "out", "docker"))
    assert record["reward"] == 1.0, record["error"]


STEP_FEATURES_TOML = """
[agent]
timeout_sec = 60
[environment]
memory_mb = 256
[[steps]]
name = "make"
[steps.healthcheck]
command = "{check}"
interval_sec = 0.1
start_interval_sec = 0.1
retries = 2
timeout_sec = 5
[[steps]]
name = "grade"
artifacts = ["/app/result.txt"]
[steps.verifier]
environment_mode = "separate"
"""


def _step_features_task(root: Path, name: str, check: str) -> None:
    folder = task(
        root, name, STEP_FEATURES_TOML.format(check=check), solve=None, test=None
    )
    make = step(
        folder, "make", solve="cat data.txt > /app/made.txt\n",
        test='[ "$(cat /app/made.txt)" = seed ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    write(make / "workdir" / "data.txt", "seed\n")
    step(
        folder, "grade", solve="cat /app/made.txt > /app/result.txt; touch /app/junk\n",
        test='[ "$(cat /app/result.txt)" = seed ] && [ ! -e /app/junk ] && [ ! -e /app/made.txt ]'
        " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip


def test_step_healthchecks_and_a_steps_separate_verifier(provider: str, tmp_path: Path) -> None:
    _step_features_task(tmp_path / "tasks", "ready", "test -f /app/data.txt")
    _step_features_task(tmp_path / "tasks", "never", "echo no-such-service; false")
    batch = _run(tmp_path / "tasks", tmp_path / "out", provider)
    records = _records(batch)
    ready = records["ready"]
    assert [s["reward"] for s in ready["steps"]] == [1.0, 1.0], ready["steps"]
    assert batch.output_dir is not None
    collected = batch.output_dir / ready["folder"] / "steps" / "grade" / "artifacts"
    assert (collected / "app" / "result.txt").read_text() == "seed\n"
    never = records["never"]
    assert never["status"] == "error" and never["error"]["type"] == "EnvironmentUnhealthy"
    assert "step 'make'" in never["error"]["message"]
    assert "no-such-service" in never["error"]["message"]
    assert [s["status"] for s in never["steps"]] == ["error", "not_run"]


# -- interrupts --------------------------------------------------------------------------


@pytest.mark.usefixtures("need_docker")
def test_cancel_with_two_sandboxes_alive_leaves_none(tmp_path: Path) -> None:
    # Step "a" is verified in its own sandbox while the agent's stays up for "b":
    # a cancel then must remove both.
    toml = """
    [agent]
    timeout_sec = 60
    [environment]
    memory_mb = 256
    [[steps]]
    name = "a"
    [steps.verifier]
    environment_mode = "separate"
    timeout_sec = 120
    [[steps]]
    name = "b"
    """
    folder = task(tmp_path / "tasks", "slow", toml, solve=None, test=None)
    step(folder, "a", solve="true\n", test="sleep 120\n")
    step(folder, "b", solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    runner = ParallelRunner(
        tmp_path / "tasks", agent="oracle", provider="docker", output_dir=tmp_path / "out",
        show_progress=False,
    )  # fmt: skip

    def containers(run_id: str, *flags: str) -> list[str]:
        out = subprocess.run(
            ["docker", "ps", "-q", *flags, "--filter", f"label=helios.run={run_id}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return out.stdout.split()

    async def go() -> str:
        job = asyncio.create_task(runner.run())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            if runner.run_dir is None:
                continue
            run_id = json.loads((runner.run_dir / "run.json").read_text())["run_id"]
            if len(await asyncio.to_thread(containers, run_id)) == 2:
                break
        else:
            raise AssertionError("the step's verifier sandbox never started")
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        return run_id

    run_id = asyncio.run(go())
    assert containers(run_id, "-a") == []
