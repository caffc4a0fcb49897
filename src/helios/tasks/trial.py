"""One task trial: the task door's unit of work on the engine's episode lifecycle.

A `TrialSpec` (task × attempt × agent × model) becomes an `EpisodeSpec` with the
task's sandbox and a `TaskBody` that runs its steps (one for a single-step
task: instruction, solution, agent, verifier); each step's conversation becomes
`[steps/<name>/]agent/trajectory.json` (ATIF); the outcome a `TrialResult`.
`run_trial` never raises (cancellation aside).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helios.agents.registry import agent_class, agent_version
from helios.engine.episode import (
    Episode,
    EpisodeContext,
    EpisodeSpec,
    run_episode,
    unit_dir,
)
from helios.engine.scheduler import Slot
from helios.environments.desktop.view_mode import ViewMode
from helios.failures import ErrorInfo
from helios.tasks.body import StepRun, TaskBody
from helios.tasks.phases import TimeoutScale, plan_steps
from helios.tasks.results import StepResult, StepStatus, TrialResult, status_for
from helios.tasks.schema import DesktopConfig
from helios.tasks.task import Task
from helios.tasks.verifier import primary_reward
from helios.trajectories.atif_writer import write_atif

# The computer agent's settings and the MCP client are imported by the trials that
# use them: a batch of neither never does.
if TYPE_CHECKING:
    from helios.agents.mcp_tools import MCPServer

#: the context every trial of a batch shares (the engine's)
TrialContext = EpisodeContext
#: the agent that drives a desktop: its trials get one even if the task names none
COMPUTER_AGENT = "computer"


@dataclass(frozen=True)
class TrialSpec:
    trial_id: str
    task: Task
    #: 1-based attempt number
    attempt: int
    agent: str
    agent_settings: dict[str, Any]
    model: str | None
    provider: str
    #: output folder relative to the run folder
    folder: str
    #: how the display names it ("task #2" with k > 1)
    label: str = ""
    #: serve the desktop's view (`--watch`, `--interactive`); not part of the identity
    watch: ViewMode | None = None
    #: the agent's and verifier's timeouts scaled (in `trial_id` when not 1.0)
    timeouts: TimeoutScale | None = None
    #: a retry (`--retry-failed-below`, `engine.retries`): the id of the trial it runs
    #: again, and which retry it is (1, 2, ...); 0: the trial itself
    retry_of: str | None = None
    retry: int = 0

    def identity(self) -> dict[str, Any]:
        """The fields naming this trial in its result, whether it ran or crashed."""
        task = self.task
        return {
            "trial_id": self.trial_id,
            "task_name": task.name,
            "task_path": str(task.source),
            "attempt": self.attempt,
            "agent": self.agent,
            "model": self.model,
            "provider": self.provider,
            "folder": self.folder,
            **({"retry_of": self.retry_of, "retry": self.retry} if self.retry else {}),
        }

    def body(self) -> TaskBody:
        """The trial's phases (a new one per run: it keeps the steps' outcomes)."""
        task = self.task
        ready_image = task.dockerfile is None and task.environment_dir.is_dir()
        return TaskBody(
            plan_steps(task, self.timeouts),
            strategy=task.config.reward_strategy,
            environment_files=task.environment_dir if ready_image else None,
            desktop=self.desktop(),
            watch=self.watch,
        )

    def desktop(self) -> DesktopConfig | None:
        """The desktop the trial gets before its agent: the task's, else the
        defaults when the agent is the computer agent."""
        desktop = self.task.config.desktop
        if desktop is None and self.agent == COMPUTER_AGENT:
            return DesktopConfig()
        return desktop

    def episode_agent_settings(self) -> dict[str, Any]:
        """The agent's settings plus what the task decides for it: whether the
        computer agent may offer bash (`[environment.desktop] bash = true`), which a
        user's setting can never turn on by itself."""
        if self.agent != COMPUTER_AGENT:
            return self.agent_settings
        from helios.agents.computer.settings import TASK_ALLOWS_BASH

        desktop = self.task.config.desktop
        return {**self.agent_settings, TASK_ALLOWS_BASH: desktop is not None and desktop.bash}

    def episode(self, body: TaskBody | None = None) -> EpisodeSpec:
        task = self.task
        return EpisodeSpec(
            trial_id=self.trial_id,
            label=task.name,
            folder=self.folder,
            sandbox=task.sandbox_spec(),
            provider=self.provider,
            agent=self.agent,
            agent_settings=self.episode_agent_settings(),
            instruction=task.instruction,
            agent_timeout=task.config.agent.timeout_sec,
            solution_dir=task.solution_dir,
            body=body or self.body(),
            mcp_servers=_mcp_servers(task),
            skills_dir=task.config.environment.skills_dir,
        )


