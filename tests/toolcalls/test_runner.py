"""run / run_concurrent on the engine: isolation of failures, bounds, retries, sharing."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from helios import toolcalls as russo
from helios.errors import ConfigError
from helios.models.errors import AuthError, RateLimitError
from helios.models.retry import RetryPolicy
from helios.toolcalls.evaluators import ExactEvaluator

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02)
BOOK = russo.tool_call("book_flight", from_city="NYC", to_city="LA")
needs_espeak = pytest.mark.espeak


class CountingSynthesizer:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on

    async def synthesize(self, text: str) -> russo.Audio:
        self.calls.append(text)
        await asyncio.sleep(0.01)
        if text == self.fail_on:
            raise RuntimeError("the voice broke")
        return russo.Audio(data=b"\x00" * 4800, format="pcm", transcript=text)


def booking_agent(**kwargs: Any) -> Any:
    @russo.agent
    async def agent(audio: russo.Audio) -> russo.AgentResponse:
        return russo.AgentResponse(tool_calls=[BOOK])

    return agent


@needs_espeak
def test_seed_example_with_espeak_speech() -> None:
    heard: list[russo.Audio] = []

    @russo.agent
    async def fake_agent(audio: russo.Audio) -> russo.AgentResponse:
        heard.append(audio)
        return russo.AgentResponse(tool_calls=[BOOK])

    async def main() -> russo.BatchResult:
        return await russo.run_concurrent(
            prompts=["Book a flight from Berlin to Rome", "Fly me from Tokyo to Sydney"],
            synthesizer=russo.EspeakSynthesizer(),
            agent=fake_agent,
            evaluator=ExactEvaluator(ignore_extra_args=True),
            expect=[russo.tool_call("book_flight")],
            runs=3,
            max_concurrency=4,
            cache=False,
        )

    result = asyncio.run(main())
    assert result.passed and result.total == 6
    assert result.summary().splitlines()[:4] == [
        "PASSED (100% pass rate, 6 runs)",
        "  Passed: 6/6",
        "  Prompt: 'Book a flight from Berlin to Rome'",
        "    3/3 passed",
    ]
    assert "    [+] run 2: 100% match" in result.summary()
    assert {a.transcript for a in heard} == {"Book a flight from Berlin to Rome",
                                             "Fly me from Tokyo to Sydney"}  # fmt: skip
    assert all(a.data[:4] == b"RIFF" and a.sample_rate == 24000 and a.duration > 0.5
               for a in heard)  # fmt: skip
    # Synthesized once per prompt: the three runs of a prompt got the very same audio.
    assert len({id(a) for a in heard}) == 2


def test_an_agent_that_raises_in_10_percent_of_runs_fails_exactly_those() -> None:
    """The benchmark's shape (1,000 runs, 5 ms, max_concurrency=200), checked, not timed."""
    calls = 0

    @russo.agent
    async def flaky(audio: russo.Audio) -> russo.AgentResponse:
        nonlocal calls
        calls += 1
        n = calls
        await asyncio.sleep(0.005)
        if n % 10 == 0:
            raise ValueError(f"boom {n}")
        return russo.AgentResponse(tool_calls=[BOOK])

    prompts = [f"Book flight {i}" for i in range(10)]
    result = asyncio.run(russo.run_concurrent(
        prompts, CountingSynthesizer(), flaky, None, [BOOK], runs=100, max_concurrency=200,
    ))  # fmt: skip
    assert result.total == 1000 == calls
    assert result.failed_count == 100 == result.error_count
    for run in result.errors:
        assert run.error is not None
        assert (run.error.type, run.error.phase) == ("ValueError", "agent")
        assert run.error.message.startswith("boom ")
    assert result.summary().count("error in agent: ValueError: boom") == 100
    assert len({run.error.message for run in result.errors if run.error}) == 100


def test_a_synthesizer_that_raises_fails_that_prompts_runs_only() -> None:
    synth = CountingSynthesizer(fail_on="bad")
    result = asyncio.run(russo.run_concurrent(
        ["good", "bad"], synth, booking_agent(), None, [BOOK], runs=3, max_concurrency=2,
    ))  # fmt: skip
    assert [run.passed for run in result.runs] == [True] * 3 + [False] * 3
    assert all(run.error and run.error.phase == "synthesis" for run in result.runs[3:])
    assert sorted(synth.calls) == ["bad", "good"]  # once per prompt, failure included


def test_max_concurrency_is_a_bound() -> None:
    in_flight = peak = 0

    @russo.agent
    async def slow(audio: russo.Audio) -> russo.AgentResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.005)
        in_flight -= 1
        return russo.AgentResponse(tool_calls=[BOOK])

    result = asyncio.run(russo.run_concurrent(
        ["a", "b", "c"], CountingSynthesizer(), slow, None, [BOOK], runs=10, max_concurrency=4,
    ))  # fmt: skip
    assert result.passed and result.total == 30
    assert peak == 4


def test_none_runs_all_at_once() -> None:
    in_flight = peak = 0

    @russo.agent
    async def slow(audio: russo.Audio) -> russo.AgentResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return russo.AgentResponse(tool_calls=[BOOK])

    asyncio.run(russo.run_concurrent("a", CountingSynthesizer(), slow, None, [BOOK], runs=50))
    assert peak == 50


