"""A task's settings resolved per phase: what each step's agent and verifier get.

A single-step task is one step with no name whose files are the task's own
(`instruction.md`, `solution/`, `tests/`); a multi-step task has one per
`[[steps]]` table, each falling back to the task's `[agent]` and `[verifier]`
for what it leaves unset. The body (`tasks.body`) only follows these plans.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helios.environments.base import User
from helios.environments.egress import Network, describe
from helios.environments.spec import HealthCheck, SandboxSpec
from helios.tasks.network import phase_network
from helios.tasks.schema import (
    AgentConfig,
    ArtifactConfig,
    CollectConfig,
    StepConfig,
    VerifierConfig,
)
from helios.tasks.schema_env import NetworkMode
from helios.tasks.schema_phases import as_artifact
from helios.tasks.task import Task, dockerfile_workdir, health_check, sandbox_spec_for
from helios.tasks.task_layout import has_compose, step_verifier

MinReward = float | dict[str, float] | None


@dataclass(frozen=True)
class TimeoutScale:
    """Harbor's timeout multipliers: a phase's task.toml timeout times its own
    multiplier, else times `all` (Harbor's `timeout_multiplier`)."""

    all: float = 1.0
    agent: float | None = None
    verifier: float | None = None

    def __post_init__(self) -> None:
        if any(f is not None and not f > 0 for f in (self.all, self.agent, self.verifier)):
            raise ValueError("a timeout multiplier is a number > 0")

    def of(self, phase: float | None) -> float:
        return self.all if phase is None else phase

    def identity(self) -> dict[str, float] | None:
        """What enters a trial's identity: None when no timeout changes (so the trial
        ids of runs without multipliers stay what they were)."""
        agent, verifier = self.of(self.agent), self.of(self.verifier)
        return None if agent == verifier == 1.0 else {"agent": agent, "verifier": verifier}

    @classmethod
    def from_identity(cls, value: object) -> TimeoutScale:
        """The scale `identity()` recorded (run.json); the default for anything else."""
        if not isinstance(value, dict):
            return cls()
        factors = [value.get(k) for k in ("agent", "verifier")]
        if not all(isinstance(f, int | float) and not isinstance(f, bool) and f > 0
                   for f in factors):  # fmt: skip
            return cls()
        return cls(agent=float(factors[0]), verifier=float(factors[1]))  # type: ignore[arg-type]


@dataclass(frozen=True)
class VerifierPlan:
    timeout: float
    #: `[verifier.env]`: test.sh's variables only
    env: dict[str, str]
    user: User | None
    #: the network while the tests run, if it differs from the sandbox's
    network: Network | None
    #: tests folders uploaded to /tests in this order (a step's over the task's)
    tests_dirs: tuple[Path, ...]
    #: the verifier's own sandbox (environment_mode = "separate"); None = shared
    sandbox: SandboxSpec | None = None
    #: `[[verifier.collect]]`: commands run in compose services once the agent stops
    collect: tuple[CollectConfig, ...] = ()


@dataclass(frozen=True)
class StepPlan:
    #: None for a single-step task
    name: str | None
    instruction: str
    agent_timeout: float
    agent_user: User | None
    #: the network while the agent runs, if it differs from the sandbox's
    agent_network: Network | None
    solution_dir: Path
    solution_env: dict[str, str]
    #: `steps/<name>/workdir/`: copied into the working directory before the agent
    workdir_files: Path | None
    healthcheck: HealthCheck | None
    verifier: VerifierPlan
    artifacts: tuple[ArtifactConfig, ...]
    min_reward: MinReward
    #: where the step's files go, relative to the trial's folder ("" for one step)
    folder: str


def network_override(
    mode: NetworkMode | None, baseline: Network, hosts: list[str] | None = None
) -> Network | None:
    """A phase's `network_mode` (and `allowed_hosts`) as a change from the
    sandbox's network; None = none."""
    own = phase_network(mode, hosts)
    return None if own is None or own == baseline else own


def plan_steps(task: Task, scale: TimeoutScale | None = None) -> list[StepPlan]:
    """Each step's plan; `scale` multiplies the agent's and verifier's timeouts."""
    config = task.config
    plans = [_single(task)] if not config.steps else [_step(task, s) for s in config.steps]
    if scale is None or scale.identity() is None:
        return plans
    agent, verifier = scale.of(scale.agent), scale.of(scale.verifier)
    return [
        replace(plan, agent_timeout=plan.agent_timeout * agent,
                verifier=replace(plan.verifier, timeout=plan.verifier.timeout * verifier))
        for plan in plans
    ]  # fmt: skip


def _single(task: Task) -> StepPlan:
    config = task.config
    return StepPlan(
        name=None,
        instruction=task.instruction,
        agent_timeout=config.agent.timeout_sec,
        agent_user=config.agent.user,
        agent_network=network_override(
            config.agent.network_mode, task.sandbox_spec().network, config.agent.allowed_hosts
        ),
        solution_dir=task.solution_dir,
        solution_env=dict(config.solution.env),
        workdir_files=None,
        healthcheck=None,
        verifier=_verifier(task, config.verifier, (task.tests_dir,)),
        artifacts=tuple(config.all_artifacts()),
        min_reward=None,
        folder="",
    )


def _step(task: Task, step: StepConfig) -> StepPlan:
    config = task.config
    folder = task.step_dir(step.name)
    agent = _step_agent(config.agent, step.agent)
    workdir_files = folder / "workdir"
    return StepPlan(
        name=step.name,
        instruction=task.step_instructions[step.name],
        agent_timeout=agent.timeout_sec,
        agent_user=agent.user,
        agent_network=network_override(
            agent.network_mode, task.sandbox_spec().network, agent.allowed_hosts
        ),
        solution_dir=folder / "solution",
        solution_env=dict(config.solution.env),
        workdir_files=workdir_files if workdir_files.is_dir() else None,
        healthcheck=health_check(step.healthcheck),
        verifier=_verifier(task, step_verifier(config, step), (task.tests_dir, folder / "tests")),
        artifacts=(*config.all_artifacts(), *(as_artifact(a) for a in step.artifacts)),
        min_reward=step.min_reward,
        folder=f"steps/{step.name}",
    )


def _step_agent(base: AgentConfig, own: AgentConfig) -> AgentConfig:
    return base.model_copy(update={name: getattr(own, name) for name in own.model_fields_set})


def _verifier(task: Task, verifier: VerifierConfig, tests_dirs: tuple[Path, ...]) -> VerifierPlan:
    sandbox = _separate_sandbox(task, verifier, tests_dirs) if verifier.separate else None
    baseline = (sandbox or task.sandbox_spec()).network
    return VerifierPlan(
        timeout=verifier.timeout_sec,
        env=dict(verifier.env),
        user=verifier.user,
        network=network_override(verifier.network_mode, baseline, verifier.allowed_hosts),
        tests_dirs=tuple(d for d in tests_dirs if d.is_dir()),
        sandbox=sandbox,
        collect=tuple(verifier.collect),
    )


def _separate_sandbox(
    task: Task, verifier: VerifierConfig, tests_dirs: tuple[Path, ...]
) -> SandboxSpec:
    """Harbor's rules: a tests folder with a Dockerfile is the verifier's build
    context (the step's before the task's); else `[verifier.environment]
    docker_image`; else a fresh copy of the agent's environment."""
    env = verifier.environment or task.config.environment
    label = f"{task.name} (verifier)"
    for tests in reversed(tests_dirs):
        key = tests.relative_to(task.path).as_posix()
        if key in task.tests_hashes:
            workdir = env.workdir or dockerfile_workdir(tests / "Dockerfile") or task.workdir
            return sandbox_spec_for(
                env, build_context=tests, context_hash=task.tests_hashes[key],
                workdir=workdir, label=label, network_default=task.network_default,
                host_env=task.host_env,
            )  # fmt: skip
    if verifier.environment is not None:
        workdir = env.workdir or task.workdir
        composed = [d for d in tests_dirs if has_compose(d)]
        return sandbox_spec_for(
            env, build_context=None, context_hash="",
            workdir=workdir, label=label, network_default=task.network_default,
                host_env=task.host_env,
            compose_dir=composed[-1] if composed else None,
        )  # fmt: skip
    return sandbox_spec_for(
        env, build_context=task.environment_dir, context_hash=task.environment_hash,
        workdir=task.workdir, label=label, network_default=task.network_default,
                host_env=task.host_env,
    )  # fmt: skip


def network_record(task: Task) -> dict[str, Any]:
    """Each phase's network, as the trial's config.json says it."""
    baseline = task.sandbox_spec().network
    phases: dict[str, Any] = {"sandbox": describe(baseline)}
    for plan in plan_steps(task):
        prefix = "" if plan.name is None else f"steps.{plan.name}."
        agent = plan.agent_network if plan.agent_network is not None else baseline
        own = plan.verifier.sandbox.network if plan.verifier.sandbox is not None else baseline
        verifier = plan.verifier.network if plan.verifier.network is not None else own
        phases[f"{prefix}agent"] = describe(agent)
        phases[f"{prefix}verifier"] = describe(verifier)
    return phases
