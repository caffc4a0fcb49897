"""Docker provider: one container per trial, images built once per environment hash.

A trial's many calls (execs, copies, kill and start, remove) go to the Engine API
through aiodocker (`_docker_api`); the rare ones (run, build, inspect, cleanup)
through the `docker` CLI as asyncio subprocesses. The event loop never blocks.
Containers carry labels so `helios cleanup` can find leftovers; `stop` removes
the container whatever happened before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import re
import secrets
import shlex
import shutil
from pathlib import Path
from typing import ClassVar

import aiodocker

from helios._proc import decode, last_line, run_to_end
from helios.environments import _docker_api, _tar
from helios.environments._docker_cleanup import cleanup_containers, remove_images
from helios.environments._docker_cli import (
    CONTROL_TIMEOUT,
    IMAGE_REPO,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_TRIAL,
    ImageBuilds,
    docker,
    docker_binary,
)
from helios.environments._owner import current_owner
from helios.environments._safe_copy import Bounds
from helios.environments.base import ROOT, Environment, ExecResult, User
from helios.environments.spec import SandboxSpec
from helios.errors import (
    EnvironmentExecError,
    EnvironmentStartError,
    EnvironmentUnavailable,
)

__all__ = ["CONTROL_TIMEOUT", "DockerEnvironment", "docker", "remove_containers", "remove_images"]

#: kept for callers (and tests) of the earlier private name
_ImageBuilds = ImageBuilds
_builds = ImageBuilds()
#: each image's USER (its default user), by image name
_image_users: dict[str, str] = {}
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")


def _name_part(text: str, size: int) -> str:
    return _NAME_UNSAFE.sub("-", text)[:size] or "x"


log = logging.getLogger(__name__)


class DockerEnvironment(Environment):
    name: ClassVar[str] = "docker"
    supports_users: ClassVar[bool] = True
    #: does this engine take `--storage-opt size=`? (overlay2 only on xfs with pquota)
    storage_opt: ClassVar[bool | None] = None

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        super().__init__(spec, trial_id=trial_id, run_id=run_id)
        self.container: str | None = None
        self._has_timeout = False
        #: this loop's Engine API client while the container may exist
        self._client: aiodocker.Docker | None = None
        #: ours alone: a container is removed by name only if it carries this token
        self.instance = secrets.token_hex(6)

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
        client = _docker_api.acquire()
        try:  # the Engine API too: a trial's execs and copies go there
            await _docker_api.control("info", client.system.info(), timeout=30)
        except EnvironmentExecError as exc:
            raise EnvironmentUnavailable(
                f"Docker Engine API not reachable ({exc}): check DOCKER_HOST"
            ) from None
        finally:
            await _docker_api.release(client)

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        return await cleanup_containers(run_id, force=force)

    @property
    def container_name(self) -> str:
        # Unique across runs and across objects: two batches never share a name.
        run, trial = _name_part(self.run_id, 36), _name_part(self.trial_id, 40)
        return f"helios-{run}-{trial}-{self.instance}"

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

    def _run_args(self, with_storage: bool) -> list[str]:
        spec = self.spec
        cpus = min(spec.cpus, float(os.cpu_count() or 1))
        # With the network allowed, use the engine's default unless told otherwise.
        network = os.environ.get("HELIOS_DOCKER_NETWORK") if spec.network else "none"
        env_args = [arg for key, value in spec.env.items() for arg in ("-e", f"{key}={value}")]
        storage = ["--storage-opt", f"size={spec.storage_mb}m"] if with_storage else []
        return [
            "run", "-d", "--name", self.container_name,
            "--label", f"{LABEL_MANAGED}=true",
            "--label", f"{LABEL_RUN}={self.run_id}",
            "--label", f"{LABEL_TRIAL}={self.trial_id}",
            "--label", f"{LABEL_OWNER}={current_owner().label()}",
            "--label", f"{LABEL_INSTANCE}={self.instance}",
            "--cpus", f"{cpus:g}", "--memory", f"{spec.memory_mb}m",
            # a fork bomb in one trial must not starve the host or the other trials
            "--pids-limit", str(spec.pids),
            *storage,
            *env_args,
            *(["--network", network] if network else []),
            "--entrypoint", "sleep",
            self.image, "infinity",
        ]  # fmt: skip

    async def _run(self) -> tuple[int, str, str]:
        """`docker run`, with the storage limit where the engine supports it."""
        cls = DockerEnvironment
        with_storage = self.spec.storage_mb is not None and cls.storage_opt is not False
        code, out, err = await docker(*self._run_args(with_storage))
        if with_storage and code != 0 and "storage-opt" in err:
            # e.g. overlay2 on ext4: the limit cannot be had here (see the README).
            cls.storage_opt = False
            log.warning(
                "docker: storage_mb=%s is not enforced: this engine takes no --storage-opt size "
                "(overlay2 needs xfs with pquota); trials run without a disk limit",
                self.spec.storage_mb,
            )
            await self._remove_own()
            code, out, err = await docker(*self._run_args(False))
        elif with_storage and code == 0:
            cls.storage_opt = True
        return code, out, err

    async def start(self) -> None:
        code, out, err = await self._run()
        if code != 0:
            # `docker run -d` can fail after creating the container: remove it,
            # by name, only once it is known to be ours.
            await self._remove_own()
            raise EnvironmentStartError(f"docker run failed: {last_line(err, f'exit {code}')}")
        self.container = out.strip()
        await self._setup()

    async def _setup(self) -> None:
        setup = await self.exec(
            f"mkdir -p /logs/agent /logs/verifier {shlex.quote(self.workdir)}; "
            "command -v timeout >/dev/null && echo has-timeout",
            cwd="/",
            # as root even when the image's USER is not: these folders are Helios's
            user=ROOT,
        )
        if setup.exit_code != 0:
            raise EnvironmentStartError(f"container setup failed: {setup.stderr.strip()[:200]}")
        self._has_timeout = "has-timeout" in setup.stdout

    async def _remove_own(self) -> None:
        """Remove the container of our name if it carries our run and instance labels."""
        labels = (
            f'{{{{.Id}}}}\t{{{{index .Config.Labels "{LABEL_RUN}"}}}}'
            f'\t{{{{index .Config.Labels "{LABEL_INSTANCE}"}}}}'
        )
        code, out, _ = await docker(
            "container", "inspect", "--format", labels, self.container_name
        )
        if code != 0:
            return  # no container of that name
        cid, run, instance = [*out.strip().split("\t"), "", ""][:3]
        if run == self.run_id and instance == self.instance:
            await docker("rm", "-f", "-v", cid)

    async def default_owner(self) -> User | None:
        """The image's USER, read once per image (no exec in the container)."""
        image = self.image
        if image not in _image_users:
            code, out, err = await docker("image", "inspect", "--format", "{{.Config.User}}", image)
            if code != 0:
                raise EnvironmentExecError(f"cannot inspect {image}: {last_line(err, 'no answer')}")
            _image_users[image] = out.strip().split(":", 1)[0]
        user = _image_users[image]
        return None if user in ("", "0", "root") else user

    async def stop_processes(self) -> None:
        """SIGKILL the container's pid 1, which kills every process in its pid
        namespace (setsid, nohup and double forks included), then start it again
        with its entrypoint alone."""
        handle = self._engine.containers.container(self._require_container())
        try:
            await _docker_api.control("kill", handle.kill())
        except EnvironmentExecError as exc:
            if "is not running" not in str(exc):
                raise EnvironmentExecError(f"could not stop the agent's processes: {exc}") from None
        try:
            await _docker_api.control("start", handle.start())
        except EnvironmentExecError as exc:
            raise EnvironmentExecError(f"could not restart the container: {exc}") from None
        running = await _docker_api.process_count(self._engine, handle.id)
        if running != 1:
            raise EnvironmentExecError(
                f"{running} processes run in the container after its restart, expected 1"
            )

    def _require_container(self) -> str:
        if self.container is None:
            raise EnvironmentExecError("container is not running")
        return self.container

    @property
    def _engine(self) -> aiodocker.Docker:
        if self._client is None:
            self._client = _docker_api.acquire()
        return self._client

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        user: User | None = None,
    ) -> ExecResult:
        container = self._require_container()
        inner = ["sh", "-c", command]
        if timeout is not None and self._has_timeout:
            # Kill inside the container too: the client giving up alone would leave
            # the command running there.
            inner = ["timeout", "-k", "5", f"{timeout:g}", *inner]
        # The container itself gone or broken raises EnvironmentExecError: not the
        # command's failure.
        result = await _docker_api.exec_command(
            self._engine, container, inner, user="" if user is None else str(user),
            workdir=cwd or self.workdir, env=env or {},
            timeout=None if timeout is None else timeout + 15,
        )  # fmt: skip
        if user is not None and result.returncode == 126 and _docker_api.NO_USER in result.stderr:
            raise EnvironmentExecError(f"user {user!r} does not exist in the sandbox")
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
        try:
            await _docker_api.upload(self._engine, container, data)
        except EnvironmentExecError as exc:
            raise EnvironmentExecError(f"upload to {dst} failed: {exc}") from None

    async def download(self, src: str, dst: Path) -> None:
        container = self._require_container()
        await _docker_api.download(self._engine, container, src, dst, Bounds())

    async def stop(self) -> None:
        # To its end: a Ctrl-C arriving now must not leave the container behind.
        await run_to_end(self._stop())

    async def _stop(self) -> None:
        container, self.container = self.container, None
        try:
            if container is not None:
                # the id our own `docker run` returned: ours by construction
                try:
                    await _docker_api.remove(self._engine, container)
                except EnvironmentExecError:
                    # The API failed (hung, or unreachable where the CLI is not): the
                    # CLI that made the container may still remove it.
                    with contextlib.suppress(EnvironmentExecError):
                        await docker("rm", "-f", "-v", container)
            else:
                await self._remove_own()
        finally:
            client, self._client = self._client, None
            if client is not None:
                await _docker_api.release(client)


async def remove_containers(run_id: str | None = None, *, force: bool = False) -> list[str]:
    """Remove the containers of one run, or those whose owner is gone; return their ids."""
    return await cleanup_containers(run_id, force=force)
