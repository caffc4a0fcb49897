"""What an installed agent's sandbox holds it to (helios.agents.installed): the real
Claude Code client, against the scripted Anthropic server on loopback.

- a `no-network` task's agent reaches its model through the trial's egress proxy
  and nothing else (another loopback server stays out of reach), on local and docker;
- on docker the install is baked into an image derived from the task's, once;
- the agent runs as the task's `[agent] user`;
- what the agent does through its tools cannot forge the reward (the hostile
  suite's reward writers, driven by the scripted model);
- a printed key is redacted from every file, and a hang is stopped at the timeout.
"""

from __future__ import annotations

import http.server
import json
import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helios.agents.installed.claude_code import ClaudeCodeAgent
from helios.environments.docker.agent_image import AGENT_IMAGE_REPO, LABEL_AGENT_INSTALL
from tests.agent_installs import install
from tests.security.hostile import Context, catalogue
from tests.test_installed_agents import KEY, WRITE, _batch, _script, _trial

EXAMPLE = Path(__file__).parents[1] / "examples" / "tasks" / "hello-file"
SECRET = "helios-other-server-secret"


@pytest.fixture(scope="module")
def claude_install() -> Path:
    return install(ClaudeCodeAgent)[0]


def _task(tmp_path: Path, name: str = "hello-file", *, network: str = "no-network",
          agent: str = "", dockerfile: str = "", test: str | None = None) -> Path:  # fmt: skip
    """hello-file under `network_mode = NETWORK`, with 1.5 GiB of memory (Claude
    Code's runtime aborts under 1 GiB on local), `agent` lines added to [agent]."""
    task = tmp_path / "tasks" / name
    shutil.copytree(EXAMPLE, task)
    toml = task / "task.toml"
    text = toml.read_text().replace("allow_internet = false", f'network_mode = "{network}"')
    text = text.replace("memory_mb = 512", "memory_mb = 1536")
    toml.write_text(text.replace("[agent]\n", f"[agent]\n{agent}"))
    if dockerfile:
        with (task / "environment" / "Dockerfile").open("a") as out:
            out.write(dockerfile)
    if test is not None:
        (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + test)
    return task


class _Other:
    """A loopback HTTP server the agent must not reach: counts its requests."""

    def __init__(self) -> None:
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                body = SECRET.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]


@pytest.fixture
def other() -> Iterator[_Other]:
    made = _Other()
    thread = threading.Thread(target=made.server.serve_forever, daemon=True)
    thread.start()
    yield made
    made.server.shutdown()
    made.server.server_close()


def _probe(port: int, then: str = WRITE) -> str:
    """Try the other server straight (bash's /dev/tcp ignores proxies) and through
    the proxy the process was given, showing what came back; then `then`."""
    request = f"GET http://127.0.0.1:{port}/ HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n"
    direct = (f"exec 3<>/dev/tcp/127.0.0.1/{port} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3"
              " && timeout 5 cat <&3")  # fmt: skip
    proxied = ('p=${HTTP_PROXY#http://}; p=${p%/}; exec 3<>/dev/tcp/${p%:*}/${p##*:} && '
               f"printf '{request}' >&3 && timeout 5 cat <&3")  # fmt: skip
    return (
        f"{{ echo proxy=$HTTP_PROXY; timeout 10 bash -c {shlex.quote(direct)}; "
        f"timeout 10 bash -c {shlex.quote(proxied)}; }} 2>&1; {then}"
    )


# -- 1. a no-network task: the model and nothing else ----------------------------------
@pytest.mark.parametrize("provider", ["local", "docker"])
def test_a_no_network_agent_reaches_its_model_and_nothing_else(
    claude_install: Path, tmp_path: Path, other: _Other, provider: str
) -> None:
    task = _task(tmp_path)
    # the verifier tries too: its phase keeps the task's own network (none)
    test = task / "tests" / "test.sh"
    probe = _probe(other.port, then="true")
    test.write_text(test.read_text().replace("\nmkdir", f"\n{probe}\nmkdir", 1))
    batch = _batch(tmp_path, [task], _script(_probe(other.port)), provider=provider)
    trial, result = _trial(batch)
    assert result["reward"] == 1.0, result.get("error")
    assert other.hits == 0
    trajectory = (trial / "agent" / "trajectory.json").read_text()
    assert "proxy=http://" in trajectory  # the tool's command had the proxy's variables
    assert SECRET not in trajectory
    # the request through the proxy was denied, and said so in the trial's folder
    assert f"127.0.0.1:{other.port}" in (trial / "egress.log").read_text()


