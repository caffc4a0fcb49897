"""`[environment]` of Harbor's task.toml (and `[verifier.environment]`), as pydantic models.

Field names and defaults are Harbor's (`TaskConfig`, schema 1.0–1.4), with
Helios's own extensions marked. Unknown keys are kept (`extra="allow"`) so the
loader can name them; what Helios cannot honour is named by `tasks.features`.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from helios.environments.egress import entry_error

NetworkMode = Literal["public", "no-network", "allowlist"]
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_SIZE_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "": 1 / (1024 * 1024)}


class Section(BaseModel):
    """A task.toml table: unknown keys are kept in `model_extra` to be reported."""

    # allow_inf_nan: TOML has `nan` and `inf`, and no limit or timeout may be either.
    # defer_build: a section's own validator is built when it is first validated on
    # its own; a task.toml's sections are validated by TaskConfig's, so most never are.
    model_config = ConfigDict(
        extra="allow", populate_by_name=True, allow_inf_nan=False, defer_build=True
    )


def parse_size_mb(text: str) -> int:
    """Harbor's deprecated `memory = "4G"` / `storage = "10G"` spelling, in MiB."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"invalid size {text!r}: expected e.g. '512M' or '4G'")
    return max(1, int(float(match.group(1)) * _SIZE_MB[match.group(2).upper()]))


def check_absolute_path(value: str, what: str) -> str:
    path = PurePosixPath(value)
    if not path.is_absolute():
        raise ValueError(f"{what} must be an absolute path, got {value!r}")
    if ".." in path.parts:
        raise ValueError(f"{what} must not contain '..', got {value!r}")
    return value


def check_allowed_hosts(value: list[str] | None) -> list[str] | None:
    """Each entry a host name, `*.suffix` wildcard, IP address or CIDR block."""
    for entry in value or []:
        error = entry_error(entry)
        if error is not None:
            raise ValueError(error)
    return value


class HealthcheckConfig(Section):
    """Docker HEALTHCHECK semantics: the agent starts only once `command` exits 0."""

    command: str = Field(min_length=1)
    interval_sec: float = Field(default=5.0, ge=0)
    timeout_sec: float = Field(default=30.0, gt=0)
    start_period_sec: float = Field(default=0.0, ge=0)
    start_interval_sec: float = Field(default=5.0, ge=0)
    #: consecutive failures (after the start period) that make it unhealthy
    retries: int = Field(default=3, ge=0)


class MCPServerConfig(Section):
    name: str
    transport: str = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)


class TpuSpec(Section):
    type: str
    topology: str


class PhaseNetwork(Section):
    """The network fields every phase table has (`[agent]`, `[verifier]`)."""

    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        return check_allowed_hosts(value)


class DesktopConfig(Section):
    """`[environment.desktop]` (a Helios extension; `desktop = true` for the
    defaults): Helios brings a desktop up in the sandbox before any agent runs
    (the oracle too), as Harbor's computer-1 agent does: `Xvfb :1` at this size, a
    window manager and Chromium at `start_url` when the image has them. They are
    services: they live on into the verifier, which may read the screen."""

    width: int = Field(default=1024, ge=64, le=8192)
    height: int = Field(default=768, ge=64, le=8192)
    #: the page Chromium opens; None = about:blank
    start_url: str | None = None
    #: the computer agent may also run shell commands (its `bash` action)
    bash: bool = False


class EnvironmentConfig(Section):
    build_timeout_sec: float = Field(default=600.0, gt=0)
    docker_image: str | None = None
    os: Literal["linux", "windows"] = "linux"
    cpus: float = Field(default=1, gt=0)
    memory_mb: int = Field(default=2048, gt=0)
    #: writable storage in MiB; None = the provider's default
    storage_mb: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)
    gpu_types: list[str] | None = None
    tpu: TpuSpec | None = None
    #: the network from the start (the baseline); None = `allow_internet`, else the
    #: run's default (public, as in Harbor)
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None
    #: deprecated by Harbor for `network_mode`; `network` is a Helios alias
    allow_internet: bool | None = None
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)
    #: variables every command in this sandbox sees
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: HealthcheckConfig | None = None
    #: the agent's working directory; overrides the Dockerfile's WORKDIR
    workdir: str | None = None
    #: processes at once (a Helios extension); None = the provider's default
    pids: int | None = Field(default=None, gt=0)
    #: a desktop before the agent (a Helios extension); None = none
    desktop: DesktopConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_spellings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("desktop"), bool):
            data["desktop"] = {} if data["desktop"] else None
        if "network" in data and "allow_internet" not in data:
            data["allow_internet"] = data.pop("network")
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if old in data:
                value = data.pop(old)
                if isinstance(value, str):
                    data.setdefault(new, parse_size_mb(value))
        return data

    @field_validator("os", mode="before")
    @classmethod
    def _lower_os(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        return check_allowed_hosts(value)

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str | None) -> str | None:
        return None if value is None else check_absolute_path(value, "workdir")

    def network_public(self, default: bool = True) -> bool:
        """The baseline: `network_mode`, else `allow_internet`, else `default`:
        public, as in Harbor, unless the run says otherwise (`--network-default none`)."""
        if self.network_mode is not None:
            return self.network_mode == "public"
        if self.allow_internet is not None:
            return self.allow_internet
        return default


_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def host_variables(env: dict[str, str]) -> dict[str, str]:
    """{key: VAR} for values that take `${VAR}` from the host with no default."""
    found: dict[str, str] = {}
    for key, value in env.items():
        for match in _TEMPLATE.finditer(value):
            if match.group(2) is None:
                found[key] = match.group(1)
    return found


def expand_env_defaults(
    env: dict[str, str], host_env: dict[str, str] | None = None
) -> dict[str, str]:
    """`${VAR}` and `${VAR:-default}` take the host's value only for the variables
    the run passes in (`host_env`, from `--pass-env`); otherwise `${VAR:-default}`
    becomes its default (a host variable could be a key). `${VAR}` alone, not
    passed, is reported as unsupported (`features.py`)."""
    passed = host_env or {}

    def value_of(m: re.Match[str]) -> str:
        name = m.group(1)
        return passed[name] if name in passed else (m.group(2) or "")

    return {key: _TEMPLATE.sub(value_of, value) for key, value in env.items()}
