"""Docker provider: one container per trial, images built once per environment hash.

Everything goes through the `docker` CLI as asyncio subprocesses, so the event
loop never blocks. Containers carry labels so `helios cleanup` can find
leftovers; `stop` removes the container whatever happened before.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shlex
import shutil
from pathlib import Path
from typing import ClassVar

from helios._proc import decode, last_line, run_process
from helios.environments import _tar
from helios.environments.base import Environment, ExecResult
from helios.environments.spec import SandboxSpec
from helios.errors import (
    EnvironmentBuildError,
    EnvironmentExecError,
    EnvironmentStartError,
    EnvironmentUnavailable,
    PhaseTimeout,
)

LABEL_MANAGED = "helios.managed"
LABEL_RUN = "helios.run"
LABEL_TRIAL = "helios.trial"
IMAGE_REPO = "helios-env"
#: docker CLI calls that should be instant still get a bound, so a hung daemon
#: shows up as an error instead of a stuck batch
CONTROL_TIMEOUT = 120.0


def docker_binary() -> str:
    return os.environ.get("HELIOS_DOCKER", "docker")


async def docker(
    *args: str, timeout: float | None = CONTROL_TIMEOUT, stdin: bytes | None = None
) -> tuple[int, str, str]:
    result = await run_process([docker_binary(), *args], timeout=timeout, stdin=stdin)
    if result.timed_out:
        raise EnvironmentExecError(f"docker {args[0]} did not answer within {timeout:g}s")
    return result.returncode, decode(result.stdout), decode(result.stderr)


class _ImageBuilds:
    """Builds each environment once per process, however many trials ask at once."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._ready: set[str] = set()

    async def ensure(self, tag: str, context: Path, timeout: float) -> None:
        if tag in self._ready:
            return
        lock = self._locks.setdefault(tag, asyncio.Lock())
        async with lock:
            if tag in self._ready:
                return
            code, _, _ = await docker("image", "inspect", tag)
            if code != 0:
                await self._build(tag, context, timeout)
            self._ready.add(tag)

    async def _build(self, tag: str, context: Path, timeout: float) -> None:
        args = ["build", "-q", "-t", tag, "--label", f"{LABEL_MANAGED}=true"]
        build_network = os.environ.get("HELIOS_DOCKER_BUILD_NETWORK")
        if build_network:
            args += ["--network", build_network]
        result = await run_process([docker_binary(), *args, str(context)], timeout=timeout)
        if result.timed_out:
            raise PhaseTimeout("build", timeout)
        if result.returncode != 0:
            tail = decode(result.stderr).strip().splitlines()[-3:]
            raise EnvironmentBuildError(f"docker build of {context} failed: {' | '.join(tail)}")


_builds = _ImageBuilds()


