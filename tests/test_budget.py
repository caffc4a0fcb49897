"""Budgets (issue 33): `--max-cost`, `--max-total-tokens`, `--max-duration`, `--budget-hard`.

Against the scripted server, through the engine's run with a toy door whose every
trial is one paid model call (tests/paid_door.py): a run stops near its cap, its
folder resumes to completion with a higher one, nothing lost or counted twice."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helios.engine import OutputsConfig, Run, RunConfig, RunOutcome, SandboxConfig
from helios.engine.budget import BudgetConfig, duration_text, parse_duration
from helios.errors import ConfigError
from helios.models.services import open_model_services
from helios.testing.mock_llm import MockLLMServer

from .paid_door import KEY, MODEL, SCRIPT, Answer, Ask, PaidDoor, services
from .waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def _config(folder: Path, budget: BudgetConfig, n: int = 4, processes: int = 1) -> RunConfig:
    from helios.engine import ConcurrencyConfig

    return RunConfig(kind="paid", sandbox=SandboxConfig(provider=None),
                     concurrency=ConcurrencyConfig(in_flight=n, processes=processes),
                     outputs=OutputsConfig(fixed=folder), budget=budget)  # fmt: skip


async def _invoke(url: str, folder: Path, units: list[Ask], budget: BudgetConfig,
                  door: PaidDoor | None = None, n: int = 4,
                  processes: int = 1) -> RunOutcome[Ask, Answer]:  # fmt: skip
    async with Run(open_services=lambda: services(url, folder.parent)) as run:
        await run.open(_config(folder, budget, n, processes))
        return await run.drive(door or PaidDoor(), units, done=run.store.load_index(),
                               finish=lambda outcome: outcome)  # fmt: skip


def _records(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _run_json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "run.json").read_text())
    return data


def test_durations_parse_as_people_write_them() -> None:
    assert parse_duration("90s") == 90 and parse_duration("45m") == 2700
    assert parse_duration("2h") == 7200 and parse_duration("1h30m") == 5400
    assert parse_duration("12") == 12 and duration_text(5400) == "1h30m"
    with pytest.raises(ConfigError, match="--max-cost 0: must be more than 0"):
        BudgetConfig.of(max_cost=0)
    for bad in ("", "2x", "h", "-1h", "0s"):
        with pytest.raises(ConfigError, match="duration"):
            parse_duration(bad)


def test_a_cost_cap_stops_near_it_and_a_resume_with_a_higher_one_finishes(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    units = [Ask(i) for i in range(200)]
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        url = server.openai_base_url
        probe = asyncio.run(_invoke(url, tmp_path / "probe", units[:1], BudgetConfig()))
        one = probe.recorded[0].usage.cost_usd
        assert one is not None and one > 0
        cap = 100.5 * one  # about half of the 200 trials' cost
        first = asyncio.run(_invoke(url, folder, units, BudgetConfig(max_cost=cap)))
        assert first.budget is not None and first.budget["stopped_by"] == "max_cost"
        assert "--max-cost" in (first.budget_stopped or "")
        records = _records(folder)
        spent = sum(r["spend"]["cost_usd"] for r in records)
        most = max(r["spend"]["cost_usd"] for r in records)
        assert abs(spent - cap) <= most, (spent, cap, len(records))
        assert 80 <= len(records) < 200
        saved = _run_json(folder)["budget"]
        assert saved["stopped_by"] == "max_cost"
        assert saved["spent"]["cost_usd"] == pytest.approx(spent, rel=1e-6)

        second = asyncio.run(_invoke(url, folder, units, BudgetConfig(max_cost=cap * 10)))
        calls = server.stats["served_ok"]
    assert second.budget is not None and second.budget["stopped_by"] is None
    records = _records(folder)
    ids = [r["trial_id"] for r in records]
    assert len(ids) == len(set(ids)) == 200  # nothing lost, nothing run twice
    assert calls == 1 + 200  # the probe's call, then each trial's once
    total = sum(r["spend"]["cost_usd"] for r in records)
    assert second.budget["spent"]["cost_usd"] == pytest.approx(total, rel=1e-6)
    assert _run_json(folder)["budget"]["spent"]["cost_usd"] == pytest.approx(total, rel=1e-6)


def test_a_token_cap_and_a_time_cap_stop_the_run_and_a_resume_finishes(tmp_path: Path) -> None:
    units = [Ask(i) for i in range(60)]
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        url = server.openai_base_url
        tokens = asyncio.run(_invoke(url, tmp_path / "tok", units,
                                     BudgetConfig(max_tokens=200)))  # fmt: skip
        assert tokens.budget is not None and tokens.budget["stopped_by"] == "max_tokens"
        assert len(_records(tmp_path / "tok")) < 60

        door = PaidDoor(hold=0.05)
        timed = asyncio.run(_invoke(url, tmp_path / "time", units, BudgetConfig(max_seconds=0.6),
                                    door=door, n=2))  # fmt: skip
        assert timed.budget is not None and timed.budget["stopped_by"] == "max_seconds"
        done = len(_records(tmp_path / "time"))
        assert 2 <= done < 60
        seconds = _run_json(tmp_path / "time")["seconds"]
        assert seconds >= 0.6
        rest = asyncio.run(_invoke(url, tmp_path / "time", units,
                                   BudgetConfig.of(max_duration="1h"), door=door))  # fmt: skip
        assert rest.budget is not None and rest.budget["stopped_by"] is None
        assert rest.prior_seconds == pytest.approx(seconds, abs=0.01)  # the time adds up
    ids = [r["trial_id"] for r in _records(tmp_path / "time")]
    assert len(ids) == len(set(ids)) == 60


@pytest.mark.parametrize("processes", [1, 2])
def test_a_hard_budget_stops_the_trials_in_flight_and_a_resume_runs_them(
    tmp_path: Path, processes: int
) -> None:
    # in one process, and in worker processes (the parent tells them to stop)
    folder = tmp_path / "run"
    units = [Ask(i) for i in range(6)]
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        url = server.openai_base_url
        probe = asyncio.run(_invoke(url, tmp_path / "probe", units[:1], BudgetConfig()))
        one = probe.recorded[0].usage.cost_usd or 0.0
        started = time.monotonic()
        first = asyncio.run(_invoke(url, folder, units,
                                    BudgetConfig(max_cost=one * 1.5, hard=True),
                                    door=PaidDoor(hold=30), processes=processes))  # fmt: skip
        assert time.monotonic() - started < 20  # stopped, not waited for
        assert first.budget is not None and first.budget["stopped_by"] == "max_cost"
        assert first.budget_stopped is not None  # what makes the CLI exit 3
        stopped = [r for r in _records(folder) if r.get("budget_stopped")]
        assert stopped and all(r["error"].startswith("BudgetStopped") for r in stopped)
        assert len(_records(folder)) == len(stopped)  # each held its call: none finished
        calls = server.stats["served_ok"]
        rest = asyncio.run(_invoke(url, folder, units, BudgetConfig(max_cost=one * 100)))
    assert rest.budget is not None and rest.budget["stopped_by"] is None
    final: dict[str, dict[str, Any]] = {}
    for record in _records(folder):
        final[record["trial_id"]] = record  # a later line wins
    assert len(final) == 6 and all(r["status"] == "passed" for r in final.values())
    # the calls of the stopped trials count (the spend ledger): the probe's call is not
    # this run's, every other one is, once
    spent = rest.budget["spent"]["cost_usd"]
    assert spent == pytest.approx((calls - 1 + 6) * one, rel=0.02), (spent, calls, one)


def test_a_model_without_a_price_is_refused_under_a_cost_budget(tmp_path: Path) -> None:
    async def main() -> None:
        opened = lambda: open_model_services(MODEL, base_url="http://127.0.0.1:9/v1",  # noqa: E731
                                             api_key=KEY)  # fmt: skip
        async with Run(open_services=opened) as run:
            await run.open(_config(tmp_path / "run", BudgetConfig(max_cost=1.0)))

    with pytest.raises(ConfigError, match=f"--max-cost.*{MODEL}") as caught:
        asyncio.run(main())
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()  # refused before anything started


KILLED = """
import asyncio, sys
from pathlib import Path
from helios.engine.budget import BudgetConfig
from tests.paid_door import Ask, PaidDoor
from tests.test_budget import _invoke
asyncio.run(_invoke(sys.argv[1], Path(sys.argv[2]), [Ask(i) for i in range(8)], BudgetConfig(),
                    door=PaidDoor(hold=60, hold_from=4), n=4, processes=int(sys.argv[3])))
