"""A task trial's phases on the engine's episode session: each step (one for a
single-step task) runs its setup, its agent and its verifier, in order, in the
one sandbox the engine started.

A task with a desktop (`[environment.desktop]`, a Harbor computer-use task, or
any task run by the computer agent) gets it first: Helios starts its services
(Xvfb, a window manager, Chromium; x11vnc under `--watch`) before any agent, the
oracle too, and announces it (`DesktopReady`); the computer agent attaches to it.
The services outlive the agent's processes, into the verifier.

Per step:
1. setup: `steps/<name>/workdir/` is copied into the working directory and its
   `setup.sh` runs as the agent's user (a failure stops the trial); then the
   step's healthcheck, if any;
2. the agent, as `[agent] user` (a `UserView`), with the phase's network;
3. every process the agent left is killed; then the verifier:
   - shared: in the same sandbox (`verifier.run_tests`), then the artifacts
     are collected;
   - separate: the artifacts are collected from the agent's sandbox, which is
     stopped if no step follows, and the tests run in a fresh sandbox that
     holds only those artifacts (and /tests);
4. the step's `min_reward` decides whether the next step runs.
The trial's reward comes from the steps' by the task's reward strategy.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from helios.agents.base import AgentOutcome
from helios.atomic_write import write_bytes_atomic
from helios.engine.episode import EpisodeSession, Score
from helios.engine.events import DesktopReady
from helios.environments.base import Environment
from helios.environments.desktop.pages import freeze_pages, thaw_pages
from helios.environments.desktop.view_mode import ViewMode
from helios.environments.health import describe, wait_healthy
from helios.environments.view import as_user
from helios.errors import HeliosError
from helios.failures import ErrorInfo
from helios.tasks.artifacts import Collected, collect, transfer
from helios.tasks.collect import run_collect
from helios.tasks.phases import StepPlan
from helios.tasks.rewards import combine, meets_min_reward
from helios.tasks.schema import DesktopConfig
from helios.tasks.verifier import primary_reward, run_tests
from helios.trajectories.images import FINAL_SCREEN, IMAGES_DIR

# The desktop is imported when a task's trial starts one (`_start_desktop`): a
# batch without a GUI task never does.
if TYPE_CHECKING:
    from helios.environments.desktop.desktop import Desktop

SETUP_SCRIPT = "setup.sh"
#: the trial folder's record of what an allowlisted network denied
EGRESS_LOG = "egress.log"


class StepSetupFailed(HeliosError):
    """A step's workdir/setup.sh failed: the task's own setup, so the trial stops."""

    kind = "StepSetupFailed"


#: seconds for the final screenshot after a non-computer agent
FINAL_SCREEN_TIMEOUT = 15.0


@dataclass
class StepRun:
    """What one step produced (kept as it goes, so an error keeps the steps before)."""

    plan: StepPlan
    outcome: AgentOutcome = field(default_factory=AgentOutcome)
    agent_note: ErrorInfo | None = None
    score: Score | None = None
    error: ErrorInfo | None = None
    artifacts: list[Collected] = field(default_factory=list)
    below_min_reward: bool = False
    duration: float = 0.0

    @property
    def rewards(self) -> dict[str, float] | None:
        """The verifier's rewards; None when it produced none."""
        score = self.score
        return None if score is None or score.error is not None else score.rewards