class DockerEnvironment(Environment):
    name: ClassVar[str] = "docker"

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        super().__init__(spec, trial_id=trial_id, run_id=run_id)
        self.container: str | None = None
        self._has_timeout = False

    @classmethod
    async def preflight(cls) -> None:
        if shutil.which(docker_binary()) is None:
            raise EnvironmentUnavailable(
                "docker CLI not found: install Docker (Debian: apt-get install docker.io) "
                "or use --provider local"
            )
        code, _, err = await docker("info", "--format", "{{.ServerVersion}}", timeout=30)
        if code != 0:
            raise EnvironmentUnavailable(
                f"Docker engine not reachable ({last_line(err, 'no answer')}): "
                "start dockerd or use --provider local"
            )

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        return await remove_containers(run_id)

    @property
    def container_name(self) -> str:
        return f"helios-{self.run_id[:8]}-{self.trial_id}"

    @property
    def image(self) -> str:
        if self.spec.dockerfile is not None:
            return f"{IMAGE_REPO}:{self.spec.context_hash[:16]}"
        if self.spec.image is None:
            raise EnvironmentStartError("the sandbox spec names no image and no build context")
        return self.spec.image

    async def build(self) -> None:
        context = self.spec.build_context
        if self.spec.dockerfile is None or context is None:
            return
        await _builds.ensure(self.image, context, self.spec.build_timeout)

    def _run_args(self) -> list[str]:
        spec = self.spec
        cpus = min(spec.cpus, float(os.cpu_count() or 1))
        # With the network allowed, use the engine's default unless told otherwise.
        network = os.environ.get("HELIOS_DOCKER_NETWORK") if spec.network else "none"
        env_args = [arg for key, value in spec.env.items() for arg in ("-e", f"{key}={value}")]
        return [
            "run", "-d", "--name", self.container_name,
            "--label", f"{LABEL_MANAGED}=true",
            "--label", f"{LABEL_RUN}={self.run_id}",
            "--label", f"{LABEL_TRIAL}={self.trial_id}",
            "--cpus", f"{cpus:g}", "--memory", f"{spec.memory_mb}m",
            # a fork bomb in one trial must not starve the host or the other trials
            "--pids-limit", str(spec.pids),
            *env_args,
            *(["--network", network] if network else []),
            "--entrypoint", "sleep",
            self.image, "infinity",
        ]  # fmt: skip

    async def start(self) -> None:
        code, out, err = await docker(*self._run_args())
        if code != 0:
            # `docker run -d` can fail after creating the container: remove by name.
            await docker("rm", "-f", self.container_name)
            raise EnvironmentStartError(f"docker run failed: {last_line(err, f'exit {code}')}")
        self.container = out.strip()
        setup = await self.exec(
            f"mkdir -p /logs/agent /logs/verifier {shlex.quote(self.workdir)}; "
            "command -v timeout >/dev/null && echo has-timeout",
            cwd="/",
        )
        if setup.exit_code != 0:
            raise EnvironmentStartError(f"container setup failed: {setup.stderr.strip()[:200]}")
        self._has_timeout = "has-timeout" in setup.stdout

    def _require_container(self) -> str:
        if self.container is None:
            raise EnvironmentExecError("container is not running")
        return self.container

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        container = self._require_container()
        args = ["exec", "-i", "-w", cwd or self.workdir]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        inner = ["sh", "-c", command]
        if timeout is not None and self._has_timeout:
            # Kill inside the container too: killing the docker client alone
            # would leave the command running there.
            inner = ["timeout", "-k", "5", f"{timeout:g}", *inner]
        client_timeout = None if timeout is None else timeout + 15
        result = await run_process(
            [docker_binary(), *args, container, *inner], timeout=client_timeout
        )
        if result.returncode != 0 and result.stderr.startswith(b"Error response from daemon"):
            # The container itself is gone or broken: not the command's failure.
            raise EnvironmentExecError(decode(result.stderr).strip()[:300])
        timed_out = result.timed_out or (timeout is not None and result.returncode == 124)
        return ExecResult(
            decode(result.stdout), decode(result.stderr), result.returncode, timed_out
        )

    async def upload(self, src: Path, dst: str) -> None:
        container = self._require_container()
        # Named by its full path and unpacked at /, so docker makes missing parent
        # folders itself: one process per upload, no separate mkdir.
        arcname = posixpath.normpath(dst).strip("/") or "."
        data = await asyncio.to_thread(_tar.pack, src, arcname)
        code, _, err = await docker("cp", "-", f"{container}:/", stdin=data)
        if code != 0:
            raise EnvironmentExecError(f"upload to {dst} failed: {err.strip()[:200]}")

    async def download(self, src: str, dst: Path) -> None:
        container = self._require_container()
        result = await run_process(
            [docker_binary(), "cp", f"{container}:{src}", "-"], timeout=CONTROL_TIMEOUT
        )
        if result.returncode != 0 or result.timed_out:
            raise EnvironmentExecError(
                f"download of {src} failed: {decode(result.stderr).strip()[:200]}"
            )
        await asyncio.to_thread(_tar.unpack_stripped, result.stdout, dst)

    async def stop(self) -> None:
        target = self.container or self.container_name
        self.container = None
        # Shielded: a Ctrl-C arriving now must not leave the container behind.
        await asyncio.shield(docker("rm", "-f", "-v", target))


async def remove_containers(run_id: str | None = None) -> list[str]:
    """Remove Helios containers (of one run, or all); return their names."""
    label = f"{LABEL_RUN}={run_id}" if run_id else f"{LABEL_MANAGED}=true"
    code, out, err = await docker("ps", "-a", "-q", "--filter", f"label={label}")
    if code != 0:
        raise EnvironmentUnavailable(f"docker ps failed: {err.strip()[:200]}")
    ids = out.split()
    if ids:
        await docker("rm", "-f", "-v", *ids)
    return ids


async def remove_images() -> list[str]:
    code, out, _ = await docker("images", "-q", "--filter", f"label={LABEL_MANAGED}=true")
    ids = sorted(set(out.split()))
    if code == 0 and ids:
        await docker("rmi", "-f", *ids)
    return ids
