"""`helios.engine.Run`: the layer every door's invocation shares (a folder, its one
lock, run.json, resume with the identity check, the time across resumes),
driven through the toy door of tests/thin_door.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helios.engine import (
    ConcurrencyConfig,
    OutputsConfig,
    Run,
    RunConfig,
    RunInUse,
    RunOutcome,
    SandboxConfig,
)
from helios.errors import ConfigError

from .thin_door import PromptDoor, PromptUnit

UNITS = [PromptUnit("good one", 1), PromptUnit("bad one", 2), PromptUnit("good two", 3)]


def _config(folder: Path, **identity: object) -> RunConfig:
    return RunConfig(
        kind="prompts", sandbox=SandboxConfig(provider="null"),
        outputs=OutputsConfig(fixed=folder), identity=dict(identity),
        recorded={"dataset": "inline"},
    )  # fmt: skip


async def _invoke(config: RunConfig, units: list[PromptUnit]) -> tuple[Run, list[str]]:
    async with Run() as run:
        await run.open(config)
        pending = await run.drive(
            PromptDoor(), units, finish=lambda o: [u.trial_id for u in o.plan.pending]
        )
        return run, pending


def test_a_fixed_folder_is_created_then_resumed_and_its_time_adds_up(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    first, ran = asyncio.run(_invoke(_config(folder, model="m"), UNITS[:2]))
    assert not first.resumed and len(ran) == 2
    data = json.loads((folder / "run.json").read_text())
    assert data["kind"] == "prompts" and data["model"] == "m" and data["dataset"] == "inline"
    assert data["result_settings"] == {}
    after_first, run_id = data["seconds"], data["run_id"]

    second, ran = asyncio.run(_invoke(_config(folder, model="m"), UNITS))
    assert second.resumed and ran == [UNITS[2].trial_id]  # only the new unit runs
    assert second.prior_seconds == pytest.approx(after_first, abs=1e-3)
    data = json.loads((folder / "run.json").read_text())
    assert data["seconds"] >= after_first
    assert data["run_id"] == run_id  # one run, however many invocations
    lines = (folder / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["line"] for line in lines) == [1, 2, 3]


def test_a_resume_with_a_setting_that_changes_results_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    asyncio.run(_invoke(_config(folder, model="m"), UNITS[:1]))
    with pytest.raises(ConfigError, match=r"was run with model='m', not 'other'"):
        asyncio.run(_invoke(_config(folder, model="other"), UNITS))
    forced = _config(folder, model="other").model_copy(
        update={"outputs": OutputsConfig(fixed=folder, force=True)}
    )
    run, ran = asyncio.run(_invoke(forced, UNITS))
    assert run.resumed and len(ran) == 2


def test_two_runs_of_one_folder_at_once_the_second_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"

    async def both() -> None:
        async with Run() as first:
            await first.open(_config(folder))
            async with Run() as second:
                with pytest.raises(RunInUse, match="in use by another Helios process"):
                    await second.open(_config(folder))
        # the first one's lock is released when it closes
        async with Run() as third:
            await third.open(_config(folder))
            assert third.resumed

    asyncio.run(both())


def test_services_that_cannot_open_stop_the_run_before_any_folder(tmp_path: Path) -> None:
    def no_key() -> object:
        raise ConfigError("no API key for anthropic/x")

    async def attempt() -> None:
        async with Run(open_services=no_key):  # type: ignore[arg-type]
            raise AssertionError("not reached")

    with pytest.raises(ConfigError, match="no API key"):
        asyncio.run(attempt())
    assert not (tmp_path / "run").exists()


def test_a_new_folder_per_invocation_under_a_parent(tmp_path: Path) -> None:
    config = RunConfig(kind="demo", sandbox=SandboxConfig(provider="null"),
                       outputs=OutputsConfig(parent=tmp_path, prefix="demo"))  # fmt: skip

    async def twice() -> list[Path]:
        folders = []
        for _ in range(2):
            async with Run() as run:
                await run.open(config)
                folders.append(run.run_dir)
        return folders

    first, second = asyncio.run(twice())
    assert first != second and first.name.startswith("demo_") and second.parent == tmp_path
    assert json.loads((first / "run.json").read_text())["kind"] == "demo"
    with pytest.raises(RuntimeError, match="not open"):
        _ = Run().store


def test_finish_runs_when_the_run_is_interrupted_with_what_was_recorded(tmp_path: Path) -> None:
    """A door's files (a summary) are written however the run ends: `finish` gets the
    outcome of an interrupted run, and the time is kept."""
    folder = tmp_path / "run"
    outcomes: list[RunOutcome[PromptUnit, dict[str, object]]] = []
    units = [PromptUnit(f"good {i}", i) for i in range(6)]

    async def interrupted() -> None:
        async with Run() as run:
            await run.open(_config(folder).model_copy(
                update={"concurrency": ConcurrencyConfig(in_flight=1)}
            ))  # fmt: skip
            task = asyncio.ensure_future(run.drive(
                PromptDoor(delay=0.2), units, finish=outcomes.append,
                on_recorded=lambda unit, result: task.cancel() if unit.line == 1 else None,
            ))  # fmt: skip
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(interrupted())
    [outcome] = outcomes
    assert outcome.interrupted and outcome.aborted is None
    assert [r["line"] for r in outcome.recorded] == [0, 1]
    assert len(outcome.plan.pending) == 6 and outcome.prior_seconds == 0
    assert round(outcome.seconds, 3) == json.loads((folder / "run.json").read_text())["seconds"]

    # the resume runs the four that were not recorded
    run, ran = asyncio.run(_invoke(_config(folder), units))
    assert run.resumed and len(ran) == 4