@dataclass
class TaskBody:
    steps: list[StepPlan]
    strategy: str = "mean"
    #: `environment/` of a task that runs a ready image (`docker_image`, no
    #: Dockerfile): Harbor copies its files into the working directory at start
    environment_files: Path | None = None
    #: the desktop brought up before any agent runs; None = none
    desktop: DesktopConfig | None = None
    #: serve the desktop's view on the host (`--watch`, `--interactive`)
    watch: ViewMode | None = None
    runs: list[StepRun] = field(default_factory=list)
    #: the desktop started for the trial (None: the task has none, or not yet)
    _desktop: Desktop | None = field(default=None, repr=False)
    #: the browser's pages are stopped (`freeze_pages`) since the last agent ended
    _frozen: bool = field(default=False, repr=False)

    async def run(self, session: EpisodeSession, env: Environment) -> None:
        if self.environment_files is not None:
            with session.timing("environment"):
                await env.upload(self.environment_files, env.workdir)
        if self.desktop is not None:
            with session.timing("environment"):
                self._desktop = await _start_desktop(session, env, self.desktop, self.watch)
        try:
            for index, plan in enumerate(self.steps):
                step = StepRun(plan)
                self.runs.append(step)
                last = index == len(self.steps) - 1
                await self._timed_step(session, env, step, last)
                if not meets_min_reward(step.rewards, plan.min_reward):
                    step.below_min_reward = True
                    break
        finally:
            self._finish(session)
            await _keep_egress_log(session, env)

    async def _timed_step(
        self, session: EpisodeSession, env: Environment, step: StepRun, last: bool
    ) -> None:
        mark = time.monotonic()
        try:
            await self._step(session, env, step, last)
        except Exception as exc:
            step.error = ErrorInfo.from_exception(exc, session.current)
            raise
        finally:
            step.duration = time.monotonic() - mark

    async def _step(
        self, session: EpisodeSession, env: Environment, step: StepRun, last: bool
    ) -> None:
        plan = step.plan
        folder = session.dir / plan.folder if session.dir is not None else None
        if folder is not None:
            await asyncio.to_thread((folder / "agent").mkdir, parents=True, exist_ok=True)
        if plan.workdir_files is not None or plan.healthcheck is not None:
            session.phase("environment")
            with session.timing("environment"):
                await _setup(env, plan)
        session.phase("agent")
        with session.timing("agent"):
            if self._frozen:  # the previous step's pages: this step's agent goes on with them
                await thaw_pages(env)
                self._frozen = False
            baseline = env.network
            if plan.agent_network is not None:
                await env.set_network(plan.agent_network)
            try:
                run = await session.run_agent(
                    as_user(env, plan.agent_user),
                    instruction=plan.instruction,
                    timeout=plan.agent_timeout,
                    logs_dir=folder / "agent" if folder is not None else None,
                    solution_dir=plan.solution_dir,
                    solution_env=plan.solution_env,
                )
            finally:
                await env.set_network(baseline)
        step.outcome, step.agent_note = run.outcome, run.note
        session.phase("verifier")
        with session.timing("verifier"), _kept_or_scratch(folder) as base:
            await env.stop_processes()  # nothing the agent started runs while it is scored
            await run_collect(env, plan.verifier.collect, base / "verifier")
            self._frozen = await freeze_pages(env)  # nor its pages' scripts, in the browser
            if self._desktop is not None and folder is not None:
                await _keep_final_screen(self._desktop, folder / "agent" / IMAGES_DIR)
            if plan.verifier.sandbox is None:
                step.score = await run_tests(env, plan.verifier, base / "verifier")
                step.artifacts = await collect(env, plan.artifacts, base / "artifacts")
            else:
                await self._separate(session, env, step, base, last)

    async def _separate(
        self, session: EpisodeSession, env: Environment, step: StepRun, base: Path, last: bool
    ) -> None:
        plan = step.plan
        sandbox = plan.verifier.sandbox
        assert sandbox is not None
        step.artifacts = await collect(env, plan.artifacts, base / "artifacts")
        if last:
            # Nothing of the agent's runs, or even exists, while the verifier does.
            await session.close_environment(env)
        verifier_env = await session.open_environment(sandbox)
        session.phase("verifier")
        try:
            await transfer(verifier_env, base / "artifacts", step.artifacts, plan.verifier.user)
            step.score = await run_tests(
                verifier_env, plan.verifier, base / "verifier", separate=True
            )
        finally:
            await session.close_environment(verifier_env)

    def _finish(self, session: EpisodeSession) -> None:
        """The episode's outcome and score from the steps: a single step's as they
        are; a multi-step task's combined by the reward strategy."""
        episode = session.episode
        if not self.runs:
            return
        if self.steps[0].name is None:
            only = self.runs[0]
            episode.outcome, episode.agent_error = only.outcome, only.agent_note
            episode.score = only.score or Score()
            return
        episode.outcome = AgentOutcome(n_turns=sum(r.outcome.n_turns for r in self.runs))
        episode.agent_error = next((r.agent_note for r in self.runs if r.agent_note), None)
        combined = combine([r.rewards for r in self.runs if r.score is not None], self.strategy)
        scored = [r.score for r in self.runs if r.score is not None]
        note = scored[-1].note if scored else ""
        if combined is None:
            error = scored[-1].error if scored else None
            episode.score = Score(error=error, note=note)
        else:
            episode.score = Score(reward=primary_reward(combined), rewards=combined, note=note)


