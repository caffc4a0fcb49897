"""One unit of work's lifecycle, for every door: sandbox → agent → scorer → teardown.

`run_episode` never raises (cancellation aside): every failure becomes data in
the returned `Episode`. On cancellation the sandbox is still stopped and nothing
is returned, so a resume runs the unit again.

Invariants:
- the sandbox is stopped whatever happened, also after a failed start; so is
  every other sandbox a door's body opened through the session;
- start retries wait out their backoff without holding the scheduler slot;
- the agent starts only once the sandbox's healthcheck (if any) has passed;
  a sandbox that never turns healthy is an infrastructure error, not retried;
- the scorer runs only after the agent has stopped, and only if it exists;
  before it, every process in the sandbox is killed (`Environment.stop_processes`)
  and the scripts of the browser's pages are stopped (`desktop.pages`);
- a teardown failure is recorded beside the outcome (`teardown_error`), never in it;
- an agent timeout is a partial ending: the conversation so far is kept and
  the unit is still scored.

A door whose unit is more than "agent, then scorer" (a task's steps, a
verifier in its own sandbox) gives an `EpisodeBody`: it runs the phases on
the `EpisodeSession`'s primitives, and the session keeps the invariants.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.agents.registry import create_agent
from helios.engine.events import EventSink, PhaseChanged, Retrying
from helios.engine.scheduler import Slot, backoff_sleep
from helios.environments.base import Environment
from helios.environments.desktop.pages import freeze_pages
from helios.environments.health import wait_healthy
from helios.environments.registry import create_environment
from helios.environments.spec import SandboxSpec
from helios.errors import AgentTimeout, EnvironmentStartError, EnvironmentUnavailable
from helios.failures import ErrorInfo
from helios.usage import Usage

if TYPE_CHECKING:
    from helios.agents.mcp_tools import MCPServer
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
    #: one line on why it scored so (a verifier's last meaningful output line), shown
    #: on the unit's line; already safe for a terminal
    note: str = ""


class Scorer(Protocol):
    """Scores a unit after its agent has stopped. Infrastructure failures raise;
    scoring failures come back as `Score.error`."""

    @property
    def phase(self) -> str:
        """The phase name on errors and in the display ("verifier", "evaluator")."""
        ...

    async def score(self, env: Environment, outcome: AgentOutcome, out_dir: Path) -> Score: ...


class EpisodeBody(Protocol):
    """Runs an episode's phases in its first sandbox (already started and healthy)
    in place of the default "agent, then scorer". It fills `session.episode`
    and may raise: the session records the error and stops every sandbox."""

    async def run(self, session: EpisodeSession, env: Environment) -> None: ...


@dataclass(frozen=True)
class EpisodeSpec:
    trial_id: str
    label: str
    #: the unit's folder relative to the run folder; None = the unit keeps no files
    folder: str | None
    sandbox: SandboxSpec
    provider: str
    #: the agent's registered name, made with `agent_settings`; or the agent itself,
    #: when a door adapts an agent of its own kind (the tool-call door's agent under test)
    agent: str | Agent
    agent_settings: Mapping[str, Any]
    instruction: str
    agent_timeout: float
    scorer: Scorer | None = None
    solution_dir: Path | None = None
    #: the tools offered for this unit; None = the agent's default
    tools: Sequence[Tool] | None = None
    #: environment variables for the agent's phase only
    agent_env: Mapping[str, str] = field(default_factory=dict)
    #: environment variables for the reference solution only (the oracle's solve.sh)
    solution_env: Mapping[str, str] = field(default_factory=dict)
    #: the phases to run instead of the default (agent, then scorer)
    body: EpisodeBody | None = None
    #: the MCP servers and the skills folder the unit offers its agent
    mcp_servers: tuple[MCPServer, ...] = ()
    skills_dir: str | None = None


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


@dataclass
class AgentRun:
    """One agent phase: what the agent produced, and why it stopped early (if it did)."""

    outcome: AgentOutcome
    note: ErrorInfo | None = None


class EpisodeSession:
    """One unit's lifecycle and the primitives an `EpisodeBody` runs phases with."""

    def __init__(self, spec: EpisodeSpec, ctx: EpisodeContext, slot: Slot | None) -> None:
        self.spec, self.ctx, self.slot = spec, ctx, slot
        self.dir = unit_dir(ctx, spec.folder)
        self.episode = Episode(spec=spec, started_at=now_iso())
        if ctx.services is not None:  # an unpriced model's cost is unknown from the start
            self.episode.usage = ctx.services.empty_usage()
        #: the phase errors are attributed to
        self.current = "environment"
        self._open: list[Environment] = []

    def phase(self, name: str) -> None:
        self.current = name
        if self.ctx.emit is not None:
            self.ctx.emit(PhaseChanged(self.spec.trial_id, name))

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        """Add the time spent in the block to the episode's timing of `name`."""
        mark = time.monotonic()
        try:
            yield
        finally:
            timings = self.episode.timings
            setattr(timings, name, getattr(timings, name) + time.monotonic() - mark)

    async def start_environment(self, env: Environment) -> None:
        """Build, then start with retries; backoffs do not hold the scheduler slot.
        Then wait for the sandbox's healthcheck."""
        await env.build()
        attempt = 0
        while True:
            try:
                async with self.ctx.start_gate:
                    await env.start()
                break
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
        if env.spec.healthcheck is not None:
            await wait_healthy(env, env.spec.healthcheck)

    async def open_environment(self, sandbox: SandboxSpec) -> Environment:
        """Create and start another sandbox of the unit's provider (e.g. a separate
        verifier's); it is stopped at the end like the first one."""
        env = create_environment(
            self.spec.provider, sandbox, trial_id=self.spec.trial_id, run_id=self.ctx.run_id
        )
        self._open.append(env)
        await self.start_environment(env)
        return env

    async def close_environment(self, env: Environment) -> None:
        """Stop a sandbox now; a failure is recorded as the teardown error."""
        if env in self._open:
            self._open.remove(env)
        with self.timing("teardown"):
            try:
                await env.stop()
            except Exception as exc:
                self.episode.teardown_error = self.episode.teardown_error or (
                    ErrorInfo.from_exception(exc, "teardown")
                )

    async def run_agent(
        self,
        env: Environment,
        *,
        instruction: str | None = None,
        timeout: float | None = None,
        logs_dir: Path | None = None,
        solution_dir: Path | None = None,
        agent_env: Mapping[str, str] | None = None,
        solution_env: Mapping[str, str] | None = None,
    ) -> AgentRun:
        """Run the unit's agent once; a timeout keeps what it said so far. Each
        argument defaults to the spec's."""
        spec = self.spec
        timeout = spec.agent_timeout if timeout is None else timeout
        agent = (spec.agent if isinstance(spec.agent, Agent)
                 else create_agent(spec.agent, **spec.agent_settings))  # fmt: skip
        agent_ctx = AgentContext(
            logs_dir=logs_dir or (self.dir / "agent" if self.dir is not None else None),
            timeout=timeout,
            workdir=env.workdir,
            label=spec.label,
            trial_id=spec.trial_id,
            slot=self.slot,
            emit=self.ctx.emit,
            usage=self.episode.usage,
            services=self.ctx.services,
            tools=spec.tools,
            solution_dir=spec.solution_dir if solution_dir is None else solution_dir,
            exec_env=dict(spec.agent_env if agent_env is None else agent_env),
            solution_env=dict(spec.solution_env if solution_env is None else solution_env),
            mcp_servers=spec.mcp_servers,
            skills_dir=spec.skills_dir,
        )
        # What the agent said so far survives a timeout: the context owns it.
        run = AgentRun(AgentOutcome(conversation=agent_ctx.conversation))
        try:
            async with asyncio.timeout(timeout):
                run.outcome = await agent.run(
                    spec.instruction if instruction is None else instruction, env, agent_ctx
                )
        except TimeoutError:
            run.note = ErrorInfo.from_exception(AgentTimeout("agent", timeout), "agent")
            run.outcome.n_turns = _turns(agent_ctx)
            run.outcome.tools = list(agent_ctx.tool_specs)
            return run
        run.note = run.outcome.error
        return run

    async def score(self, env: Environment, scorer: Scorer, out_dir: Path | None = None) -> Score:
        """Kill everything the agent left running, then score the sandbox."""
        self.phase(scorer.phase)
        with self.timing("verifier"):
            # Nothing the agent started may still run while it is scored.
            await env.stop_processes()
            await freeze_pages(env)  # a page the agent loaded in the browser service too
            if out_dir is None:
                out_dir = self.dir / scorer.phase if self.dir is not None else Path()
            return await scorer.score(env, self.episode.outcome, out_dir)

    async def _sandbox(self) -> SandboxSpec:
        """The unit's sandbox as its agent needs it (`Agent.prepare_sandbox`)."""
        spec = self.spec
        try:
            agent = (spec.agent if isinstance(spec.agent, Agent)
                     else create_agent(spec.agent, **spec.agent_settings))  # fmt: skip
        except Exception:  # said again, in the agent's phase, when it runs
            return spec.sandbox
        return await agent.prepare_sandbox(
            spec.sandbox, provider=spec.provider, services=self.ctx.services,
            logs_dir=self.dir / "agent" if self.dir is not None else None,
        )  # fmt: skip

    async def execute(self) -> None:
        spec = self.spec
        try:
            self.phase("environment")
            with self.timing("environment"):
                sandbox = await self._sandbox()
                env = create_environment(
                    spec.provider, sandbox, trial_id=spec.trial_id, run_id=self.ctx.run_id
                )
                self._open.append(env)
                await self.start_environment(env)
            await (spec.body or _DEFAULT_BODY).run(self, env)
        except Exception as exc:
            self.episode.error = ErrorInfo.from_exception(exc, self.current)
        finally:
            for opened in reversed(list(self._open)):
                await self.close_environment(opened)


class _AgentThenScorer:
    """The default body: the agent, then the scorer if there is one."""

    async def run(self, session: EpisodeSession, env: Environment) -> None:
        session.phase("agent")
        with session.timing("agent"):
            run = await session.run_agent(env)
        session.episode.outcome, session.episode.agent_error = run.outcome, run.note
        if session.spec.scorer is not None:
            session.episode.score = await session.score(env, session.spec.scorer)


_DEFAULT_BODY = _AgentThenScorer()


def _turns(ctx: AgentContext) -> int:
    return sum(1 for message in ctx.conversation if message.role == "assistant")


async def run_episode(spec: EpisodeSpec, ctx: EpisodeContext, slot: Slot | None = None) -> Episode:
    lifecycle = EpisodeSession(spec, ctx, slot)
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
