"""Compose environments: a task's `environment/docker-compose.yaml` merged over
Helios's own `main` service, run by Docker's `docker compose` (the v2 plugin).

As Harbor does, the task's file goes over a base file in which Helios gives `main`
its image (the task's built Dockerfile, or `docker_image`), its variables and its
limits. Compose merges the two (`docker compose config`); Helios then edits the
merged model before `up`, with what the task may not change:
- `main`'s init: the Engine API path's reaping shell (`docker.api.INIT_LOOP`), so
  a trial's commands, copies and process stops work as in a single container;
- the labels of every container, network and volume (run, trial, owner,
  instance): `helios cleanup` finds them after a kill -9;
- `main` depends on every sidecar (healthy where it has a healthcheck, else
  started), unless a sidecar depends on `main`;
- no `container_name` and no published `ports` (two trials would collide), every
  network `internal` when the sandbox has no network;
- a service built from a folder gets an image name of the task's content hash,
  so trials share one build;
- what `docker run` gives a single sandbox, `main` gets: the task's `storage_mb`
  (`storage_opt`, where the engine takes it), HELIOS_DOCKER_NETWORK's network
  beside its project's, the exchange folder (`--watch`'s VNC socket); the file's
  `entrypoint` and `command` for `main` are kept for Helios to run as a service;
- an allowlisted sandbox: the project's one network is the trial's egress network
  (`docker.egress`), and every service gets the proxy's variables and a resolver
  that answers nothing.
A `main` whose mounts cover /logs or /tests, or a service that shares `main`'s
processes (`pid`, `volumes_from`), is refused: the reward is read there. So is a
service given the host (`_check_trust`: privileged, host namespaces, dangerous
capabilities, devices, host paths), unless HELIOS_ALLOW_PRIVILEGED_SIDECARS=1.

Each trial is its own project (`helios-<run>-<trial>-<instance>`), so its
services and its network are its own. `up --wait` starts the sidecars before
`main` and waits for their healthchecks; one that never becomes healthy (or
exits) is an `EnvironmentUnhealthy` that names it, not tried again. A model Helios
refuses, or that compose refuses, is an `UnsupportedFeature`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiodocker

import helios.environments.docker.api as _docker_api
from helios._proc import decode, last_line, run_process
from helios.environments.base import ExecResult, User
from helios.environments.docker.cli import (
    CONTROL_TIMEOUT,
    IMAGE_REPO,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_RUN,
    docker,
    docker_binary,
)
from helios.environments.docker.egress import DockerEgress
from helios.environments.docker.services import EXCHANGE_MOUNT
from helios.environments.egress import NO_PROXY_HOSTS
from helios.environments.shell.owner import Owner
from helios.environments.shell.safe_copy import Bounds
from helios.environments.spec import SandboxSpec
from helios.errors import (
    EnvironmentBuildError,
    EnvironmentExecError,
    EnvironmentStartError,
    EnvironmentUnavailable,
    EnvironmentUnhealthy,
    UnsupportedFeature,
)
from helios.settings import current as helios_settings

log = logging.getLogger(__name__)

#: the service that is the trial's sandbox (Harbor's name)
MAIN = "main"
#: where the reward and the tests live: no compose mount may cover them in `main`
PROTECTED = ("/logs", "/tests")
_PROJECT_UNSAFE = re.compile(r"[^a-z0-9_-]")
#: the files of one `up` (removed once it ends; a kill -9 meanwhile: `cleanup_compose`)
FOLDER_PREFIX = "helios-compose-"
#: in such a folder: the owner label of the Helios that made it
OWNER_FILE = "owner"
#: a cleanup of every run leaves such a folder without an owner younger than this (s)
FOLDER_GRACE = 300.0


def project_name(run_id: str, trial_id: str, instance: str) -> str:
    """A compose project name (lowercase letters, digits, `-`, `_`) of one trial."""
    trial = _PROJECT_UNSAFE.sub("-", trial_id.lower())[:30]
    return f"helios-{_run_part(run_id)}-{trial}-{instance}"


def _run_part(run_id: str) -> str:
    return _PROJECT_UNSAFE.sub("-", run_id.lower())[:30]


class ComposeService:
    """A sidecar's container, as the verifier's collection needs it: commands (as
    root by default) and checked downloads."""

    supports_users = True
    workdir = "/"

    def __init__(self, name: str, engine: aiodocker.Docker, container: str) -> None:
        self.name = name
        self._engine = engine
        self._container = container

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        user: User | None = None,
    ) -> ExecResult:
        return await _docker_api.run_shell_command(
            self._engine, self._container, command, cwd=cwd or "/", env=env or {},
            timeout=timeout, user=user, has_timeout=False,
        )  # fmt: skip

    async def download(self, src: str, dst: Path) -> list[str]:
        return await _docker_api.download(self._engine, self._container, src, dst, Bounds())


class StorageRefused(EnvironmentStartError):
    """The engine takes no `storage_opt` (`--storage-opt size=`): `up` again without."""


class ComposeProject:
    """One trial's compose project: `up` once, `service` while it runs, `down` at its end."""

    def __init__(self, spec: SandboxSpec, *, name: str, labels: Mapping[str, str],
                 image: str | None, storage: bool = False, exchange: Path | None = None,
                 egress: DockerEgress | None = None) -> None:  # fmt: skip
        assert spec.compose_file is not None
        self.spec = spec
        self.name = name
        self.labels = dict(labels)
        #: the image Helios built or was given for `main`; None: the task's file gives it
        self.image = image
        #: give `main` the task's `storage_mb` (where the engine takes it, as `docker run`)
        self.storage = storage and spec.storage_mb is not None
        #: the host folder bound at EXCHANGE_MOUNT in `main` (`--watch`'s VNC socket)
        self.exchange = exchange
        #: an allowlisted sandbox's network and proxy, open: every service's one network
        self.egress = egress
        #: the file's `entrypoint` and `command` for `main` (None: it gives none), which
        #: Harbor's compose would run in place of the image's ENTRYPOINT and `sleep infinity`
        self.main_entrypoint: list[str] | None = None
        self.main_command: list[str] | None = None
        self.task_file = spec.compose_file
        self.project_dir = spec.compose_file.parent
        #: the hosts its services reach without the egress proxy (known once `up` ran)
        self.direct_hosts: tuple[str, ...] = NO_PROXY_HOSTS
        # a sidecar's image is named by the content it is built from: the hashed
        # environment folder, else (a separate verifier's tests/) the file itself
        self._build_key = spec.context_hash[:12] or _file_key(self.task_file)

    def _base(self) -> dict[str, Any]:
        spec = self.spec
        main: dict[str, Any] = {
            "environment": dict(spec.env),
            "cpus": min(spec.cpus, float(os.cpu_count() or 1)),
            "mem_limit": f"{spec.memory_mb}m",
            "pids_limit": spec.pids,
        }
        if self.image is not None:
            main["image"] = self.image
        return {"services": {MAIN: main}}

    async def _compose(self, *args: str, timeout: float | None = CONTROL_TIMEOUT,
                       files: tuple[Path, ...] = ()) -> tuple[int, str, str]:  # fmt: skip
        argv = [docker_binary(), "compose", "-p", self.name,
                "--project-directory", str(self.project_dir)]  # fmt: skip
        for file in files:
            argv += ["-f", str(file)]
        result = await run_process([*argv, *args], timeout=timeout, env=compose_environment())
        if result.timed_out:
            raise EnvironmentStartError(f"docker compose {args[0]} did not answer within "
                                        f"{timeout:g}s")  # fmt: skip
        return result.returncode, decode(result.stdout), decode(result.stderr)

    async def up(self) -> str:
        """Start every service; return `main`'s container id."""
        prefix = f"{FOLDER_PREFIX}{self.name}-"
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix))
        owner = self.labels.get(LABEL_OWNER, "")
        await asyncio.to_thread((folder / OWNER_FILE).write_text, owner, "utf-8")
        try:
            return await self._up(folder)
        finally:  # the project is known by its name from now on
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def _up(self, folder: Path) -> str:
        base = folder / "base.json"
        await asyncio.to_thread(base.write_text, json.dumps(self._base()), "utf-8")
        code, out, err = await self._compose(
            "config", "--format", "json", files=(base, self.task_file)
        )
        if code != 0 and "is not a docker command" in err:
            raise EnvironmentUnavailable(
                "a compose task needs Docker's compose plugin (`docker compose` v2): install "
                "docker-compose-plugin, or Debian's docker-compose (trixie and later)"
            )
        if code != 0:
            # the task's file: trying again would give the same answer
            raise UnsupportedFeature(
                f"{self.task_file}: docker compose refused it: {last_line(err, f'exit {code}')}"
            )
        try:
            model = json.loads(out)
        except ValueError:
            raise EnvironmentStartError("docker compose config gave no JSON") from None
        final = folder / "compose.json"
        edited = self.edit(model)
        self.direct_hosts = direct_hosts(edited)
        await asyncio.to_thread(final.write_text, json.dumps(_escaped(edited)), "utf-8")
        wait = f"{max(1, int(self.spec.build_timeout))}"
        code, _, err = await self._compose(
            "up", "-d", "--wait", "--wait-timeout", wait, "--quiet-pull",
            timeout=self.spec.build_timeout * 2 + 60, files=(final,),
        )  # fmt: skip
        if code != 0:
            if self.storage and "storage-opt" in err:
                raise StorageRefused(f"docker compose up failed: {last_line(err, '')}")
            raise await self._failure(err, code)
        code, out, err = await self._compose("ps", "-q", MAIN)
        container = out.strip().splitlines()[0] if code == 0 and out.strip() else ""
        if not container:
            raise EnvironmentStartError(
                f"compose service {MAIN!r} is not running: {last_line(err, 'no container')}"
            )
        return container

    def edit(self, model: dict[str, Any]) -> dict[str, Any]:
        """The merged model with what Helios does not let a task change (see the module)."""
        services: dict[str, dict[str, Any]] = model.get("services") or {}
        if MAIN not in services:
            raise UnsupportedFeature(f"{self.task_file}: no service {MAIN!r}")
        model["name"] = self.name
        main = services[MAIN]
        _check_main(self.task_file, main, services)
        if not helios_settings().allow_privileged_sidecars:
            _check_trust(self.task_file, self.project_dir.parent, model)
        # what the file gives main to run, run by Helios as the image's ENTRYPOINT is
        self.main_entrypoint = _argv(main.get("entrypoint"))
        self.main_command = _argv(main.get("command"))
        main["entrypoint"] = ["sh", "-c", _docker_api.INIT_LOOP]
        main.pop("command", None)
        if self.image is not None:
            main["image"] = self.image
            main.pop("build", None)
        main.pop("storage_opt", None)
        if self.storage:  # as `docker run --storage-opt size=`
            main["storage_opt"] = {"size": f"{self.spec.storage_mb}m"}
        if self.exchange is not None:
            main["volumes"] = [*(main.get("volumes") or []), {
                "type": "bind", "source": str(self.exchange), "target": EXCHANGE_MOUNT}]
        build_network = helios_settings().docker_build_network
        for name, service in services.items():
            service["labels"] = {**(service.get("labels") or {}), **self.labels}
            service.pop("container_name", None)
            service.pop("ports", None)
            build = service.get("build")
            if isinstance(build, dict):
                build["labels"] = {**(build.get("labels") or {}), LABEL_MANAGED: "true"}
                if build_network and "network" not in build:
                    build["network"] = build_network
                if not service.get("image"):  # main too, when the file builds it
                    tag = f"{self._build_key}-{name}"
                    service["image"] = f"{IMAGE_REPO}:compose-{_tag_part(tag)}"
        _depend_on_sidecars(main, services)
        #: HELIOS_DOCKER_NETWORK: `main`'s way out, as `docker run --network` gives it
        outside = helios_settings().docker_network
        networks: dict[str, dict[str, Any]] = model.setdefault("networks", {}) or {}
        model["networks"] = networks
        networks.setdefault("default", {})
        for network in networks.values():
            if network.get("external"):
                continue
            network["labels"] = {**(network.get("labels") or {}), **self.labels}
            network.pop("name", None)  # its project's own, named by compose
            if not self.spec.network or outside == "none":
                network["internal"] = True
        if self.spec.network is True and outside not in (None, "none", "bridge", "default"):
            _join_outside(self.task_file, main, networks, outside)
        if self.egress is not None and self.egress.network is not None:
            _behind_proxy(self.task_file, model, self.egress)
        for volume in (model.get("volumes") or {}).values():
            if isinstance(volume, dict) and not volume.get("external"):
                volume["labels"] = {**(volume.get("labels") or {}), **self.labels}
                volume.pop("name", None)
        return model

    async def _failure(self, err: str, code: int) -> Exception:
        """Why `up` failed, naming the service that did not come up."""
        said = last_line(err, f"exit {code}")
        broken = await self._broken_services()
        if ("build" in err.lower() and "failed to solve" in err.lower()) or "build" in said[:40]:
            return EnvironmentBuildError(f"docker compose build failed: {said}")
        if broken:
            name, state = broken[0]
            # as a healthcheck of main that never passes: not tried again
            return EnvironmentUnhealthy(
                f"compose service {name!r} did not become healthy ({state}): {said}"
            )
        return EnvironmentStartError(f"docker compose up failed: {said}")

    async def _broken_services(self) -> list[tuple[str, str]]:
        code, out, _ = await self._compose("ps", "-a", "--format", "json")
        if code != 0:
            return []
        rows: list[dict[str, Any]] = []
        text = out.strip()
        with contextlib.suppress(ValueError):
            parsed = json.loads(text) if text.startswith("[") else None
            rows = parsed if isinstance(parsed, list) else [
                json.loads(line) for line in text.splitlines() if line.strip()
            ]  # fmt: skip
        broken: list[tuple[str, str]] = []
        for row in rows:
            service, state = row.get("Service", ""), row.get("State", "")
            health = row.get("Health", "")
            if health == "unhealthy" or state in ("exited", "dead", "restarting"):
                broken.append((service, health or f"{state}, exit {row.get('ExitCode', '?')}"))
        broken.sort(key=lambda item: item[0] == MAIN)  # a sidecar's failure first
        return broken

    async def service(self, name: str, engine: aiodocker.Docker) -> ComposeService:
        code, out, err = await self._compose("ps", "-q", name)
        container = out.strip().splitlines()[0] if code == 0 and out.strip() else ""
        if not container:
            raise EnvironmentExecError(
                f"compose service {name!r} is not running: {last_line(err, 'no container')}"
            )
        return ComposeService(name, engine, container)

    async def down(self) -> None:
        """Remove every container, network and volume of the project, whatever happened."""
        try:
            code, _, err = await self._compose(
                "down", "-v", "--remove-orphans", "-t", "0", timeout=CONTROL_TIMEOUT
            )
            if code != 0:
                log.warning("docker compose down of %s failed: %s", self.name, last_line(err, ""))
        except EnvironmentStartError as exc:
            log.warning("docker compose down of %s: %s", self.name, exc)


