"""One settings object for a task batch: what the CLI and `ParallelRunner` pass on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from helios.engine.budget import BudgetConfig
from helios.engine.config import Executor, check_executor
from helios.engine.labels import RunLabels, checked
from helios.engine.retries import check_below
from helios.engine.saved_config import NOT_SAVED
from helios.environments.desktop.view_mode import ViewMode
from helios.errors import ConfigError
from helios.models.routing import PROVIDER_KEYS
from helios.models.services import ModelOptions
from helios.tasks.phases import TimeoutScale
from helios.tasks.selection import TaskSelection

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the keywords of `from_kwargs` that make its `selection`
SELECTION_KEYS = frozenset(f.name for f in fields(TaskSelection))

@dataclass(frozen=True)
class AgentChoice:
    """One more agent of a run over several (`TaskBatchSettings.other_agents`)."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskBatchSettings:
    """A task batch's settings; run.json's `config.settings` saves every field but
    those marked `NOT_SAVED` (one invocation's: --resume, --force, the display)."""

    n_concurrent: int = 2
    n_attempts: int = 1
    #: None: chosen by the model (`helios.agents.registry.choose_agent`)
    agent: str | None = None
    provider: str = "docker"
    output_dir: Path = Path("output")
    quiet: bool = field(default=False, metadata=NOT_SAVED)
    pattern: str = "**/task.toml"
    #: a run folder to finish
    resume: Path | None = field(default=None, metadata=NOT_SAVED)
    retry_errors: bool = field(default=False, metadata=NOT_SAVED)
    #: with a resume, run each scored trial whose reward is below this again, as a new
    #: attempt beside the old one (`--retry-failed-below`, `engine.retries`)
    retry_failed_below: float | None = field(default=None, metadata=NOT_SAVED)
    #: resume even if the run was made with other settings
    force: bool = field(default=False, metadata=NOT_SAVED)
    agent_settings: dict[str, Any] = field(default_factory=dict)
    #: host variables a task may take as `${NAME}` (`--pass-env`); their names are
    #: saved with the run, never their values
    pass_env: list[str] = field(default_factory=list)
    #: sandbox starts at once; None: the engine's rule (`engine.config.default_sandbox_starts`)
    max_starts: int | None = None
    show_progress: bool = field(default=True, metadata=NOT_SAVED)
    #: one line per invalid or unsupported task as they load (off: the caller reports them)
    report_inputs: bool = field(default=True, metadata=NOT_SAVED)
    #: processes that run trials (one writer keeps the store); None = the number
    #: of cores, capped by n_concurrent (the CLI's default)
    workers: int | None = 1
    #: where trials run: "local" (this machine) or "ray" (a Ray cluster's nodes)
    executor: Executor = "local"
    #: with executor "ray": the cluster's address ("auto": the one `ray start` made
    #: here); None starts a local Ray instance
    ray_address: str | None = None
    #: run folders are named <prefix>_YYYYMMDD_HHMMSS
    run_prefix: str = "batch"
    models: ModelOptions = field(default_factory=ModelOptions)
    #: serve each GUI trial's desktop on 127.0.0.1 (`--watch`: "view", `--interactive`:
    #: "control"); not part of a trial's identity
    watch: ViewMode | None = field(default=None, metadata=NOT_SAVED)
    #: "batch": the live line and the results panel; "trial": one trial's phases, tool
    #: calls and rewards as lines (`helios run`, `AgentRunner`)
    view: Literal["batch", "trial"] = field(default="batch", metadata=NOT_SAVED)
    #: the run.json of the run this one reruns (`helios rerun`): what can no longer be
    #: the same (a task's content, an image, Helios's version) is named before running
    rerun_of: dict[str, Any] | None = field(default=None, metadata=NOT_SAVED)
    #: a run over several agents (a job file's `agents`, `-a a,b`): the others, beside
    #: `agent` and `agent_settings`; the run is every model × every agent
    other_agents: list[AgentChoice] = field(default_factory=list)
    #: the run's name and tags (run.json; a name also names a new run's folder)
    labels: RunLabels = field(default_factory=RunLabels)
    #: the (model, agent) combinations that run, when not every model × every agent
    #: (a job whose agents carry their own model, as Harbor's do); None: all of them
    pairs: list[tuple[str, str]] | None = None
    #: the agent's and verifier's task.toml timeouts scaled (a job's, Harbor's
    #: multipliers); part of a trial's identity only when a timeout changes
    timeouts: TimeoutScale = field(default_factory=TimeoutScale)
    #: the network of a sandbox whose task leaves `network_mode` unset: "public", as
    #: in Harbor, or "none" (`--network-default`). A run made before this setting
    #: meant "none": its saved config (which lacks it) is read so, and "none" keeps
    #: the trial ids and the identity of then ("public" enters the run's identity,
    #: and the ids of the tasks that leave their network unset: `plan.build_specs`)
    network_default: Literal["public", "none"] = "public"
    #: which of the tasks found run (`tasks.selection`: --include, --limit, --sample...);
    #: saved, so a resume runs the same ones
    selection: TaskSelection = field(default_factory=TaskSelection)
    #: the dataset the tasks come from (`-d NAME@VERSION`: `tasks.datasets`' record of
    #: its name, version, registry and each task's commit), recorded in run.json; the
    #: Python API may name one ("hello@1.0"), fetched from `registry` as the run starts
    dataset: dict[str, Any] | str | None = None
    #: the registry a dataset named by `dataset="NAME@VERSION"` is read from (a path or
    #: a URL; None: `HELIOS_REGISTRY`, else Harbor's); its record keeps it
    registry: str | None = field(default=None, metadata=NOT_SAVED)
    #: this invocation's budgets (`--max-cost`, `--max-total-tokens`, `--max-duration`,
    #: `--budget-hard`), against the whole run's spend; a resume gives its own
    budget: BudgetConfig = field(default_factory=BudgetConfig, metadata=NOT_SAVED)

    def __post_init__(self) -> None:
        if isinstance(self.budget, dict):  # the Python API's and a job file's form
            self.budget = BudgetConfig.of(**self.budget)
        if self.n_concurrent < 1 or self.n_attempts < 1:
            raise ConfigError("-n and -k must be at least 1", field="-n/-k")
        check_executor(self.executor, self.ray_address)
        for name in self.pass_env:
            if name in PROVIDER_KEYS:
                raise ConfigError(f"--pass-env {name}: a model provider's key never reaches "
                                  "a sandbox", field="--pass-env")  # fmt: skip
            if not _ENV_NAME.fullmatch(name):
                raise ConfigError(f"--pass-env {name!r}: not a variable name",
                                  field="--pass-env")  # fmt: skip
        if self.retry_failed_below is not None:
            self.retry_failed_below = check_below(self.retry_failed_below)
            if self.resume is None:
                raise ConfigError("--retry-failed-below needs --resume RUN_DIR (the run whose "
                                  "trials to retry)", field="--retry-failed-below")  # fmt: skip
        if self.network_default not in ("public", "none"):
            raise ConfigError(f"--network-default {self.network_default!r}: use public or none",
                              field="--network-default")  # fmt: skip
        if self.workers is not None and self.workers < 1:
            raise ConfigError("--workers must be at least 1", field="--workers")
        self.labels = checked(self.labels)
        self.output_dir = Path(self.output_dir)
        self.resume = Path(self.resume) if self.resume is not None else None

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> TaskBatchSettings:
        """Settings from keyword arguments; model keywords (model, base_url, api_key,
        generation, prices, retry_policy) go to `models`; `agent_version` (an installed
        agent's release) to `agent_settings["version"]`; the selection's (include, exclude,
        task_tags, difficulty, category, limit, sample, seed) to `selection`. Unknown ones
        are an error."""
        model_keys = {f.name for f in fields(ModelOptions)}
        own_keys = {f.name for f in fields(cls)}
        models = {k: kwargs.pop(k) for k in list(kwargs) if k in model_keys}
        chosen = {k: kwargs.pop(k) for k in list(kwargs) if k in SELECTION_KEYS}
        if chosen:
            kwargs["selection"] = TaskSelection(**chosen)
        version = kwargs.pop("agent_version", None)
        if version is not None:  # an installed agent's release: one of its settings
            kwargs["agent_settings"] = {**kwargs.get("agent_settings", {}), "version": version}
        unknown = sorted(set(kwargs) - own_keys)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
        return cls(**kwargs, models=ModelOptions(**models))