"""


def _ledger_tokens(folder: Path) -> int:
    """The tokens of the spend ledger's last whole line (0: none yet)."""
    try:
        lines = (folder / "spend.jsonl").read_text().splitlines(keepends=True)
    except FileNotFoundError:
        return 0
    whole = [line for line in lines if line.endswith("\n")]
    return int(json.loads(whole[-1])["tokens"]) if whole else 0


def test_a_kill_9_then_a_resume_counts_every_call_once(tmp_path: Path) -> None:
    # trials 0-3 are recorded; 4-7 made their call and hold, killed before any record:
    # their spend counts on resume (the spend ledger), and no call counts twice. In one
    # process (the cheaper); with workers the parent keeps the ledger from their usage
    # messages, as the hard budget's test with workers checks
    from helios.engine.budget import tokens_of

    processes = 1

    folder = tmp_path / "run"
    units = [Ask(i) for i in range(8)]
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        url = server.openai_base_url
        probe = asyncio.run(_invoke(url, tmp_path / "probe", units[:1], BudgetConfig()))
        one, tokens = probe.recorded[0].usage.cost_usd or 0.0, tokens_of(probe.recorded[0].usage)
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        process = subprocess.Popen([sys.executable, "-c", KILLED, url, str(folder),
                                    str(processes)], env=env, cwd=ROOT)  # fmt: skip
        try:
            wait_until(lambda: _ledger_tokens(folder) >= 8 * tokens
                       and len(_records(folder)) >= 4,
                       "8 calls made, 4 trials recorded")  # fmt: skip
        finally:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        assert len(_records(folder)) == 4 and server.stats["served_ok"] == 1 + 8
        # a cap just above the 8 calls' spend: one trial more at most (4 without the
        # ledger's count of the killed trials)
        capped = asyncio.run(_invoke(url, folder, units, BudgetConfig(max_cost=8.5 * one), n=1))
        assert capped.budget is not None and capped.budget["stopped_by"] == "max_cost"
        assert len(_records(folder)) - 4 <= 1
        rest = asyncio.run(_invoke(url, folder, units, BudgetConfig(max_cost=1.0)))
    records = _records(folder)
    ids = [r["trial_id"] for r in records]
    assert len(ids) == len(set(ids)) == 8
    # every call of the run counted once: 8 before the kill, 4 after
    assert rest.budget is not None
    assert rest.budget["spent"]["cost_usd"] == pytest.approx(12 * one, rel=1e-6)
    assert rest.budget["spent"]["tokens"] == 12 * tokens