#: what `docker compose` itself needs of Helios's environment: nothing else reaches
#: it, so a task's `${OPENAI_API_KEY}` interpolates to nothing (secrets never reach a
#: sandbox); the task's own `environment/.env` still counts
_PASSED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_RUNTIME_DIR", "DOCKER_HOST",
           "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY",
           "DOCKER_API_VERSION", "DOCKER_BUILDKIT", "BUILDKIT_PROGRESS")  # fmt: skip


def compose_environment() -> dict[str, str]:
    return {key: os.environ[key] for key in _PASSED if key in os.environ}


def _check_main(task_file: Path, main: dict[str, Any], services: dict[str, Any]) -> None:
    for volume in main.get("volumes") or []:
        target = str(volume.get("target", "")) if isinstance(volume, dict) else ""
        if any(_covers(target, path) for path in PROTECTED):
            raise UnsupportedFeature(
                f"{task_file}: services.{MAIN}.volumes mounts {target}: Helios keeps "
                "/logs and /tests of main to itself (the reward is read there)"
            )
    for name, service in services.items():
        shares = [str(service.get(key) or "") for key in ("pid", "ipc")]
        shares += [str(v) for v in service.get("volumes_from") or []]
        if name != MAIN and any(_names_main(share) for share in shares):
            raise UnsupportedFeature(
                f"{task_file}: services.{name} shares main's processes or volumes: refused"
            )


