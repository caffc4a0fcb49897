"""Harbor's task.toml (`TaskConfig`, schema_version 1.0–1.4) as pydantic models.

Every field Harbor defines is named here, so a task loads as it would in
Harbor; `tasks.features` says which of them Helios honours. Keys that are in
no version of the schema are kept aside and reported once per batch
(`unknown_keys`): a typo such as `[agent] usr = "agent"` must not pass silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from helios.tasks.schema_env import (
    DesktopConfig,
    EnvironmentConfig,
    HealthcheckConfig,
    MCPServerConfig,
    NetworkMode,
    Section,
    TpuSpec,
)
from helios.tasks.schema_phases import (
    AgentConfig,
    Artifact,
    ArtifactConfig,
    CollectConfig,
    SolutionConfig,
    StepConfig,
    VerifierConfig,
    as_artifact,
)

__all__ = [
    "AgentConfig",
    "Artifact",
    "ArtifactConfig",
    "Author",
    "CollectConfig",
    "DesktopConfig",
    "EnvironmentConfig",
    "HealthcheckConfig",
    "MCPServerConfig",
    "NetworkMode",
    "PackageInfo",
    "SolutionConfig",
    "StepConfig",
    "TaskConfig",
    "TpuSpec",
    "VerifierConfig",
    "as_artifact",
    "unknown_keys",
]

RewardStrategy = Literal["mean", "final"]
#: Harbor's `[metadata] category` of tasks run on a desktop (computer-1's)
COMPUTER_USE_CATEGORY = "computer-use"


class Author(Section):
    name: str
    email: str | None = None


class PackageInfo(Section):
    """`[task]`: the package's name in the Harbor registry (metadata for Helios)."""

    name: str
    version: str | None = None
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class TaskConfig(Section):
    #: `version` in schema 1.0
    schema_version: str = "1.0"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None
    #: how a multi-step task's step rewards become the trial's (default "mean")
    multi_step_reward_strategy: RewardStrategy | None = None
    #: the pre-1.3 spelling, which Harbor accepts and drops
    multi_step_reward_mode: Any = None
    steps: list[StepConfig] | None = None
    #: paths collected after the agent (strings or {source, destination, exclude})
    artifacts: list[Artifact] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _version_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            version = data.pop("version")
            data.setdefault("schema_version", str(version))
        if isinstance(data, dict) and not isinstance(data.get("schema_version", ""), str):
            data = {**data, "schema_version": str(data["schema_version"])}
        return data

    @model_validator(mode="after")
    def _unique_steps(self) -> TaskConfig:
        seen: set[str] = set()
        for step in self.steps or []:
            folded = step.name.casefold()
            if folded in seen:
                raise ValueError(f"two steps are named {step.name!r}")
            seen.add(folded)
        if self.steps is not None and not self.steps:
            raise ValueError("steps is empty: give at least one [[steps]] table or none")
        return self

    @property
    def version(self) -> str:
        """The schema version (the name of the field before schema 1.1)."""
        return self.schema_version

    @property
    def multi_step(self) -> bool:
        return bool(self.steps)

    @property
    def reward_strategy(self) -> RewardStrategy:
        return self.multi_step_reward_strategy or "mean"

    @property
    def desktop(self) -> DesktopConfig | None:
        """The desktop Helios brings up before any agent runs: `[environment.desktop]`
        (`desktop = false`: none), else the defaults for a Harbor computer-use task
        (`[metadata] category = "computer-use"`, whose tests may read the screen),
        else None."""
        if "desktop" in self.environment.model_fields_set:  # `desktop = false` opts out
            return self.environment.desktop
        if self.metadata.get("category") == COMPUTER_USE_CATEGORY:
            return DesktopConfig()
        return None

    def all_artifacts(self) -> list[ArtifactConfig]:
        return [as_artifact(item) for item in self.artifacts]


def unknown_keys(model: BaseModel, prefix: str = "") -> Iterator[str]:
    """Dotted names of keys no schema version defines (list items as `name[]`)."""
    for key in model.model_extra or {}:
        yield f"{prefix}{key}"
    for name in type(model).model_fields:
        if name == "metadata":
            continue  # free-form by design
        yield from _unknown_in(getattr(model, name), f"{prefix}{name}")


def _unknown_in(value: Any, where: str) -> Iterator[str]:
    if isinstance(value, BaseModel):
        yield from unknown_keys(value, f"{where}.")
    elif isinstance(value, list):
        seen: set[str] = set()
        for item in value:
            for key in _unknown_in(item, f"{where}[]"):
                if key not in seen:
                    seen.add(key)
                    yield key
