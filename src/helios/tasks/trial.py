"""One task trial: the task door's unit of work on the engine's episode lifecycle.

A `TrialSpec` (task × attempt × agent × model) becomes an `EpisodeSpec` with the
task's sandbox, instruction, timeouts, solution and verifier; the episode's
conversation becomes `agent/trajectory.json` (ATIF); the outcome a `TrialResult`.
`run_trial` never raises (cancellation aside).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from helios.agents.registry import agent_class
from helios.engine.episode import (
    Episode,
    EpisodeContext,
    EpisodeSpec,
    run_episode,
    unit_dir,
)
from helios.engine.scheduler import Slot
from helios.failures import ErrorInfo
from helios.tasks.results import TrialResult, status_for
from helios.tasks.task import Task
from helios.tasks.verifier import Verifier
from helios.trajectories.atif_writer import write_atif

#: the context every trial of a batch shares (the engine's)
TrialContext = EpisodeContext


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

    def episode(self) -> EpisodeSpec:
        task = self.task
        return EpisodeSpec(
            trial_id=self.trial_id,
            label=task.name,
            folder=self.folder,
            sandbox=task.sandbox_spec(),
            provider=self.provider,
            agent=self.agent,
            agent_settings=self.agent_settings,
            instruction=task.instruction,
            agent_timeout=task.config.agent.timeout_sec,
            scorer=Verifier(task),
            solution_dir=task.solution_dir,
        )


async def run_trial(spec: TrialSpec, ctx: TrialContext, slot: Slot | None = None) -> TrialResult:
    episode = await run_episode(spec.episode(), ctx, slot)
    if episode.outcome.conversation:
        try:
            await asyncio.to_thread(_write_trajectory, spec, ctx, episode)
        except OSError as exc:
            episode.error = episode.error or ErrorInfo.from_exception(exc, "agent")
    return trial_result(spec, episode)


def _write_trajectory(spec: TrialSpec, ctx: TrialContext, episode: Episode) -> None:
    agent = agent_class(spec.agent)
    services = ctx.services
    folder = unit_dir(ctx, spec.folder)
    if folder is None:
        return
    write_atif(
        folder / "agent" / "trajectory.json",
        episode.outcome.conversation,
        session_id=spec.trial_id,
        agent_name=f"helios-{agent.name}",
        agent_version=agent.version,
        model_name=services.spec.qualified if services is not None else spec.model,
        tool_definitions=[tool.to_openai() for tool in episode.outcome.tools],
    )


def trial_result(spec: TrialSpec, episode: Episode) -> TrialResult:
    error = episode.error or episode.score.error
    reward = episode.reward
    return TrialResult(
        trial_id=spec.trial_id,
        task_name=spec.task.name,
        task_path=str(spec.task.path),
        attempt=spec.attempt,
        agent=spec.agent,
        model=spec.model,
        provider=spec.provider,
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
        folder=spec.folder,
    )