#: the network `main` joins for HELIOS_DOCKER_NETWORK (`_join_outside`)
OUTSIDE = "helios-outside"
#: a service's keys that share a namespace of the host when their value is `host`
HOST_SHARES = ("network_mode", "pid", "ipc", "uts", "userns_mode", "cgroup")
#: capabilities that reach past a container's own namespaces to the host's kernel,
#: its files or other processes (NET_ADMIN and NET_RAW stay in its network namespace)
DANGEROUS_CAPS = frozenset({
    "ALL", "SYS_ADMIN", "SYS_MODULE", "SYS_RAWIO", "SYS_PTRACE", "SYS_BOOT", "SYS_TIME",
    "SYS_RESOURCE", "DAC_READ_SEARCH", "MAC_ADMIN", "MAC_OVERRIDE", "BPF", "PERFMON",
    "SYSLOG", "LINUX_IMMUTABLE", "IPC_OWNER",
})  # fmt: skip


def _join_outside(task_file: Path, main: dict[str, Any], networks: dict[str, Any],
                  name: str) -> None:  # fmt: skip
    """`main` on HELIOS_DOCKER_NETWORK too, as `docker run --network` puts a sandbox,
    while it stays on its project's networks, where its sidecars are."""
    if name == "host" or name.startswith("container:"):
        raise UnsupportedFeature(
            f"{task_file}: HELIOS_DOCKER_NETWORK={name} cannot apply to a compose task: main "
            "would leave its project's network, where its sidecars are"
        )
    if main.get("network_mode"):
        raise UnsupportedFeature(
            f"{task_file}: services.{MAIN}.network_mode cannot go with "
            f"HELIOS_DOCKER_NETWORK={name}: unset one of them"
        )
    own = main.get("networks") or {"default": None}
    joined = dict(own) if isinstance(own, dict) else {str(n): None for n in own}
    joined[OUTSIDE] = None
    main["networks"] = joined
    networks[OUTSIDE] = {"name": name, "external": True}