@pytest.mark.usefixtures("need_bwrap")
def test_a_batch_stopped_by_its_budget_exits_3_and_its_folder_resumes(tmp_path: Path) -> None:
    from .conftest import EXAMPLES, helios_cmd
    from .test_tool_agent import KEY as TASK_KEY
    from .test_tool_agent import SCRIPT as TASK_SCRIPT

    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input": 2.0, "output": 10.0}}))

    def helios(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "OPENAI_COMPATIBLE_API_KEY": TASK_KEY}
        return subprocess.run(helios_cmd(*args, "--api-key", TASK_KEY), capture_output=True,
                              text=True, cwd=tmp_path, timeout=300, env=env)  # fmt: skip

    with MockLLMServer(script=TASK_SCRIPT, require_key=TASK_KEY) as server:
        common = ("-m", MODEL, "--base-url", server.openai_base_url, "--prices", str(prices),
                  "--provider", "local", "--workers", "1", "-q")  # fmt: skip
        probe = helios("batch", "tasks", "-k", "1", "-o", "probe", *common)
        assert probe.returncode == 0, probe.stderr
        (probe_dir,) = (tmp_path / "probe").iterdir()
        one = json.loads((probe_dir / "batch_summary.json").read_text())["usage"]["cost_usd"]
        first = helios("batch", "tasks", "-k", "6", "-n", "2", "-o", "out", *common,
                       "--max-cost", str(2.5 * one))  # fmt: skip
        assert first.returncode == 3, first.stderr
        assert "stopped by a budget" in first.stderr and "--max-cost" in first.stderr
        (run_dir,) = (tmp_path / "out").iterdir()
        summary = json.loads((run_dir / "batch_summary.json").read_text())
        assert summary["budget"]["stopped_by"] == "max_cost"
        trials = summary["total_trials"]
        assert 2 <= trials < 6 and summary["not_run"] == 6 - trials
        assert abs(summary["budget"]["spent"]["cost_usd"] - 2.5 * one) <= 1.01 * one
        rest = helios("batch", "--resume", str(run_dir), "--base-url", server.openai_base_url,
                      "--max-cost", str(100 * one), "-q")  # fmt: skip
        assert rest.returncode == 0, rest.stderr
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["total_trials"] == summary["passed"] == 6 and summary["not_run"] == 0
    assert summary["budget"]["stopped_by"] is None
    assert summary["budget"]["spent"]["cost_usd"] == pytest.approx(6 * one, rel=0.05)
    ids = [r["trial_id"] for r in _records(run_dir)]
    assert len(ids) == len(set(ids)) == 6


