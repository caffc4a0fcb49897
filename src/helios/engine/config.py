"""What a run is started with (`RunConfig`), one name for each of the user's knobs.

`engine/run.py` records it in run.json and `engine/batch.py` runs by its
`ConcurrencyConfig`: both import it from here (layers point down). The rules
every door shares are here too, once: how many sandboxes start at once when the
user did not say (`default_sandbox_starts`), and which executor settings go
together (`check_executor`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from helios.engine.budget import BudgetConfig
from helios.engine.labels import RunLabels
from helios.engine.retries import check_below
from helios.engine.saved_config import CONFIG_KEY, CONFIG_VERSION, VERSION_KEY, dump_config
from helios.errors import ConfigError
from helios.models.pricing import price_source
from helios.settings import current as helios_settings

#: where units run
Executor = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "ray")
#: sandboxes starting at once when not given: container start is CPU-heavy, and a
#: thundering herd slows every start (docs/design/invariants.md)
DEFAULT_MAX_STARTS = 4
RAY_INSTALL_HINT = "pip install 'helios-harness[ray]'"


def default_sandbox_starts(in_flight: int) -> int:
    """Sandboxes starting at once when the user did not say: min(in_flight, 4)."""
    return max(1, min(in_flight, DEFAULT_MAX_STARTS))


def check_executor(executor: str, ray_address: str | None) -> None:
    """Every door's one check of where its units run (`--executor`, `--ray-address`):
    a ConfigError naming the flag; with "ray", Ray must be installed."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r} (use local or ray)",
                          field="--executor")  # fmt: skip
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray", field="--ray-address")
    if executor == "ray":
        require_ray()


def require_ray() -> None:
    """Refuse `--executor ray` before anything starts when Ray is not installed."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except ValueError:  # in sys.modules as None: an import of it fails
        found = False
    if not found:
        raise ray_missing()


def ray_missing() -> ConfigError:
    return ConfigError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL_HINT}",
                       field="--executor")  # fmt: skip


class ConcurrencyConfig(BaseModel):
    """One name for each knob: units in flight, processes, sandbox starts at once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    in_flight: int = Field(default=2, ge=1)
    #: processes that run units (1: this one)
    processes: int = Field(default=1, ge=1)
    #: sandboxes starting at once; None (not given): `default_sandbox_starts(in_flight)`,
    #: filled in as the config is made, so run.json records the number used
    sandbox_starts: int | None = Field(default=None, ge=1)
    #: with a resume, run errored units again too
    retry_errors: bool = False
    #: with a resume, run each scored unit whose reward is below this once more, as a
    #: new attempt beside the old one (`engine.retries`, `--retry-failed-below`)
    retry_below: float | None = None
    #: where units run: "local" (this machine, `processes` of it) or "ray" (a Ray
    #: cluster's nodes; engine/ray_executor.py)
    executor: Executor = "local"
    #: with "ray": the cluster's address, "auto", or None (start a local Ray instance)
    ray_address: str | None = None

    @field_validator("retry_below", mode="before")
    @classmethod
    def _a_reward(cls, value: Any) -> float | None:
        return None if value is None else check_below(value)

    @model_validator(mode="after")
    def _derive_starts(self) -> ConcurrencyConfig:
        if self.sandbox_starts is None:
            # frozen: set once, here, as pydantic builds it
            self.__dict__["sandbox_starts"] = default_sandbox_starts(self.in_flight)
        return self

    @property
    def starts_at_once(self) -> int:
        """`sandbox_starts`, never None."""
        return self.sandbox_starts or default_sandbox_starts(self.in_flight)


class SandboxConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: None: the units start no sandbox of a provider's (no preflight, no cleanup)
    provider: str | None = "docker"


class OutputsConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    #: where a new run's folder is made (`<parent>/<prefix>_YYYYMMDD_HHMMSS`)
    parent: Path | None = None
    prefix: str = "batch"
    #: an existing run folder to finish (its run.json must exist)
    resume: Path | None = None
    #: a fixed folder: created on the first invocation, resumed on the next ones
    fixed: Path | None = None
    # (none of the three: the run keeps its records in memory, with no folder)
    #: resume even when a setting that changes results differs
    force: bool = False


class RunConfig(BaseModel):
    """Everything a run is started with, recorded in its `run.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    concurrency: ConcurrencyConfig = ConcurrencyConfig()
    sandbox: SandboxConfig = SandboxConfig()
    outputs: OutputsConfig = OutputsConfig()
    #: the door's settings that change results: recorded, and checked on a resume
    identity: dict[str, Any] = Field(default_factory=dict)
    #: more of the door's fields for run.json (recorded, never checked)
    recorded: dict[str, Any] = Field(default_factory=dict)
    #: the door's whole config (`saved_config.dump_config` of its settings, and its
    #: inputs): run.json's `config`, what `--resume RUN_DIR` continues with
    config: dict[str, Any] = Field(default_factory=dict)
    #: the run's name and tags (`engine.labels`): in run.json, never in the identity;
    #: a name also names a new run's folder (`<name>_YYYYMMDD_HHMMSS`)
    labels: RunLabels = RunLabels()
    #: this invocation's budgets (`engine.budget`): counted against the whole run's
    #: spend; never part of the identity, nor of the saved config (a resume gives its own)
    budget: BudgetConfig = BudgetConfig()

    def full_identity(self) -> dict[str, Any]:
        # the HELIOS_* variables that change results (a docker network, prices)
        return {**self.identity, "result_settings": helios_settings().identity()}

    def saved(self) -> dict[str, Any]:
        """run.json's versioned `config`: the door's config, the engine's settings and
        the `HELIOS_*` settings that change results; no secret (`dump_config`)."""
        engine = {"concurrency": self.concurrency.model_dump(mode="json"),
                  "sandbox": self.sandbox.model_dump(mode="json"),
                  # where the default prices come from, and their date (issue 33)
                  "price_source": price_source()}  # fmt: skip
        return {VERSION_KEY: CONFIG_VERSION, CONFIG_KEY: dump_config({
            **self.config, **engine, "result_settings": helios_settings().identity(),
        })}  # fmt: skip
