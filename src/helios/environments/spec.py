"""What a sandbox must be: built from a task, a prompt row, or nothing at all.

Every provider builds its sandbox from a `SandboxSpec` and honours each field,
or says plainly (`unsupported`) which one it cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from helios.environments.egress.policy import Network

DEFAULT_WORKDIR = "/app"


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """A readiness command, with Docker HEALTHCHECK's timing (see `environments.health`)."""

    command: str
    #: seconds between checks after the start period
    interval: float = 5.0
    #: seconds one check may take
    timeout: float = 30.0
    #: seconds after start in which failures do not count
    start_period: float = 0.0
    #: seconds between checks during the start period
    start_interval: float = 5.0
    #: failures in a row (after the start period) that make the sandbox unhealthy
    retries: int = 3


@dataclass(frozen=True)
class SandboxSpec:
    #: a ready image (docker) to start from; with `build_context` it is ignored
    image: str | None = None
    #: a folder with a Dockerfile; docker builds it, local copies its files into `workdir`
    build_context: Path | None = None
    #: content hash of `build_context`: the image cache key
    context_hash: str = ""
    workdir: str = DEFAULT_WORKDIR
    #: a provider that runs the image (docker) takes the working directory from it
    #: instead (its WORKDIR, else `/`); `workdir` is the fallback of the others
    workdir_from_image: bool = False
    #: a provider that runs the image (docker) starts its ENTRYPOINT as a service
    #: before any agent, as Harbor does (`environments.docker.image_config`)
    image_entrypoint: bool = False
    #: environment variables of the sandbox itself (every exec sees them)
    env: Mapping[str, str] = field(default_factory=dict)
    #: outbound network: True = public, False = none, an `AllowList` = through a
    #: filtering egress proxy only (falsy, like none, to a truth test)
    network: Network = False
    cpus: float = 1.0
    memory_mb: int = 2048
    #: processes at once (a fork bomb must not starve the host)
    pids: int = 4096
    #: writable storage in MiB; None = the provider's default
    storage_mb: int | None = None
    build_timeout: float = 600.0
    #: a short name for messages and labels (the task's or the prompt's)
    label: str = ""
    #: the agent starts only once this passes (None: as soon as the sandbox runs)
    healthcheck: HealthCheck | None = None
    #: a compose file merged over the `main` service (docker: `docker.compose`)
    compose_file: Path | None = None
    #: host folders an installed agent needs in the sandbox, as (host folder, path
    #: inside): docker bakes them into an image derived from the task's, once per
    #: image and install; the others show them when the agent runs (`mount_readonly`)
    agent_installs: tuple[tuple[Path, str], ...] = ()

    @property
    def dockerfile(self) -> Path | None:
        if self.build_context is None:
            return None
        candidate = self.build_context / "Dockerfile"
        return candidate if candidate.is_file() else None


#: "no sandbox": for doors whose units never run a command (tool-call tests)
NULL_SPEC = SandboxSpec(label="null")