def _mcp_servers(task: Task) -> tuple[MCPServer, ...]:
    """The MCP servers the task's `[environment]` names, for its agent."""
    configs = task.config.environment.mcp_servers
    if not configs:
        return ()
    from helios.agents.mcp_tools import MCPServer

    return tuple(MCPServer(m.name, m.transport, m.command, tuple(m.args), m.url) for m in configs)


async def run_trial(spec: TrialSpec, ctx: TrialContext, slot: Slot | None = None) -> TrialResult:
    body = spec.body()
    episode = await run_episode(spec.episode(body), ctx, slot)
    for step in body.runs:
        if not step.outcome.conversation:
            continue
        try:
            await asyncio.to_thread(_write_trajectory, spec, ctx, step)
        except OSError as exc:
            episode.error = episode.error or ErrorInfo.from_exception(exc, "agent")
    return trial_result(spec, episode, body)


def _write_trajectory(spec: TrialSpec, ctx: TrialContext, step: StepRun) -> None:
    agent = agent_class(spec.agent)
    services = ctx.services
    folder = unit_dir(ctx, spec.folder)
    if folder is None:
        return
    write_atif(
        folder / step.plan.folder / "agent" / "trajectory.json",
        step.outcome.conversation,
        session_id=spec.trial_id + (f"/{step.plan.name}" if step.plan.name else ""),
        agent_name=f"helios-{agent.name}",
        # an installed agent's: the third-party release it ran (`--agent-version`)
        agent_version=agent_version(spec.agent, spec.agent_settings) or agent.version,
        model_name=services.spec.qualified if services is not None else spec.model,
        tool_definitions=[tool.to_openai() for tool in step.outcome.tools],
        # an early ending (the agent's timeout, ...): the steps until then, said so
        partial=step.agent_note.type if step.agent_note is not None else None,
    )


def step_results(body: TaskBody) -> list[StepResult] | None:
    """Each step's result, in order (the ones that did not run too); None for a
    single-step task."""
    if not body.steps or body.steps[0].name is None:
        return None
    results = [_step_result(run) for run in body.runs]
    for plan in body.steps[len(body.runs) :]:
        results.append(StepResult(name=plan.name or "", status="not_run"))
    return results


def _step_result(run: StepRun) -> StepResult:
    rewards = run.rewards
    error = run.error or (run.score.error if run.score is not None else None)
    status: StepStatus
    if run.error is not None or run.score is None:
        status = "error"
    else:
        status = "passed" if rewards is not None and primary_reward(rewards) >= 1.0 else "failed"
    return StepResult(
        name=run.plan.name or "",
        status=status,
        reward=None if rewards is None else primary_reward(rewards),
        rewards=rewards or {},
        error=error,
        agent_error=run.agent_note,
        below_min_reward=run.below_min_reward,
        turns=run.outcome.n_turns,
        duration=run.duration,
    )


def trial_result(spec: TrialSpec, episode: Episode, body: TaskBody | None = None) -> TrialResult:
    error = episode.error or episode.score.error
    reward = episode.reward
    return TrialResult(
        **spec.identity(),
        status=status_for(reward, episode.error),
        reward=reward,
        rewards=episode.score.rewards,
        error=error,
        agent_error=episode.agent_error,
        teardown_error=episode.teardown_error,
        turns=episode.turns,
        duration=episode.duration,
        timings=episode.timings,
        usage=episode.usage,
        started_at=episode.started_at,
        finished_at=episode.finished_at,
        steps=step_results(body) if body is not None else None,
        reward_strategy=spec.task.config.reward_strategy if spec.task.config.steps else None,
        verifier_note=episode.score.note or None,
    )