def _argv(value: Any) -> list[str] | None:
    """A service's `entrypoint` or `command` as compose's model gives it (a list, or
    a string that compose splits into words); None when unset."""
    if value is None:
        return None
    if isinstance(value, str):
        return shlex.split(value)
    return [str(part) for part in value]


def direct_hosts(model: Mapping[str, Any]) -> tuple[str, ...]:
    """The hosts a service of this (merged) model reaches without the egress proxy:
    its own loopback and every service, by name."""
    return (*NO_PROXY_HOSTS, *(model.get("services") or {}))


def _behind_proxy(task_file: Path, model: dict[str, Any], egress: DockerEgress) -> None:
    """An allowlisted sandbox: the project's one network is the trial's egress network
    (`docker.egress`: internal, its gateway the proxy's namespace), and every service,
    sidecars too, gets the proxy's variables and its resolver that answers nothing."""
    networks: dict[str, Any] = model["networks"]
    for name in networks:
        if name != "default":
            raise UnsupportedFeature(
                f"{task_file}: networks.{name}: an allowlisted compose task keeps its services "
                "on one network, whose only way out is the egress proxy"
            )
    networks["default"] = {"name": egress.network, "external": True}
    # the services reach each other by name on their network, not through the proxy
    hosts = ",".join(direct_hosts(model))
    direct = {"NO_PROXY": hosts, "no_proxy": hosts}
    for name, service in (model.get("services") or {}).items():
        if service.get("network_mode"):
            raise UnsupportedFeature(
                f"{task_file}: services.{name}.network_mode: an allowlisted compose task keeps "
                "its services on one network, whose only way out is the egress proxy"
            )
        own = service.get("networks") or {}
        extra = [n for n in own if n != "default"]
        if extra:
            raise UnsupportedFeature(
                f"{task_file}: services.{name}.networks names {extra[0]!r}: an allowlisted "
                "compose task keeps its services on one network"
            )
        environment = service.get("environment") or {}
        service["environment"] = {**environment, **egress.variables, **direct}
        service["dns"] = [egress.dns]


