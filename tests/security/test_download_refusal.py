"""A download the host refuses mid-stream (issue 18) stops the command in the sandbox
at once, and the sandbox stays usable: the artifacts and the verifier's logs are
read from it next.

The sandbox's own measurement (`size_check`) is turned off here, as when an image
has no GNU find or its tools lie, and the bound is 8 MiB: the host's bound on the
stream decides. Before, on docker's stream, the refusal removed the container, and
`docker rm` waited 120 s on the output nobody read; on local, the shell's end
waited 5 s on the same, then the sandbox counted as dirty (a scan of the host's
processes at its end)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import helios.environments.docker.api as _docker_api
import helios.environments.docker.environment as docker
import helios.environments.local.environment as local
import helios.environments.shell.transfer as _shell_transfer
from helios.environments.base import ROOT, Environment
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.environments.shell.safe_copy import Bounds, UnsafeDownload
from helios.environments.spec import SandboxSpec

BOUND = 8 << 20
#: every process of the sandbox, one command line a line
PROCESSES = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"


@pytest.fixture
def host_bound_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def unmeasured(*args: object) -> None:
        return None

    monkeypatch.setattr(_shell_transfer, "size_check", lambda path, bounds: ":", raising=False)
    monkeypatch.setattr(_docker_api, "_measure", unmeasured, raising=False)
    for module in (_shell_transfer, docker, local):
        monkeypatch.setattr(module, "Bounds", lambda: Bounds(max_bytes=BOUND), raising=False)
    yield


def _sandbox(provider: str, request: pytest.FixtureRequest,
             monkeypatch: pytest.MonkeyPatch) -> Environment:  # fmt: skip
    trial = uuid.uuid4().hex[:8]
    if provider == "local":
        request.getfixturevalue("need_bwrap")
        return LocalEnvironment(SandboxSpec(), trial_id=trial, run_id="refusal")
    request.getfixturevalue("need_docker")
    if provider == "docker-api":
        monkeypatch.setenv("HELIOS_DOCKER_SHELL", "0")
    spec = SandboxSpec(image="debian:bookworm-slim")
    return DockerEnvironment(spec, trial_id=trial, run_id="refusal")


@pytest.mark.usefixtures("host_bound_only")
@pytest.mark.parametrize("provider", ["local", "docker", "docker-api"])
def test_a_refused_download_stops_its_command_at_once(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    env = _sandbox(provider, request, monkeypatch)

    async def go() -> None:
        await env.start()
        try:
            made = await env.exec(
                "mkdir -p /logs/artifacts && echo ok > /logs/artifacts/ok.txt && "
                "truncate -s 1500M /logs/artifacts/big", cwd="/", user=ROOT,
            )  # fmt: skip
            assert made.ok, made
            started = time.monotonic()
            with pytest.raises(UnsafeDownload, match=f"larger than {BOUND} bytes"):
                await env.download("/logs/artifacts", tmp_path / "out")
            assert time.monotonic() - started < 30  # before: 125 s on docker's stream
            after = await env.exec(PROCESSES, cwd="/", user=ROOT, timeout=30)
            assert after.ok, after  # the sandbox is still there, with its files
            assert not any(line.startswith("tar ") for line in after.stdout.splitlines())
            assert (await env.exec("cat /logs/artifacts/ok.txt", cwd="/")).stdout == "ok\n"
            if isinstance(env, LocalEnvironment):
                assert not env._pool.dirty  # its shell ended at once, by its pidfd
        finally:
            await env.stop()

    asyncio.run(go())


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_the_verifiers_logs_past_the_bound_are_refused_as_they_stream(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    """test.sh and the download of /logs/verifier run as one command, with no
    measurement in the sandbox: logs past the host's bound are refused mid-stream,
    the command's own output and status are kept, nothing of the tree lands on the
    host, no tar is left running, and the sandbox stays usable."""
    for module in (_shell_transfer, docker, local):
        monkeypatch.setattr(module, "Bounds", lambda: Bounds(max_bytes=BOUND), raising=False)
    env = _sandbox(provider, request, monkeypatch)

    async def go() -> None:
        await env.start()
        try:
            assert (await env.exec("mkdir -p /logs/verifier", cwd="/", user=ROOT)).ok
            started = time.monotonic()
            fetched = await env.exec_then_download(
                "echo judged; head -c 20000000 /dev/zero > /logs/verifier/big; exit 3",
                "/logs/verifier", tmp_path / "logs",
            )  # fmt: skip
            assert time.monotonic() - started < 30
            assert isinstance(fetched.refused, UnsafeDownload), fetched
            assert f"larger than {BOUND} bytes" in str(fetched.refused)
            assert fetched.skipped is None
            assert (fetched.result.stdout, fetched.result.exit_code) == ("judged\n", 3)
            assert not (tmp_path / "logs" / "big").exists()
            after = await env.exec(PROCESSES, cwd="/", user=ROOT, timeout=30)
            assert after.ok, after
            assert not any(line.startswith("tar ") for line in after.stdout.splitlines())
            if isinstance(env, LocalEnvironment):
                assert not env._pool.dirty
        finally:
            await env.stop()

    asyncio.run(go())