def test_the_live_line_shows_the_spend_against_each_budget() -> None:
    from helios.engine.budget import BudgetWatch, Spend
    from helios.usage import Usage

    watch = BudgetWatch(BudgetConfig.of(max_cost=2, max_tokens=5000, max_duration="1h"),
                        Spend(cost_usd=0.5, tokens=1000, seconds=600, trials=3))  # fmt: skip
    watch.observe(Usage(input_tokens=150, output_tokens=50, cost_usd=0.25), 720)
    assert watch.against() == "$0.7500/$2 · 1,200/5,000 tok · 12m/1h"
    assert watch.reached() is None
    watch.observe(Usage(input_tokens=150, output_tokens=50, cost_usd=1.5), 720)
    assert watch.reached() == "max_cost"


def test_a_job_file_gives_budgets_and_a_flag_wins(tmp_path: Path) -> None:
    from helios.cli.job_options import apply_job
    from helios.errors import InputError
    from helios.tasks.job import JobConfig
    from helios.tasks.settings import TaskBatchSettings

    job = JobConfig(max_cost=2.0, max_duration="45m", budget_hard=True)
    settings = TaskBatchSettings(budget=BudgetConfig(max_cost=5.0))
    applied = apply_job(settings, job, lambda name: name == "max_cost", tmp_path / "job.yaml")
    assert applied.budget == BudgetConfig(max_cost=5.0, max_seconds=2700, hard=True)
    # in Python, as a dict
    assert TaskBatchSettings(budget={"max_duration": "2h"}).budget.max_seconds == 7200  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"job\.yaml"):
        apply_job(settings, JobConfig(max_duration="soon"), lambda name: False,
                  tmp_path / "job.yaml")  # fmt: skip


def test_a_cost_cap_holds_with_worker_processes(tmp_path: Path) -> None:
    from helios.engine import ConcurrencyConfig

    folder = tmp_path / "run"
    units = [Ask(i) for i in range(60)]

    async def invoke(url: str, budget: BudgetConfig) -> RunOutcome[Ask, Answer]:
        async with Run(open_services=lambda: services(url, tmp_path)) as run:
            config = RunConfig(kind="paid", sandbox=SandboxConfig(provider=None),
                               concurrency=ConcurrencyConfig(in_flight=4, processes=2),
                               outputs=OutputsConfig(fixed=folder), budget=budget)  # fmt: skip
            await run.open(config)
            return await run.drive(PaidDoor(hold=0.02), units, done=run.store.load_index(),
                                   finish=lambda outcome: outcome)  # fmt: skip

    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        url = server.openai_base_url
        probe = asyncio.run(_invoke(url, tmp_path / "probe", units[:1], BudgetConfig()))
        one = probe.recorded[0].usage.cost_usd or 0.0
        first = asyncio.run(invoke(url, BudgetConfig(max_cost=20.5 * one)))
        assert first.budget is not None and first.budget["stopped_by"] == "max_cost"
        spent = sum(r["spend"]["cost_usd"] for r in _records(folder))
        # units already handed to a worker may still start: a few trials past the cap
        assert 20.5 * one - one <= spent <= 20.5 * one + 5 * one
        asyncio.run(invoke(url, BudgetConfig(max_cost=one * 1000)))
    records = _records(folder)
    ids = [r["trial_id"] for r in records]
    assert len(ids) == len(set(ids)) == 60
    assert all(r["status"] == "passed" for r in records)
