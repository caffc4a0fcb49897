"""One unit of work's lifecycle, for every door: sandbox → agent → scorer → teardown.

`run_episode` never raises (cancellation aside): every failure becomes data in
the returned `Episode`. On cancellation the sandbox is still stopped and nothing
is returned, so a resume runs the unit again.

Invariants:
- the sandbox is stopped whatever happened, also after a failed start;
- start retries wait out their backoff without holding the scheduler slot;
- the scorer runs only after the agent has stopped, and only if it exists;
  before it, every process in the sandbox is killed (`Environment.stop_processes`);
- a teardown failure is recorded beside the outcome (`teardown_error`), never in it;
- an agent timeout is a partial ending: the conversation so far is kept and
  the unit is still scored.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from helios.agents.base import AgentContext, AgentOutcome
from helios.agents.registry import create_agent
from helios.engine.events import EventSink, PhaseChanged, Retrying
from helios.engine.scheduler import Slot, backoff_sleep
from helios.environments.base import Environment
from helios.environments.registry import create_environment
from helios.environments.spec import SandboxSpec
from helios.errors import AgentTimeout, EnvironmentStartError, EnvironmentUnavailable
from helios.failures import ErrorInfo
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.agents.toolsets.base import Tool
    from helios.models.services import ModelServices


class PhaseTimings(BaseModel):
    environment: float = 0.0
    agent: float = 0.0
    #: the scoring phase (the verifier, for tasks)
    verifier: float = 0.0
    teardown: float = 0.0


@dataclass
class Score:
    reward: float = 0.0
    rewards: dict[str, float] = field(default_factory=dict)
    #: the scorer could not score (e.g. no reward file): reward 0, still a result
    error: ErrorInfo | None = None


class Scorer(Protocol):
    """Scores a unit after its agent has stopped. Infrastructure failures raise;
    scoring failures come back as `Score.error`."""

    @property
    def phase(self) -> str:
        """The phase name on errors and in the display ("verifier", "evaluator")."""
        ...

    async def score(self, env: Environment, outcome: AgentOutcome, out_dir: Path) -> Score: ...


@dataclass(frozen=True)
class EpisodeSpec:
    trial_id: str
    label: str
    #: the unit's folder relative to the run folder; None = the unit keeps no files
    folder: str | None
    sandbox: SandboxSpec
    provider: str
    agent: str
    agent_settings: Mapping[str, Any]
    instruction: str
    agent_timeout: float
    scorer: Scorer | None = None
    solution_dir: Path | None = None
    #: the tools offered for this unit; None = the agent's default
    tools: Sequence[Tool] | None = None
    #: environment variables for the agent's phase only
    agent_env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class EpisodeContext:
    """What every unit of one batch shares."""

    run_id: str
    #: the run folder; None when nothing is kept on disk
    run_dir: Path | None
    #: bounds sandbox starts at once (container start is CPU-heavy)
    start_gate: asyncio.Semaphore
    start_retries: int = 2
    start_backoff: float = 2.0
    emit: EventSink | None = None
    services: ModelServices | None = None


@dataclass
class Episode:
    """What one unit produced. Failures are data; `error` is the first one."""

    spec: EpisodeSpec
    started_at: str
    error: ErrorInfo | None = None
    agent_error: ErrorInfo | None = None
    #: stopping the sandbox failed: recorded beside the outcome, never changes it
    teardown_error: ErrorInfo | None = None
    score: Score = field(default_factory=Score)
    outcome: AgentOutcome = field(default_factory=AgentOutcome)
    usage: Usage = field(default_factory=Usage)
    timings: PhaseTimings = field(default_factory=PhaseTimings)
    finished_at: str = ""
    duration: float = 0.0

    @property
    def reward(self) -> float:
        return self.score.reward if self.error is None else 0.0

    @property
    def turns(self) -> int:
        return self.outcome.n_turns


def unit_dir(ctx: EpisodeContext, folder: str | None) -> Path | None:
    """The unit's host folder, if it keeps files."""
    if folder is None or ctx.run_dir is None:
        return None
    return ctx.run_dir / folder


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Lifecycle:
    def __init__(self, spec: EpisodeSpec, ctx: EpisodeContext, slot: Slot | None) -> None:
        self.spec, self.ctx, self.slot = spec, ctx, slot
        self.dir = unit_dir(ctx, spec.folder)
        self.episode = Episode(spec=spec, started_at=now_iso())

    def phase(self, name: str) -> None:
        if self.ctx.emit is not None:
            self.ctx.emit(PhaseChanged(self.spec.trial_id, name))

    async def start_environment(self, env: Environment) -> None:
        """Build, then start with retries; backoffs do not hold the scheduler slot."""
        await env.build()
        attempt = 0
        while True:
            try:
                async with self.ctx.start_gate:
                    await env.start()
                return
            except EnvironmentUnavailable:
                raise
            except EnvironmentStartError:
                attempt += 1
                if attempt > self.ctx.start_retries:
                    raise
                await env.stop()
                delay = self.ctx.start_backoff * 2 ** (attempt - 1) * (0.5 + random.random())
                if self.ctx.emit is not None:
                    self.ctx.emit(Retrying(self.spec.trial_id, "environment", delay))
                await backoff_sleep(self.slot, delay)

    async def run_agent(self, env: Environment) -> None:
        spec, episode = self.spec, self.episode
        agent = create_agent(spec.agent, **spec.agent_settings)
        agent_ctx = AgentContext(
            logs_dir=self.dir / "agent" if self.dir is not None else None,
            timeout=spec.agent_timeout,
            workdir=spec.sandbox.workdir,
            label=spec.label,
            trial_id=spec.trial_id,
            slot=self.slot,
            emit=self.ctx.emit,
            usage=episode.usage,
            services=self.ctx.services,
            tools=spec.tools,
            solution_dir=spec.solution_dir,
            exec_env=dict(spec.agent_env),
        )
        # What the agent said so far survives a timeout: the context owns it.
        episode.outcome = AgentOutcome(conversation=agent_ctx.conversation)
        try:
            async with asyncio.timeout(spec.agent_timeout):
                episode.outcome = await agent.run(spec.instruction, env, agent_ctx)
        except TimeoutError:
            timeout = AgentTimeout("agent", spec.agent_timeout)
            episode.agent_error = ErrorInfo.from_exception(timeout, "agent")
            episode.outcome.n_turns = _turns(agent_ctx)
            episode.outcome.tools = list(agent_ctx.tool_specs)
            return
        episode.agent_error = episode.outcome.error

    async def execute(self) -> None:
        spec, episode = self.spec, self.episode
        phase = "environment"
        env = create_environment(
            spec.provider, spec.sandbox, trial_id=spec.trial_id, run_id=self.ctx.run_id
        )
        mark = time.monotonic()
        try:
            self.phase("environment")
            await self.start_environment(env)
            episode.timings.environment = time.monotonic() - mark
            phase, mark = "agent", time.monotonic()
            self.phase("agent")
            await self.run_agent(env)
            episode.timings.agent = time.monotonic() - mark
            if spec.scorer is not None:
                phase, mark = spec.scorer.phase, time.monotonic()
                self.phase(phase)
                # Nothing the agent started may still run while it is scored.
                await env.stop_processes()
                out_dir = self.dir / phase if self.dir is not None else Path()
                episode.score = await spec.scorer.score(env, episode.outcome, out_dir)
                episode.timings.verifier = time.monotonic() - mark
        except Exception as exc:
            episode.error = ErrorInfo.from_exception(exc, phase)
        finally:
            mark = time.monotonic()
            try:
                await env.stop()
            except Exception as exc:
                episode.teardown_error = ErrorInfo.from_exception(exc, "teardown")
            episode.timings.teardown = time.monotonic() - mark


def _turns(ctx: AgentContext) -> int:
    return sum(1 for message in ctx.conversation if message.role == "assistant")


async def run_episode(spec: EpisodeSpec, ctx: EpisodeContext, slot: Slot | None = None) -> Episode:
    lifecycle = _Lifecycle(spec, ctx, slot)
    started = time.monotonic()
    if lifecycle.dir is not None:
        subdirs = ["agent"] + ([spec.scorer.phase] if spec.scorer is not None else [])
        for sub in subdirs:
            (lifecycle.dir / sub).mkdir(parents=True, exist_ok=True)
    try:
        await lifecycle.execute()
    except Exception as exc:  # a bug in the lifecycle itself: still data
        lifecycle.episode.error = ErrorInfo.from_exception(exc, "internal")
    episode = lifecycle.episode
    episode.duration = time.monotonic() - started
    episode.finished_at = now_iso()
    return episode