def _check_trust(task_file: Path, task_dir: Path, model: dict[str, Any]) -> None:
    """Refuse, in one line naming the service and the key, what would give a service
    (and an agent that reaches it) the host: `privileged`, a namespace of the host,
    a dangerous `cap_add`, `devices`, an unconfined `security_opt`, or a host path
    outside the task's folder (the docker socket among them)."""
    root = task_dir.resolve()
    for name, service in (model.get("services") or {}).items():
        where = f"services.{name}"
        found = ""
        if service.get("privileged"):
            found = "privileged: true"
        for key in HOST_SHARES:
            if not found and str(service.get(key) or "") == "host":
                found = f"{key}: host"
        caps = {str(c).upper().removeprefix("CAP_") for c in service.get("cap_add") or []}
        if not found and caps & DANGEROUS_CAPS:
            found = f"cap_add: {', '.join(sorted(caps & DANGEROUS_CAPS))}"
        if not found and service.get("devices"):
            found = "devices"
        build = service.get("build")
        if not found and isinstance(build, dict) and str(build.get("network")) == "host" and (
            helios_settings().docker_build_network != "host"
        ):  # the build's steps on the host's loopback: the user's choice alone
            found = "build.network: host"
        loose = [str(o) for o in service.get("security_opt") or []
                 if "unconfined" in str(o) or str(o).endswith("disable")]  # fmt: skip
        if not found and loose:
            found = f"security_opt: {loose[0]}"
        for volume in service.get("volumes") or []:
            source = volume.get("source") if isinstance(volume, dict) else None
            bind = isinstance(volume, dict) and volume.get("type") == "bind"
            if not found and bind and source and not _inside(str(source), root):
                found = f"volumes mounts the host's {source}"
        if found:
            _refuse(task_file, where, found)
    for name, volume in (model.get("volumes") or {}).items():
        device = ((volume or {}).get("driver_opts") or {}).get("device")
        if device and str(device).startswith("/") and not _inside(str(device), root):
            _refuse(task_file, f"volumes.{name}", f"driver_opts.device {device}")