async def _keep_egress_log(session: EpisodeSession, env: Environment) -> None:
    """The requests the sandbox's egress proxy denied, in the trial's `egress.log`
    (an allowlisted network's; none without one)."""
    denials = env.egress_denials()
    if denials and session.dir is not None:
        text = "".join(line + "\n" for line in denials)
        with contextlib.suppress(OSError):
            await asyncio.to_thread((session.dir / EGRESS_LOG).write_text, text)


async def _setup(env: Environment, plan: StepPlan) -> None:
    """Copy the step's workdir/ files in, run its setup.sh, then its healthcheck."""
    files = plan.workdir_files
    if files is not None:
        workdir = env.workdir
        await env.upload(files, workdir)
        if plan.agent_user is not None:
            for entry in sorted(p.name for p in files.iterdir()):
                await env.give_to(f"{workdir.rstrip('/')}/{entry}", plan.agent_user)
        if (files / SETUP_SCRIPT).is_file():
            script = shlex.quote(f"./{SETUP_SCRIPT}")
            command = f"if command -v bash >/dev/null; then bash {script}; else sh {script}; fi"
            result = await as_user(env, plan.agent_user).exec(command, timeout=plan.agent_timeout)
            if not result.ok:
                raise StepSetupFailed(
                    f"steps/{plan.name}/workdir/setup.sh failed: "
                    f"{describe(result, plan.agent_timeout)}"
                )
    if plan.healthcheck is not None:
        await wait_healthy(env, plan.healthcheck, what=f"step {plan.name!r}")


async def _start_desktop(
    session: EpisodeSession, env: Environment, config: DesktopConfig, mode: ViewMode | None
) -> Desktop:
    """The task's desktop, up and announced; with `--watch`, its view too (started
    now, before any agent process exists: see `vnc.start_vnc`). A view that cannot
    be had leaves the trial as it is: it is announced without one."""
    from helios.environments.desktop import vnc
    from helios.environments.desktop.actions import Geometry
    from helios.environments.desktop.desktop import Desktop, DesktopUnavailable

    geometry = Geometry(config.width, config.height)
    desktop = await Desktop.start(env, geometry, start_url=config.start_url)
    endpoint: vnc.VncEndpoint | None = None
    if mode is not None and desktop.tools.x11vnc:
        try:
            endpoint = await vnc.start_vnc(env, interactive=mode == "control")
        except DesktopUnavailable:
            endpoint = None
    emit = session.ctx.emit
    if emit is not None:
        spec = session.spec
        emit(DesktopReady(
            spec.trial_id, spec.label, desktop.geometry.width, desktop.geometry.height,
            vnc_socket=endpoint.socket if endpoint else None,
            vnc_namespace=endpoint.namespace if endpoint else None,
            interactive=endpoint.interactive if endpoint else False,
            folder=str(session.dir) if session.dir is not None else None,
        ))  # fmt: skip
    return desktop


async def _keep_final_screen(desktop: Desktop, images: Path) -> None:
    """The screen the verifier will see (the agent's processes are gone, the
    desktop's services are not), as `images/final.png`, unless the agent kept its
    own. Taken within FINAL_SCREEN_TIMEOUT; a desktop the agent broke leaves none:
    a missing picture is no reason to fail a trial that may still pass."""
    target = images / FINAL_SCREEN
    if await asyncio.to_thread(target.exists):
        return
    try:
        async with asyncio.timeout(FINAL_SCREEN_TIMEOUT):
            data = await desktop.screenshot()
        await asyncio.to_thread(write_bytes_atomic, target, data)
    except Exception:  # failures are data; a missing picture is not even a failure
        return


@contextmanager
def _kept_or_scratch(folder: Path | None) -> Iterator[Path]:
    """The step's folder, or a scratch folder removed afterwards when the trial
    keeps no files (the verifier and a separate verifier's artifacts need one)."""
    if folder is not None:
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="helios-step-") as scratch:
        yield Path(scratch)
