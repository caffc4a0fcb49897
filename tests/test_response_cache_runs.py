"""The response cache through the doors (issue 33): a batch run twice with `cache=True`
makes no model call the second time and gives the same rewards, with each hit marked
in its trajectory and counted in the summary; tool-call runs each keep their own
answer; `helios cache show` explains a key a trajectory names; the run saves the
setting, so a resume keeps it."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from helios import ParallelRunner
from helios import toolcalls as russo
from helios.cli.app import app
from helios.tasks.report import results_panel
from helios.testing.mock_llm import MockLLMServer
from helios.trajectories.atif import validate_trajectory

SCRIPT = json.loads((Path(__file__).parent / "fixtures" / "scripted_examples.json").read_text())
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "responses"
    monkeypatch.setenv("HELIOS_CACHE_DIR", str(folder))
    return folder


def _entries(folder: Path) -> list[Path]:
    return [p for p in folder.glob("??/*") if not p.name.startswith(".")]


def test_tool_call_runs_each_keep_their_answer(cache_dir: Path, tmp_path: Path) -> None:
    script = {"scenarios": [{"match": "*", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip
    expect = [russo.tool_call("book_flight", to_city="LA")]
    with MockLLMServer(script=script) as server:

        def run() -> Any:
            agent = russo.ModelAgent("openai-compatible/mock", [{"name": "book_flight"}],
                                     base_url=server.openai_base_url, cache=True)  # fmt: skip
            return asyncio.run(russo.run_concurrent("Book", None, agent, expect=expect, runs=3))

        first = run()
        assert server.stats["requests"] == 3 and len(_entries(cache_dir)) == 3
        second = run()
        assert server.stats["requests"] == 3  # no call the second time
    assert first.passed and second.passed and first.passed_count == second.passed_count == 3
    assert second.usage is not None
    assert (second.usage.calls, second.usage.cache_hits) == (0, 3)


def test_generate_opens_its_model_with_the_cache(cache_dir: Path, tmp_path: Path) -> None:
    from helios.datagen.routing import open_services
    from helios.datagen.settings import GenerateSettings

    settings = GenerateSettings(
        dataset_file=tmp_path / "p.jsonl", batch_size=1, run_name="r",
        base_url="http://127.0.0.1:9/v1", model="m", cache=True,
    )  # fmt: skip
    services = open_services(settings)
    assert services.cache is not None and services.cache.directory == cache_dir
    settings.cache = False
    assert open_services(settings).cache is None


@pytest.mark.usefixtures("need_bwrap")
def test_a_batch_run_twice_with_the_cache_calls_no_model_the_second_time(
    cache_dir: Path, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    for name in ("hello-file", "word-count"):
        shutil.copytree(EXAMPLES / name, tasks / name)
    with MockLLMServer(script=SCRIPT) as server:

        def batch(output: str, workers: int) -> Any:
            runner = ParallelRunner(
                [tasks], output_dir=str(tmp_path / output), provider="local",
                model="openai-compatible/scripted", base_url=server.openai_base_url,
                api_key="sk-never-stored-0123456789", n_attempts=2, cache=True,
                show_progress=False, quiet=True, workers=workers,
            )  # fmt: skip
            return asyncio.run(runner.run())

        first = batch("one", workers=1)
        calls = server.stats["requests"]
        assert calls > 0 and len(_entries(cache_dir)) == calls
        second = batch("two", workers=2)  # the hits are in worker processes
        assert server.stats["requests"] == calls  # 0 model calls the second time
    rewards = [(r.name, r.attempt, r.reward) for r in first.results]
    assert rewards == [(r.name, r.attempt, r.reward) for r in second.results]
    assert second.passed == first.passed == 4
    assert (second.usage.calls, second.usage.cache_hits) == (0, calls)
    assert second.usage.cache_saved_tokens == first.usage.input_tokens + first.usage.output_tokens
    run_dir = second.output_dir
    assert run_dir is not None
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["usage"]["cache_hits"] == calls
    panel = io.StringIO()
    Console(file=panel, width=160, color_system=None).print(results_panel(second))
    assert f"Response cache  {calls:,} hits" in panel.getvalue(), panel.getvalue()
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["config"]["settings"]["models"]["cache"] is True  # resume keeps it
    attempts = sorted(run_dir.glob("001_hello-file/attempt_*/agent/trajectory.json"))
    first_keys = {json.loads(p.read_text())["steps"][2]["extra"]["response_cache"]["key"]
                  for p in attempts}  # fmt: skip
    assert len(attempts) == len(first_keys) == 2  # each attempt its own answer (-k 2)
    trajectory = json.loads(attempts[0].read_text())
    assert validate_trajectory(trajectory) == []
    agent_steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    marks = [s["extra"]["response_cache"] for s in agent_steps]
    assert marks and all(m["hit"] for m in marks)
    assert trajectory["final_metrics"]["extra"]["response_cache_hits"] == len(marks)
    assert all(s["metrics"]["cost_usd"] == 0.0 for s in agent_steps)
    for path in cache_dir.rglob("*"):
        assert not path.is_file() or b"sk-never-stored" not in path.read_bytes()
    # `helios cache show` explains the key a trajectory names
    shown = CliRunner().invoke(app, ["cache", "show", marks[0]["key"][:12]])
    assert shown.exit_code == 0, shown.output
    assert "scripted" in shown.output and "sample    " in shown.output
    stats = CliRunner().invoke(app, ["cache", "stats", "--json"])
    assert json.loads(stats.output)["entries"] == calls
    assert "removed" in CliRunner().invoke(app, ["cache", "clear"]).output
    assert _entries(cache_dir) == []


@pytest.mark.usefixtures("need_bwrap")
def test_a_resume_keeps_the_cache_unless_no_cache(cache_dir: Path, tmp_path: Path) -> None:
    from .cli_inprocess import helios_inprocess

    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    with MockLLMServer(script=SCRIPT) as server:
        url = server.openai_base_url
        common = ("--base-url", url, "--api-key", "k", "-q")
        first = helios_inprocess("batch", "tasks", "--provider", "local", "-o", "out",
                                 "-m", "openai-compatible/scripted", "--cache", *common,
                                 cwd=tmp_path)  # fmt: skip
        assert first.returncode == 0, first.stderr
        (run_dir,) = (tmp_path / "out").iterdir()
        stored = len(_entries(cache_dir))
        assert stored == server.stats["requests"] > 0
        # a second attempt, by a resume without --cache: its answers are kept too
        resumed = helios_inprocess("batch", "--resume", str(run_dir), "-k", "2", "--force",
                                   *common, cwd=tmp_path)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert len(_entries(cache_dir)) == 2 * stored
        shown = helios_inprocess("config", "show", str(run_dir), cwd=tmp_path)
        assert "cache: true" in shown.stdout, shown.stdout  # the job file runs it cached
        requests = server.stats["requests"]
        again = helios_inprocess("batch", "--resume", str(run_dir), "-k", "3", "--force",
                                 "--no-cache", *common, cwd=tmp_path)  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert len(_entries(cache_dir)) == 2 * stored  # off: nothing kept
        assert server.stats["requests"] == requests + stored


@pytest.mark.usefixtures("need_bwrap")
def test_generate_twice_with_the_cache_calls_no_model_the_second_time(
    cache_dir: Path, tmp_path: Path
) -> None:
    from helios.datagen import BatchRunner
    from tests.datagen.conftest import SCRIPT as GENERATE_SCRIPT
    from tests.datagen.conftest import write_dataset

    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go."])
    with MockLLMServer(script=GENERATE_SCRIPT) as server:

        def generate(name: str) -> Any:
            return BatchRunner(
                dataset_file=dataset, batch_size=1, run_name=name, distribution="terminal_only",
                base_url=server.openai_base_url, api_key="k", model="mock", seed=7,
                output_dir=tmp_path / "data", console=Console(file=io.StringIO()), cache=True,
            ).run()  # fmt: skip

        first = generate("one")
        calls = server.stats["requests"]
        second = generate("two")
        assert calls > 0 and server.stats["requests"] == calls
    assert first.rows == second.rows == 2
    usage = json.loads((second.run_dir / "statistics.json").read_text())["usage"]
    assert usage["cache_hits"] == calls and usage["output_tokens"] == 0


def test_a_toolcalls_config_caches_its_model_agent(cache_dir: Path, tmp_path: Path) -> None:
    script = {"scenarios": [{"match": "flight", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        config = tmp_path / "c.yaml"
        config.write_text(
            "synthesizer: null\n"
            "agent:\n  name: model\n  params:\n    model: openai-compatible/scripted\n"
            f"    base_url: {server.openai_base_url}\n    cache: true\n"
            "    tools: [{name: book_flight}]\n"
            "tests:\n  - id: flight\n    prompt: Book a flight to LA\n"
            "    expect: [{name: book_flight, arguments: {to_city: LA}}]\n    runs: 2\n"
        )
        outputs = [CliRunner().invoke(app, ["toolcalls", "--config", str(config)])
                   for _ in range(2)]  # fmt: skip
        assert server.stats["served_ok"] == 2  # the second invocation replayed both runs
    assert all(o.exit_code == 0 and "[2/2 runs]" in o.output for o in outputs), outputs
    assert len(_entries(cache_dir)) == 2
