"""Docker provider: one container per trial, images built once per environment hash.

The container's init is Helios's shell server (`docker.shell`): a trial's
commands, copies and process stop go over one `docker run -i` stream. Without
it (no static build, a remote daemon), the many calls go to the Engine API
(`docker.api`) and the rare ones (run, build, inspect, cleanup) to the `docker`
CLI. Containers carry labels so `helios cleanup` can find leftovers; `stop`
removes the container whatever happened before.

Its services and the stop of its processes that spares them: `docker.services`.
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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import aiodocker

import helios.environments.docker.api as _docker_api
import helios.environments.docker.services as _docker_services
import helios.environments.docker.shell as _docker_shell
import helios.environments.shell.tar as _tar
from helios._proc import last_line, run_to_end
from helios.environments.base import ROOT, ExecResult, FileSteps, User
from helios.environments.docker.agent_image import derived_image
from helios.environments.docker.cleanup import cleanup_containers, remove_images
from helios.environments.docker.cli import (
    CONTROL_TIMEOUT,
    IMAGE_REPO,
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_TRIAL,
    ImageBuilds,
    check_desktop_image,
    docker,
    docker_binary,
)
from helios.environments.docker.compose import (
    ComposeProject,
    ComposeService,
    StorageRefused,
    cleanup_compose,
    project_name,
)
from helios.environments.docker.egress import DockerEgress, remove_networks
from helios.environments.docker.image_config import ENTRYPOINT_SERVICE, ImageConfig
from helios.environments.docker.services import EXCHANGE_MOUNT, ContainerServices
from helios.environments.docker.shell import ContainerShell
from helios.environments.egress import AllowList, Network
from helios.environments.health import OUTPUT_TAIL
from helios.environments.shell.client import SERVICE_LOGS, ShellUnavailable, Sink
from helios.environments.shell.owner import current_owner
from helios.environments.shell.safe_copy import Bounds
from helios.environments.spec import SandboxSpec
from helios.errors import (
    EnvironmentExecError,
    EnvironmentStartError,
    EnvironmentUnavailable,
    EnvironmentUnhealthy,
)
from helios.settings import current as helios_settings

__all__ = ["CONTROL_TIMEOUT", "DockerEnvironment", "docker", "remove_containers", "remove_images"]

_builds = ImageBuilds()
#: what each image says (its USER, WORKDIR, ENTRYPOINT), by image name
_image_configs: dict[str, ImageConfig] = {}
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")
#: seconds the image's ENTRYPOINT must run after its start (`docker compose up
#: --wait`, Harbor's start, first looks at its containers after half a second)
ENTRYPOINT_SETTLE = 0.5
#: seconds between two looks meanwhile: one that exits at once is seen at once
ENTRYPOINT_POLL = 0.05
#: the lines of its output an ENTRYPOINT that exited is reported with
ENTRYPOINT_LINES = 5


def _name_part(text: str, size: int) -> str:
    return _NAME_UNSAFE.sub("-", text)[:size] or "x"


log = logging.getLogger(__name__)


class DockerEnvironment(ContainerServices):
    name: ClassVar[str] = "docker"
    supports_users: ClassVar[bool] = True
    #: a network of the trial's own whose one way out is its proxy (`docker.egress`)
    supports_allowlist: ClassVar[bool] = True
    supports_compose: ClassVar[bool] = True
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
        #: the stream to the container's init, when it is Helios's shell server
        self._shell: ContainerShell | None = None
        self._has_tar = False
        self._services, self._exchange = {}, None  # (see ContainerServices)
        #: an allowlisted network's own docker network and proxy
        self._egress = DockerEgress()
        #: the image's working directory, once read (`SandboxSpec.workdir_from_image`)
        self._image_workdir: str | None = None
        #: the trial's compose project, when its spec has a compose file
        self._compose: ComposeProject | None = None
        #: a compose task's `main` image when its file gives it (Helios builds none)
        self._main_image: str | None = None
        #: the task's image with the spec's agent installs in it (`docker.agent_image`)
        self._agent_image: str | None = None

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
        run = None if run_id is None else _name_part(run_id, 36)
        exchanges = await _docker_services.remove_exchanges(run)
        containers = await cleanup_containers(run_id, force=force)
        # their networks and volumes, once their containers are gone
        return [*containers, *exchanges, *await cleanup_compose(run_id, force=force),
                *await remove_networks(run_id, force=force)]

    @property
    def container_name(self) -> str:
        # Unique across runs and across objects: two batches never share a name.
        run, trial = _name_part(self.run_id, 36), _name_part(self.trial_id, 40)
        return f"helios-{run}-{trial}-{self.instance}"

    @property
    def image(self) -> str:
        if self._agent_image is not None:
            return self._agent_image
        return self._task_image

    @property
    def _task_image(self) -> str:
        if self._main_image is not None:
            return self._main_image
        if self.spec.dockerfile is not None:
            return f"{IMAGE_REPO}:{self.spec.context_hash[:16]}"
        if self.spec.image is None:
            raise EnvironmentStartError("the sandbox spec names no image and no build context")
        return self.spec.image

    async def build(self) -> None:
        context = self.spec.build_context
        if self.spec.dockerfile is None or context is None:
            if self.spec.image is not None:  # a prebuilt image: the desktop's is never pulled
                await check_desktop_image(self.spec.image)
        else:
            await _builds.ensure(self._task_image, context, self.spec.build_timeout)
        # a compose task's `main` too, when Helios gives its image (else: uploaded)
        if self.spec.agent_installs and (self.spec.compose_file is None or self._own_main):
            self._agent_image = await derived_image(
                self._task_image, self.spec.agent_installs, self.spec.build_timeout
            )

    def _run_args(self, with_storage: bool, server: Path | None = None,
                  user: str = "") -> list[str]:  # fmt: skip
        """`docker run`'s arguments: detached with a shell that reaps as its init
        (`docker.api.INIT_LOOP`), or, given the shell server, attached with the
        server as its init (`docker.shell`)."""
        spec = self.spec
        cpus = min(spec.cpus, float(os.cpu_count() or 1))
        # With the network allowed, use the engine's default unless told otherwise.
        network = helios_settings().docker_network if spec.network is True else "none"
        env_args = [arg for key, value in spec.env.items() for arg in ("-e", f"{key}={value}")]
        storage = ["--storage-opt", f"size={spec.storage_mb}m"] if with_storage else []
        if server is None:
            mode, init, args = ["-d"], ["--entrypoint", "sh"], ["-c", _docker_api.INIT_LOOP]
        else:
            (mode, args), init = _docker_shell.run_options(server, user), []
        exchange = self._exchange
        if exchange is not None:
            init = [*init, "--mount", f"type=bind,source={exchange},target={EXCHANGE_MOUNT}"]
        return [
            "run", *mode, "--name", self.container_name,
            *(arg for key, value in self._labels().items()
               for arg in ("--label", f"{key}={value}")),
            "--cpus", f"{cpus:g}", "--memory", f"{spec.memory_mb}m",
            # a fork bomb in one trial must not starve the host or the other trials
            "--pids-limit", str(spec.pids),
            *storage,
            *env_args,
            *self._network_args(network),
            *init,
            self.image, *args,
        ]  # fmt: skip

    def _network_args(self, network: str | None) -> list[str]:
        if self._egress.active:
            return self._egress.run_args()
        return ["--network", network] if network else []

    def _storage_refused(self, with_storage: bool, ok: bool, err: str) -> bool:
        """Record whether this engine takes the storage limit, from a `docker run`'s
        outcome; True when it failed for that limit alone (then it goes)."""
        if not with_storage:
            return False
        refused = not ok and "storage-opt" in err
        if ok or refused:
            DockerEnvironment.storage_opt = ok
        if refused:
            # e.g. overlay2 on ext4: the limit cannot be had here (see the README).
            log.warning(
                "docker: storage_mb=%s is not enforced: this engine takes no --storage-opt size "
                "(overlay2 needs xfs with pquota); trials run without a disk limit",
                self.spec.storage_mb,
            )
        return refused

    @property
    def _with_storage(self) -> bool:
        return self.spec.storage_mb is not None and DockerEnvironment.storage_opt is not False

    async def _run(self) -> tuple[int, str, str]:
        """`docker run -d`, with the storage limit where the engine supports it."""
        with_storage = self._with_storage
        code, out, err = await docker(*self._run_args(with_storage))
        if self._storage_refused(with_storage, code == 0, err):
            await self._remove_own()
            code, out, err = await docker(*self._run_args(False))
        return code, out, err

    async def _start_shell(self, server: Path) -> ContainerShell | None:
        """The container with the shell server as its init, ready for commands; None
        when this engine cannot run the server (the Engine API path then)."""
        user = await self._image_user()
        with_storage = self._with_storage
        while True:
            argv = [docker_binary(), *self._run_args(with_storage, server, user)]
            shell = ContainerShell(argv, self._remove_own, self._kill_by_exec)
            try:
                await shell.start()
            except ShellUnavailable as exc:
                if _docker_shell.give_up(str(exc)):
                    return None
                if not self._storage_refused(with_storage, False, str(exc)):
                    reason = _docker_shell.stream_reason(str(exc))
                    raise EnvironmentStartError(f"docker run failed: {reason}") from None
                with_storage = False
                continue
            self._storage_refused(with_storage, True, "")
            return shell

    @property
    def workdir(self) -> str:
        return self._image_workdir or self.spec.workdir

    def _labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED: "true",
            LABEL_RUN: self.run_id,
            LABEL_TRIAL: self.trial_id,
            LABEL_OWNER: current_owner().label(),
            LABEL_INSTANCE: self.instance,
        }

    @property
    def _own_main(self) -> bool:
        """Whether Helios gives a compose task's `main` its image (the task's
        Dockerfile or image), not the task's compose file."""
        return self.spec.dockerfile is not None or self.spec.image is not None

    def direct_hosts(self) -> tuple[str, ...]:
        if self._compose is not None:
            return self._compose.direct_hosts
        return super().direct_hosts()

    async def _start_compose(self) -> None:
        """`main` and its sidecars, by `docker compose` (`docker.compose`): main's
        commands then go to the Engine API, as without the shell server."""
        spec = self.spec
        own = self._own_main
        await self._make_exchange(_name_part(self.run_id, 36))  # `--watch`'s VNC socket
        if isinstance(spec.network, AllowList):  # every service behind the trial's proxy
            await self._egress.open(self.container_name, self.run_id, spec.network)
        with_storage = self._with_storage
        while True:
            project = ComposeProject(
                spec, name=project_name(self.run_id, self.trial_id, self.instance),
                labels=self._labels(), image=self.image if own else None,
                storage=with_storage, exchange=self._exchange,
                egress=self._egress if self._egress.active else None,
            )  # fmt: skip
            self._compose = project
            try:
                self.container = await project.up()
            except StorageRefused:  # as `docker run`: once without, and it is remembered
                await project.down()
                with_storage = not self._storage_refused(with_storage, False, "storage-opt")
                continue
            except BaseException:
                await run_to_end(self._stop())
                raise
            self._storage_refused(with_storage, True, "")
            break
        if not own:
            code, out, err = await docker("container", "inspect", "--format",
                                          "{{.Config.Image}}", self.container)  # fmt: skip
            if code != 0:
                raise EnvironmentStartError(f"cannot inspect main: {last_line(err, '')}")
            self._main_image = out.strip()
        image = await self._read_image()
        await self._setup()
        # in `main`, as Harbor's compose runs it: the file's own entrypoint and command
        # for `main` in place of the image's and Harbor's, where it gives them
        await self._start_entrypoint(image, project.main_entrypoint, project.main_command)

    async def compose_service(self, name: str) -> ComposeService:
        """A running sidecar of this compose sandbox (EnvironmentExecError if none)."""
        if self._compose is None:
            raise EnvironmentExecError(f"no compose service {name!r}: the task has no compose file")
        return await self._compose.service(name, self._engine)

    async def start(self) -> None:
        if self.spec.compose_file is not None:
            await self._start_compose()
            return
        image = await self._read_image()
        await self._make_exchange(_name_part(self.run_id, 36))
        if isinstance(self.spec.network, AllowList):
            await self._egress.open(self.container_name, self.run_id, self.spec.network)
        await self._start_container()
        await self._setup()
        await self._start_entrypoint(image)

    async def _start_container(self) -> None:
        server = _docker_shell.server_path()
        if server is not None:
            self._shell = await self._start_shell(server)
            if self._shell is not None:
                self.container = self.container_name
                return
        code, out, err = await self._run()
        if code != 0:
            # `docker run -d` can fail after creating the container: remove it,
            # by name, only once it is known to be ours.
            await self._remove_own()
            raise EnvironmentStartError(f"docker run failed: {last_line(err, f'exit {code}')}")
        self.container = out.strip()

    async def _read_image(self) -> ImageConfig:
        """The image's config, and its working directory when the task names none."""
        try:
            image = await self._image_config()
        except EnvironmentExecError as exc:
            raise EnvironmentStartError(str(exc)) from None
        if self.spec.workdir_from_image:
            self._image_workdir = image.workdir or "/"  # docker's own without a WORKDIR
        return image

    async def _start_entrypoint(self, image: ImageConfig, entrypoint: Sequence[str] | None = None,
                                command: Sequence[str] | None = None) -> None:  # fmt: skip
        """The image's ENTRYPOINT as a service, with the sandbox's variables, before
        any agent (`docker.image_config`)."""
        if not self.spec.image_entrypoint:
            return
        script = image.entrypoint_command(entrypoint, command)
        if script is None:
            return
        try:
            await self.start_service(ENTRYPOINT_SERVICE, script, env=dict(self.spec.env))
        except EnvironmentExecError as exc:
            raise EnvironmentStartError(f"the image's ENTRYPOINT did not start: {exc}") from None
        await self._check_entrypoint(image.main_argv(entrypoint, command))

    async def _check_entrypoint(self, argv: Sequence[str]) -> None:
        """The ENTRYPOINT still runs ENTRYPOINT_SETTLE seconds after its start, as
        `docker compose up --wait` (Harbor's start) sees its container running; one
        that exits (with any status) would stop Harbor's container: an
        `EnvironmentUnhealthy` (not tried again) with its last output lines."""
        deadline = time.monotonic() + ENTRYPOINT_SETTLE
        while await self.service_running(ENTRYPOINT_SERVICE):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(ENTRYPOINT_POLL, left))
        log_file = f"{SERVICE_LOGS}/{ENTRYPOINT_SERVICE}.log"
        tail = await self.exec(f"tail -n {ENTRYPOINT_LINES} {log_file}", cwd="/", user=ROOT,
                               timeout=30)  # fmt: skip
        said = " / ".join(line.strip() for line in tail.stdout.splitlines() if line.strip())
        said = said if len(said) <= OUTPUT_TAIL else "…" + said[-OUTPUT_TAIL:]
        raise EnvironmentUnhealthy(
            f"the image's ENTRYPOINT ({shlex.join(argv)}) exited before the agent "
            "started (Harbor's container would stop with it): "
            + (f"its last output: {said}" if said else "it printed nothing")
        )

    async def _setup(self) -> None:
        owner = await self.default_owner()
        give = "" if self._exchange is None or owner is None else (
            # a service as the image's USER may make its sockets there too
            f"chown -- {shlex.quote(str(owner))} {EXCHANGE_MOUNT}; "
        )  # fmt: skip
        setup = await self.exec(
            f"mkdir -p /logs/agent /logs/verifier {shlex.quote(self.workdir)}; {give}"
            "command -v timeout >/dev/null && echo has-timeout; "
            "tar --version 2>/dev/null | grep -q 'GNU tar' && echo has-gnu-tar",
            cwd="/",
            # as root even when the image's USER is not: these folders are Helios's
            user=ROOT,
        )
        if setup.exit_code != 0:
            raise EnvironmentStartError(f"container setup failed: {setup.stderr.strip()[:200]}")
        self._has_timeout = "has-timeout" in setup.stdout
        self._has_tar = "has-gnu-tar" in setup.stdout

    async def _remove_own(self) -> None:
        """Remove the container of our name if it carries our run and instance labels."""
        labels = (
            f'{{{{.Id}}}}\t{{{{index .Config.Labels "{LABEL_RUN}"}}}}'
            f'\t{{{{index .Config.Labels "{LABEL_INSTANCE}"}}}}'
        )
        code, out, _ = await docker("container", "inspect", "--format", labels, self.container_name)
        if code != 0:
            return  # no container of that name
        cid, run, instance = [*out.strip().split("\t"), "", ""][:3]
        if run == self.run_id and instance == self.instance:
            await docker("rm", "-f", "-v", cid)

    async def _image_user(self) -> str:
        """The image's USER (`user[:group]`)."""
        return (await self._image_config()).user

    async def _image_config(self) -> ImageConfig:
        """What the image says, read once per image (no exec)."""
        image = self.image
        if image not in _image_configs:
            inspect = ("image", "inspect", "--format", "{{json .Config}}", image)
            code, out, err = await docker(*inspect)
            if code != 0 and self.spec.dockerfile is None:
                # a ready image not here yet: `docker run` would pull it, and so do we
                pulled, _, _ = await docker("pull", "-q", image, timeout=self.spec.build_timeout)
                if pulled == 0:
                    code, out, err = await docker(*inspect)
            if code != 0:
                raise EnvironmentExecError(f"cannot inspect {image}: {last_line(err, 'no answer')}")
            _image_configs[image] = ImageConfig.parse(out)
        return _image_configs[image]

    async def default_owner(self) -> User | None:
        """The image's USER, without its group."""
        user = (await self._image_user()).split(":", 1)[0]
        return None if user in ("", "0", "root") else user

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
        shell = self._idle_shell
        if shell is not None:
            return await _docker_shell.exec_in(shell, command, cwd or self.workdir, env, timeout,
                                               user)  # fmt: skip
        return await _docker_api.run_shell_command(
            self._engine, container, command, cwd=cwd or self.workdir, env=env or {},
            timeout=timeout, user=user, has_timeout=self._has_timeout,
        )  # fmt: skip

    @property
    def _idle_shell(self) -> ContainerShell | None:
        """The stream to the container's init, unless a command holds it (a cancelled
        one runs on: the Engine API serves meanwhile). A dead one is returned: its
        use says that the container has stopped."""
        shell = self._shell
        return shell if shell is not None and not shell.busy else None

    @property
    def _transfers_in_shell(self) -> bool:
        shell = self._idle_shell
        return self._has_tar and shell is not None and not shell.dead

    async def _shell_command(
        self, command: str, *, data: bytes = b"", sink: Sink | None = None,
        env: dict[str, str] | None = None, timeout: float | None = 120,
    ) -> ExecResult | None:  # fmt: skip
        shell = self._idle_shell
        if shell is None or shell.dead:
            return None
        return await _docker_shell.exec_in(shell, command, "/", env, timeout, ROOT,
                                           data=data, sink=sink)  # fmt: skip

    async def _shell_steps(
        self, words: list[str], *, data: bytes = b"", timeout: float | None = 120
    ) -> ExecResult | None:
        shell = self._idle_shell
        if shell is None or shell.dead:
            return None
        return await _docker_shell.steps_in(shell, words, None, timeout, data=data)

    @property
    def _has_services(self) -> bool:
        shell = self._shell
        return bool(shell.services if shell is not None else self._services)

    async def prepare_and_upload(
        self, prepare: str | FileSteps, uploads: Sequence[tuple[Path, str]]
    ) -> ExecResult:
        done = await self._prepare_and_upload_in_shell(prepare, uploads)
        return done if done is not None else await super().prepare_and_upload(prepare, uploads)

    async def mount_readonly(self, host: Path, dst: str) -> bool:
        """True for an install of the spec's `agent_installs`: the image has it."""
        return self._agent_image is not None and (host, dst) in self.spec.agent_installs

    async def upload(self, src: Path, dst: str) -> None:
        if await self._upload_in_shell(src, dst):
            return
        container = self._require_container()
        # Named by its full path and unpacked at /, so docker makes missing parent
        # folders itself: one process per upload, no separate mkdir.
        arcname = posixpath.normpath(dst).strip("/") or "."
        data = await asyncio.to_thread(_tar.pack, src, arcname)
        try:
            await _docker_api.upload(self._engine, container, data)
        except EnvironmentExecError as exc:
            raise EnvironmentExecError(f"upload to {dst} failed: {exc}") from None

    async def download(self, src: str, dst: Path) -> list[str]:
        done = await self._download_in_shell(src, dst)
        if done is not None:
            return done
        container = self._require_container()
        return await _docker_api.download(self._engine, container, src, dst, Bounds())

    async def set_network(self, network: Network) -> None:
        """An allowlisted sandbox's phases switch its proxy's policy (to another
        allowlist, or to none); any other change needs a new container."""
        if network != self.network and self._egress.follow(network):
            self.network = network
            return
        await super().set_network(network)

    def egress_denials(self) -> list[str]:
        return self._egress.denials()

    async def stop(self) -> None:
        # To its end: a Ctrl-C arriving now must not leave the container behind.
        await run_to_end(self._stop())

    async def _stop(self) -> None:
        container, self.container = self.container, None
        shell, self._shell = self._shell, None
        compose, self._compose = self._compose, None
        try:
            if compose is not None:
                await compose.down()  # main with the rest
            elif shell is not None:
                # its end removes the container (by force if need be)
                await shell.close()
            elif container is not None:
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
            await self._drop_exchange()
            await self._egress.close()


async def remove_containers(run_id: str | None = None, *, force: bool = False) -> list[str]:
    """Remove the containers of one run, or those whose owner is gone; return their ids."""
    return await cleanup_containers(run_id, force=force)
