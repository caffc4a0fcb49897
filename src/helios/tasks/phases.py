"""A task's settings resolved per phase: what each step's agent and verifier get.

A single-step task is one step with no name whose files are the task's own
(`instruction.md`, `solution/`, `tests/`); a multi-step task has one per
`[[steps]]` table, each falling back to the task's `[agent]` and `[verifier]`
for what it leaves unset. The body (`tasks.body`) only follows these plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helios.environments.base import User
from helios.environments.spec import HealthCheck, SandboxSpec
from helios.tasks.schema import AgentConfig, ArtifactConfig, StepConfig, VerifierConfig
from helios.tasks.schema_env import NetworkMode
from helios.tasks.schema_phases import as_artifact
from helios.tasks.task import Task, dockerfile_workdir, health_check, sandbox_spec_for
from helios.tasks.task_layout import step_verifier

MinReward = float | dict[str, float] | None


@dataclass(frozen=True)
class VerifierPlan:
    timeout: float
    #: `[verifier.env]`: test.sh's variables only
    env: dict[str, str]
    user: User | None
    #: the network while the tests run, if it differs from the sandbox's
    network: bool | None
    #: tests folders uploaded to /tests in this order (a step's over the task's)
    tests_dirs: tuple[Path, ...]
    #: the verifier's own sandbox (environment_mode = "separate"); None = shared
    sandbox: SandboxSpec | None = None


@dataclass(frozen=True)
class StepPlan:
    #: None for a single-step task
    name: str | None
    instruction: str
    agent_timeout: float
    agent_user: User | None
    #: the network while the agent runs, if it differs from the sandbox's
    agent_network: bool | None
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


def network_override(mode: NetworkMode | None, baseline: bool) -> bool | None:
    """A phase's `network_mode` as a change from the sandbox's network; None = none.
    ("allowlist" is refused earlier as unsupported.)"""
    if mode is None or mode == "allowlist":
        return None
    public = mode == "public"
    return None if public == baseline else public


def plan_steps(task: Task) -> list[StepPlan]:
    config = task.config
    if not config.steps:
        return [_single(task)]
    return [_step(task, step) for step in config.steps]


def _single(task: Task) -> StepPlan:
    config = task.config
    return StepPlan(
        name=None,
        instruction=task.instruction,
        agent_timeout=config.agent.timeout_sec,
        agent_user=config.agent.user,
        agent_network=network_override(config.agent.network_mode, task.sandbox_spec().network),
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
        agent_network=network_override(agent.network_mode, task.sandbox_spec().network),
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
        network=network_override(verifier.network_mode, baseline),
        tests_dirs=tuple(d for d in tests_dirs if d.is_dir()),
        sandbox=sandbox,
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
                workdir=workdir, label=label,
            )  # fmt: skip
    if verifier.environment is not None:
        workdir = env.workdir or task.workdir
        return sandbox_spec_for(
            env, build_context=None, context_hash="",
            workdir=workdir, label=label,
        )  # fmt: skip
    return sandbox_spec_for(
        env, build_context=task.environment_dir, context_hash=task.environment_hash,
        workdir=task.workdir, label=label,
    )  # fmt: skip
