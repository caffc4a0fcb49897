"""`[agent]`, `[verifier]`, `[solution]`, `artifacts` and `[[steps]]` of Harbor's task.toml."""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from helios.tasks.schema_env import EnvironmentConfig, HealthcheckConfig, PhaseNetwork, Section

#: a user name as useradd takes it, or a uid
_USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")

User = str | int


def check_user(value: object) -> User | None:
    """A name or a uid; anything else could reach a shell command and is refused."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        if _USER_NAME.match(value):
            return value
    raise ValueError(f"user must be a user name or a uid, got {value!r}")


class AgentConfig(PhaseNetwork):
    timeout_sec: float = Field(default=600.0, gt=0)
    #: who runs the agent's commands (and the oracle's solve.sh); None = the image's USER
    user: User | None = None

    @field_validator("user", mode="before")
    @classmethod
    def _check_user(cls, value: object) -> User | None:
        return check_user(value)


class CollectConfig(Section):
    command: str
    service: str = "main"
    timeout_sec: float = 60.0
    user: User | None = None


class VerifierConfig(PhaseNetwork):
    timeout_sec: float = Field(default=600.0, gt=0)
    #: variables for test.sh only
    env: dict[str, str] = Field(default_factory=dict)
    user: User | None = None
    #: shared: the agent's sandbox; separate: a fresh one that sees only the artifacts
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentConfig | None = None
    collect: list[CollectConfig] = Field(default_factory=list)

    @field_validator("user", mode="before")
    @classmethod
    def _check_user(cls, value: object) -> User | None:
        return check_user(value)

    @model_validator(mode="after")
    def _mode_matches_environment(self) -> VerifierConfig:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError(
                "environment_mode = 'shared' conflicts with [verifier.environment]: "
                "drop one of them"
            )
        return self

    @property
    def separate(self) -> bool:
        return self.environment_mode == "separate" or (
            self.environment_mode is None and self.environment is not None
        )


class SolutionConfig(Section):
    #: variables for the oracle's solve.sh only
    env: dict[str, str] = Field(default_factory=dict)


class ArtifactConfig(Section):
    # built at import, not deferred: every trial makes one (`artifacts.collect`), in
    # each worker process, which has the modules imported before it started
    model_config = ConfigDict(defer_build=False)

    #: the path in the sandbox; also where it lands in a separate verifier's
    source: str = Field(min_length=1)
    #: where it lands under the trial's artifacts/ (relative); default: the source's path
    destination: str | None = None
    #: patterns (fnmatch) of files to leave out of a folder
    exclude: list[str] = Field(default_factory=list)
    #: the compose service it is copied out of (None: main, the sandbox)
    service: str | None = None

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if ".." in PurePosixPath(value).parts:
            raise ValueError(f"artifact source must not contain '..', got {value!r}")
        return value

    @field_validator("destination")
    @classmethod
    def _destination(cls, value: str | None) -> str | None:
        if not value:
            return None
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or "\\" in value:
            raise ValueError(f"artifact destination must be a relative path, got {value!r}")
        if value.rstrip("/") == "manifest.json":
            raise ValueError("artifact destination 'manifest.json' is reserved")
        return value


Artifact = str | ArtifactConfig


def as_artifact(item: Artifact) -> ArtifactConfig:
    return item if isinstance(item, ArtifactConfig) else ArtifactConfig(source=item)


def check_step_name(name: str) -> str:
    if (
        not name
        or name in (".", "..")
        or any(c in name for c in "/\\\0")
        or any(unicodedata.category(c).startswith("C") for c in name)
        or len(name.encode()) > 255
        or name != name.strip()
        or name.endswith(".")
    ):
        raise ValueError(f"step name {name!r} cannot be a folder name under steps/")
    return name


class StepConfig(Section):
    name: str
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    #: stop the remaining steps when this step's rewards are below it (a float gates
    #: the `reward` key; a table gates each of its keys; a missing key is -inf)
    min_reward: float | dict[str, float] | None = None
    #: run after the step's setup.sh and before its agent, besides the task's
    healthcheck: HealthcheckConfig | None = None
    artifacts: list[Artifact] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return check_step_name(value)