def _refuse(task_file: Path, where: str, found: str) -> None:
    raise UnsupportedFeature(
        f"{task_file}: {where}.{found} is refused: it gives the container (and any agent "
        "that reaches it) the host (HELIOS_ALLOW_PRIVILEGED_SIDECARS=1 allows it)"
    )


def _inside(path: str, root: Path) -> bool:
    """Whether a host path is the task's folder or under it (links resolved)."""
    resolved = Path(os.path.normpath(path)).resolve()
    return resolved == root or root in resolved.parents


def _names_main(share: str) -> bool:
    """`service:main`, `main` or `main:ro` (a `pid`, `ipc` or `volumes_from` value)."""
    return share.removeprefix("service:").split(":", 1)[0] == MAIN


def _covers(target: str, protected: str) -> bool:
    target = target.rstrip("/") or "/"
    return (
        target == protected
        or target.startswith(f"{protected}/")
        or protected.startswith(f"{target.rstrip('/')}/")
    )


def _depend_on_sidecars(main: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    """`main` starts after every sidecar (healthy where it has a healthcheck), as in
    Harbor; a sidecar that needs `main` itself is left to its own order."""
    depends: dict[str, Any] = main.get("depends_on") or {}
    for name, service in services.items():
        if name == MAIN or name in depends or _needs(services, name, MAIN, set()):
            continue
        check = service.get("healthcheck") or {}
        healthy = bool(check) and not check.get("disable")
        depends[name] = {
            "condition": "service_healthy" if healthy else "service_started",
            "required": True,
        }
    if depends:
        main["depends_on"] = depends


def _needs(services: dict[str, dict[str, Any]], name: str, target: str, seen: set[str]) -> bool:
    if name in seen:
        return False
    seen.add(name)
    depends = services.get(name, {}).get("depends_on") or {}
    return any(d == target or _needs(services, d, target, seen) for d in depends)


def _file_key(path: Path) -> str:
    """A short hash of a compose file's path and text (one small read, once a trial)."""
    try:
        text = path.read_bytes()
    except OSError:
        text = b""
    return hashlib.sha256(str(path).encode() + b"\0" + text).hexdigest()[:12]


def _tag_part(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", text)[:120]


def _escaped(value: Any) -> Any:
    """The merged model is interpolated already: its `$` must stay `$` in `up`."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        return {key: _escaped(item) for key, item in value.items()}
    return value


async def cleanup_compose(run_id: str | None, *, force: bool = False) -> list[str]:
    """The networks and volumes of compose projects whose containers are gone
    (`cleanup_containers` removes those by their labels): of one run, or, with
    None, whose owner is gone (`force`: every Helios one not in use)."""
    removed = await asyncio.to_thread(_remove_folders, run_id, force)
    for kind in ("network", "volume"):
        fmt = ("{{.ID}}" if kind == "network" else "{{.Name}}") + (
            '\t{{.Label "' + LABEL_RUN + '"}}\t{{.Label "' + LABEL_OWNER + '"}}'
        )
        code, out, _ = await docker(kind, "ls", "--filter", f"label={LABEL_MANAGED}=true",
                                    "--format", fmt)  # fmt: skip
        if code != 0:
            continue
        for line in out.splitlines():
            ident, run, owner = [*line.split("\t"), "", ""][:3]
            if not ident:
                continue
            if run_id is not None:
                chosen = run == run_id
            else:
                parsed = Owner.parse(owner) if owner else None
                chosen = force or parsed is None or not parsed.alive()
            if chosen:
                # in use (a live trial's): refused by the engine, and left
                code, _, _ = await docker(kind, "rm", ident)
                if code == 0:
                    removed.append(ident)
    return removed


def _remove_folders(run_id: str | None, force: bool) -> list[str]:
    """`up`'s files left by a kill -9: of one run, or (None) whose owner is gone."""
    base = Path(tempfile.gettempdir())
    if run_id is not None:
        chosen = list(base.glob(f"{FOLDER_PREFIX}helios-{_run_part(run_id)}-*"))
    else:
        chosen = [f for f in base.glob(f"{FOLDER_PREFIX}*") if force or _orphaned(f)]
    for folder in chosen:
        shutil.rmtree(folder, True)
    return [str(folder) for folder in chosen]


def _orphaned(folder: Path) -> bool:
    try:
        owner = Owner.parse((folder / OWNER_FILE).read_text("utf-8").strip())
    except (OSError, ValueError):
        owner = None
    if owner is not None:
        return not owner.alive()
    try:  # being made, or by an older Helios
        return time.time() - folder.lstat().st_mtime > FOLDER_GRACE
    except OSError:
        return False