# -- 2. docker: the derived image ------------------------------------------------------
@pytest.mark.usefixtures("need_docker")
def test_docker_bakes_the_install_into_a_derived_image_once(
    claude_install: Path, tmp_path: Path
) -> None:
    tasks = [_task(tmp_path, "a"), _task(tmp_path, "b")]  # one image, two trials
    batch = _batch(tmp_path, tasks, _script(WRITE), provider="docker", n_concurrent=1)
    results = [json.loads(p.read_text()) for p in batch.output_dir.glob("*/result.json")]
    assert [r["reward"] for r in results] == [1.0, 1.0], [r.get("error") for r in results]
    installs = [json.loads(p.read_text()) for p in batch.output_dir.glob("*/agent/install.json")]
    assert [i["cached"] for i in installs] == [True, True]  # the session's install
    assert [i["placed"] for i in installs] == ["mounted", "mounted"]  # in the image: no upload
    listed = subprocess.run(
        ["docker", "images", "--filter", f"label={LABEL_AGENT_INSTALL}",
         "--filter", "label=helios.managed=true", "--format", "{{.Repository}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert AGENT_IMAGE_REPO in listed  # so `helios cleanup --images` removes it


# -- 3. the task's agent user ----------------------------------------------------------
@pytest.mark.parametrize("provider", ["local", "docker"])
def test_the_agent_runs_as_the_tasks_agent_user(
    claude_install: Path, tmp_path: Path, provider: str
) -> None:
    # docker runs the Dockerfile's useradd; local adds the user itself (uid 1000 up)
    task = _task(
        tmp_path, agent='user = "worker"\n',
        dockerfile="RUN useradd -m -u 1234 worker && chown worker /app\n",
    )  # fmt: skip
    command = f"echo who=$(id -un):$(id -u); {WRITE}"
    batch = _batch(tmp_path, [task], _script(command), provider=provider)
    trial, result = _trial(batch)
    assert result["reward"] == 1.0, result.get("error")
    found = re.findall(r"who=(\w+):(\d+)", (trial / "agent" / "claude-code.log").read_text())
    assert found and found[-1][0] == "worker" and found[-1][1] != "0", found
    if provider == "docker":
        assert found[-1][1] == "1234"


# -- 4. the hostile suite through an installed agent -----------------------------------
@pytest.mark.parametrize("name", ["rewriter", "preseeded-reward"])
@pytest.mark.usefixtures("need_bwrap")
def test_an_installed_agent_cannot_forge_the_reward(
    claude_install: Path, tmp_path: Path, name: str
) -> None:
    ctx = Context(root=tmp_path, host_dir=tmp_path, traversal_dir=tmp_path, port=0)
    (hostile,) = [h for h in catalogue(ctx) if h.name == name]
    task = _task(tmp_path, test=hostile.test)
    batch = _batch(tmp_path, [task], _script(hostile.solve.strip()))
    trial, result = _trial(batch)
    # an honest test.sh that writes no reward unless the task was solved
    assert (result.get("error") or {}).get("type") in (None, "RewardFileMissing"), result["error"]
    calls = [c for s in json.loads((trial / "agent" / "trajectory.json").read_text())["steps"]
             for c in s.get("tool_calls") or []]  # fmt: skip
    assert calls and calls[0]["function_name"] == "Bash"  # the hostile call was made
    assert result["reward"] == 0.0


# -- 5. a printed key, a hang ----------------------------------------------------------
@pytest.mark.parametrize("provider", ["local", "docker"])
def test_a_printed_key_is_redacted_and_a_hang_is_stopped_at_the_timeout(
    claude_install: Path, tmp_path: Path, provider: str
) -> None:
    task = _task(tmp_path)
    toml = task / "task.toml"
    # 15 s: Claude Code's start took over 6 s on a loaded machine (CI saw its log empty
    # at 8 s, less the 2 s the salvage margin takes)
    toml.write_text(toml.read_text().replace("timeout_sec = 120.0", "timeout_sec = 15.0"))
    bash = [{"name": "Bash", "arguments": {"command": c, "description": "run"}}
            for c in ("echo key=$ANTHROPIC_API_KEY; echo $ANTHROPIC_API_KEY > /app/key.txt",
                      "tail -f /dev/null")]  # fmt: skip
    script = {"scenarios": [{"match": "*", "turns": [{"tool_calls": [call]} for call in bash]}]}
    batch = _batch(tmp_path, [task], script, provider=provider)
    trial, result = _trial(batch)
    assert result["reward"] == 0.0
    assert "timeout" in json.dumps([result.get("error"), result.get("agent_error")]).lower()
    assert result["timings"]["agent"] < 30
    assert "key=[REDACTED]" in (trial / "agent" / "claude-code.log").read_text()
    for path in batch.output_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


# -- the endpoint rule the model's route adds to an allowlist --------------------------
def test_an_endpoint_allows_its_host_on_its_port_alone() -> None:
    from helios.environments.egress import DENY_ALL, AllowList

    route = DENY_ALL.with_endpoint("127.0.0.1", 8080)
    assert route.verdict("127.0.0.1", 8080) is None
    assert route.verdict("127.0.0.1", 8081) is not None  # another port of the same host
    assert route.verdict("127.0.0.1") is not None  # no port said: no endpoint matches
    assert route.verdict("localhost", 8080) is not None  # matched as the client names it
    named = AllowList(("pypi.org",)).with_endpoint("API.Example.com.", 443)
    assert named.verdict("api.example.com", 443) is None
    assert named.verdict("pypi.org", 8443) is None  # the task's own rules: every port
    assert named.with_endpoint("api.example.com", 443) == named
    assert named.record()["endpoints"] == ["api.example.com:443"]
    assert DENY_ALL.with_endpoint("::1", 9).record()["endpoints"] == ["[::1]:9"]


def test_docker_starts_a_no_network_sandbox_behind_a_deny_all_proxy(
    claude_install: Path,
) -> None:
    import asyncio

    from helios.environments.egress import DENY_ALL
    from helios.environments.spec import SandboxSpec
    from helios.models.routing import ModelSpec

    class Services:
        spec = ModelSpec("anthropic", "m", "anthropic", "http://127.0.0.1:9", "k")

    agent = ClaudeCodeAgent()

    def prepared(provider: str, **spec: Any) -> SandboxSpec:
        return asyncio.run(agent.prepare_sandbox(
            SandboxSpec(**spec), provider=provider, services=Services(),  # type: ignore[arg-type]
            logs_dir=None,
        ))  # fmt: skip

    docker = prepared("docker")
    assert docker.network == DENY_ALL
    assert docker.agent_installs == ((claude_install / ClaudeCodeAgent.payload, agent.home),)
    assert prepared("local").network is False  # local switches per command
    assert prepared("docker", network=True).network is True


def test_cleanup_images_removes_the_derived_images_before_their_parents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    import helios.environments.docker.cleanup as cleanup

    calls: list[str] = []

    async def fake(*args: str, **_: Any) -> tuple[int, str, str]:
        calls.append(" ".join(args))
        if f"label={LABEL_AGENT_INSTALL}" in args:
            return 0, "child\n", ""
        return 0, ("child\nparent\n" if args[0] == "images" else ""), ""

    monkeypatch.setattr(cleanup, "docker", fake)
    assert asyncio.run(cleanup.remove_images()) == ["child", "parent"]
    assert [c for c in calls if c.startswith("rmi")] == ["rmi -f child", "rmi -f parent"]