def test_transient_agent_errors_are_retried() -> None:
    attempts = 0

    @russo.agent
    async def flaky(audio: russo.Audio) -> russo.AgentResponse:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RateLimitError("slow down", retry_after=0.01)
        if attempts == 2:
            raise ConnectionResetError("dropped")
        if attempts == 3:
            raise TimeoutError()
        return russo.AgentResponse(tool_calls=[BOOK])

    result = asyncio.run(russo.run_concurrent(
        "a", CountingSynthesizer(), flaky, None, [BOOK], retry_policy=FAST,
    ))  # fmt: skip
    assert result.passed
    assert result.runs[0].retries == 3


def test_a_hung_agent_times_out_and_gives_up() -> None:
    @russo.agent
    async def hung(audio: russo.Audio) -> russo.AgentResponse:
        await asyncio.sleep(60)
        raise AssertionError("unreachable")

    result = asyncio.run(russo.run_concurrent(
        "a", CountingSynthesizer(), hung, None, [BOOK], retry_policy=FAST, timeout=0.05,
    ))  # fmt: skip
    error = result.runs[0].error
    assert error is not None and error.type == "RetriesExhausted"
    assert "timed out" in error.message
    assert result.runs[0].retries == FAST.max_attempts - 1


def test_a_rejected_key_stops_the_batch_and_unstarted_runs_are_reported() -> None:
    @russo.agent
    async def denied(audio: russo.Audio) -> russo.AgentResponse:
        await asyncio.sleep(0.01)
        raise AuthError("bad key")

    result = asyncio.run(russo.run_concurrent(
        "a", CountingSynthesizer(), denied, None, [BOOK], runs=20, max_concurrency=2,
    ))  # fmt: skip
    assert result.total == 20 and result.failed_count == 20
    kinds = {run.error.type for run in result.runs if run.error}
    assert kinds == {"AuthError", "NotRun"}
    assert "stopped early" in result.summary()


def test_expect_per_prompt_with_cases() -> None:
    @russo.agent
    async def echo(audio: russo.Audio) -> russo.AgentResponse:
        return russo.AgentResponse(tool_calls=[russo.tool_call(audio.transcript or "")])

    result = asyncio.run(russo.run_concurrent(
        cases=[("alpha", [russo.tool_call("alpha")]), ("beta", [{"name": "beta"}]),
               ("gamma", [russo.tool_call("delta")])],
        synthesizer=CountingSynthesizer(), agent=echo, runs=2,
    ))  # fmt: skip
    assert [r.passed for r in result.runs] == [True, True, True, True, False, False]


def test_run_returns_an_eval_result_and_never_raises() -> None:
    @russo.agent
    async def broken(audio: russo.Audio) -> Any:
        return "not a response"

    result = asyncio.run(russo.run("a", CountingSynthesizer(), broken, expect=[BOOK]))
    assert isinstance(result, russo.EvalResult)
    assert not result.passed and result.error is not None
    assert result.error.type == "TypeError"


def test_an_evaluator_that_raises_is_a_failed_run() -> None:
    class Broken:
        def evaluate(self, expected: Any, actual: Any) -> Any:
            raise KeyError("oops")

    result = asyncio.run(russo.run("a", CountingSynthesizer(), booking_agent(), Broken(), [BOOK]))
    assert result.error is not None and result.error.phase == "evaluator"


def test_bad_invocations_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="text mode"):
        asyncio.run(russo.run_concurrent("a", None, booking_agent(), None, [BOOK]))
    with pytest.raises(ConfigError, match="max_concurrency"):
        asyncio.run(russo.run_concurrent("a", CountingSynthesizer(), booking_agent(),
                                         max_concurrency=0))  # fmt: skip
    with pytest.raises(ConfigError, match="runs"):
        asyncio.run(russo.run_concurrent("a", CountingSynthesizer(), booking_agent(), runs=0))


def test_output_dir_keeps_records_and_a_summary(tmp_path: Path) -> None:
    result = asyncio.run(russo.run_concurrent(
        ["a", "b"], CountingSynthesizer(), booking_agent(), None, [BOOK], runs=2,
        output_dir=tmp_path,
    ))  # fmt: skip
    assert result.passed
    (run_dir,) = tmp_path.iterdir()
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4 and '"status": "passed"' in lines[0]
    assert '"pass_rate": 1.0' in (run_dir / "toolcalls_summary.json").read_text()


def test_progress_line_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    result = asyncio.run(russo.run_concurrent(
        "a", CountingSynthesizer(), booking_agent(), None, [BOOK], runs=5,
        show_progress=True, console=console,
    ))  # fmt: skip
    assert result.passed
    assert "5/5" in out.getvalue() and "Passed: 5" in out.getvalue()


def test_builtin_synthesizers_are_cached_on_disk(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    synth = CountingSynthesizer()
    asyncio.run(russo.run_concurrent("a", synth, booking_agent(), None, [BOOK], cache=True))
    asyncio.run(russo.run_concurrent("a", synth, booking_agent(), None, [BOOK], cache=True))
    assert synth.calls == ["a"]  # the second batch read .helios_cache/audio
    assert (tmp_path / ".helios_cache" / "audio").is_dir()
    asyncio.run(russo.run_concurrent("a", synth, booking_agent(), None, [BOOK]))
    assert synth.calls == ["a", "a"]  # a user's synthesizer is not cached unless asked
