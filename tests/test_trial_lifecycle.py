"""Trial lifecycle details with a scripted in-memory environment (no sandbox needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

from helios.engine.scheduler import Scheduler, Slot
from helios.environments import registry
from helios.environments.base import Environment, ExecResult
from helios.errors import EnvironmentStartError
from helios.tasks.task import Task, load_task
from helios.tasks.trial import TrialContext, TrialSpec, run_trial

from .conftest import TaskMaker


class FlakyEnv(Environment):
    """Fails to start `fail_starts` times, then behaves like an always-passing sandbox."""

    name: ClassVar[str] = "flaky"
    fail_starts: ClassVar[int] = 2
    starts: ClassVar[int] = 0
    stops: ClassVar[int] = 0

    async def start(self) -> None:
        type(self).starts += 1
        if type(self).starts <= self.fail_starts:
            raise EnvironmentStartError("daemon busy")

    async def exec(self, command: str, **kwargs: Any) -> ExecResult:
        return ExecResult("", "", 0)

    async def upload(self, src: Path, dst: str) -> None:
        return None

    async def download(self, src: str, dst: Path) -> None:
        dst.mkdir(parents=True, exist_ok=True)
        (dst / "reward.txt").write_text("1")

    async def stop(self) -> None:
        type(self).stops += 1


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> type[FlakyEnv]:
    FlakyEnv.starts = FlakyEnv.stops = 0
    real = registry._builtins
    monkeypatch.setattr(registry, "_builtins", lambda: {**real(), "flaky": FlakyEnv})
    return FlakyEnv


def _spec(task: Task, folder: str = "001_t") -> TrialSpec:
    return TrialSpec(
        trial_id="t1",
        task=task,
        attempt=1,
        agent="nop",
        agent_settings={},
        model=None,
        provider="flaky",
        folder=folder,
    )


def _ctx(tmp_path: Path, retries: int) -> TrialContext:
    return TrialContext(
        run_id="r",
        run_dir=tmp_path / "run",
        start_gate=asyncio.Semaphore(1),
        start_retries=retries,
        start_backoff=0.05,
    )


def test_start_failures_are_retried_then_pass(
    flaky: type[FlakyEnv], make_task: TaskMaker, tmp_path: Path
) -> None:
    result = asyncio.run(run_trial(_spec(load_task(make_task("t"))), _ctx(tmp_path, retries=2)))
    assert flaky.starts == 3 and result.passed and result.error is None


def test_start_failures_beyond_retries_are_an_error(
    flaky: type[FlakyEnv], make_task: TaskMaker, tmp_path: Path
) -> None:
    result = asyncio.run(run_trial(_spec(load_task(make_task("t"))), _ctx(tmp_path, retries=1)))
    assert result.status == "error" and result.error is not None
    assert result.error.type == "EnvironmentStartError" and result.error.phase == "environment"
    assert flaky.stops >= 2  # stopped after each failed start, and at the end


def test_retry_backoff_does_not_hold_the_slot(
    flaky: type[FlakyEnv], make_task: TaskMaker, tmp_path: Path
) -> None:
    task = load_task(make_task("t"))
    order: list[str] = []
    ctx = _ctx(tmp_path, retries=3)
    ctx.start_backoff = 0.3

    async def job(name: str, slot: Slot) -> None:
        if name == "flaky":
            await run_trial(_spec(task), ctx, slot)
        order.append(name)

    asyncio.run(Scheduler(job, n_concurrent=1).run(["flaky", "quick"]))
    assert order == ["quick", "flaky"]


def test_plugin_provider_via_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeEntryPoint:
        name = "flaky-plugin"
        value = "tests.test_trial_lifecycle:FlakyEnv"

        def load(self) -> type[FlakyEnv]:
            return FlakyEnv

    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEntryPoint()])
    assert "flaky-plugin" in registry.available_providers()
    assert registry.provider_class("flaky-plugin") is FlakyEnv
