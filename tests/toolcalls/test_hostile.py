"""Breaking the feature on purpose: hostile agents and endpoints, shared caches,
duplicate prompts, memory held by shared audio."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from helios import toolcalls as russo
from helios.engine import EndpointCalls, EpisodeContext, Slot
from helios.models.errors import BadRequestError
from helios.models.retry import RetryPolicy
from helios.toolcalls import transport
from helios.toolcalls.cache import AudioCache, CachedSynthesizer
from helios.toolcalls.door import ToolCallDoor
from helios.toolcalls.evaluators import ExactEvaluator
from helios.toolcalls.runner import Case, plan_units

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02)


class Synth:
    def __init__(self) -> None:
        self.calls = 0

    async def synthesize(self, text: str) -> russo.Audio:
        self.calls += 1
        await asyncio.sleep(0.005)
        return russo.Audio(data=text.encode() * 100, format="pcm", transcript=text)


def test_the_same_prompt_with_two_expectations_keeps_both_results() -> None:
    @russo.agent
    async def agent(audio: russo.Audio) -> russo.AgentResponse:
        return russo.AgentResponse(tool_calls=[russo.tool_call("a")])

    synth = Synth()
    result = asyncio.run(russo.run_concurrent(
        cases=[("same", [russo.tool_call("a")]), ("same", [russo.tool_call("b")])],
        synthesizer=synth, agent=agent, runs=2,
    ))  # fmt: skip
    assert [run.passed for run in result.runs] == [True, True, False, False]
    assert synth.calls == 1  # one text, one synthesis


def test_a_prompts_audio_is_dropped_after_its_last_run() -> None:
    seen: list[int] = []
    door: ToolCallDoor

    @russo.agent
    async def agent(audio: russo.Audio) -> russo.AgentResponse:
        seen.append(len(door.audio))
        return russo.AgentResponse()

    calls = EndpointCalls(policy=FAST, limit=1, timeout=5)
    door = ToolCallDoor(synthesizer=Synth(), agent=agent, evaluator=ExactEvaluator(),
                        text_mode=False, agent_calls=calls, synthesizer_calls=calls)  # fmt: skip
    units = plan_units([Case("a", runs=1), Case("b", runs=3)])
    door.plan(units)
    ctx = EpisodeContext(run_id="r", run_dir=None, start_gate=asyncio.Semaphore(1))

    async def go() -> None:
        for unit in units:  # a#0, b#0, b#1, b#2
            await door.run_unit(unit, ctx, Slot(asyncio.Semaphore(1)))

    asyncio.run(go())
    assert [u.label for u in units] == ["a #0", "b #0", "b #1", "b #2"]
    assert seen == [1, 1, 1, 1]  # a's audio went when a#0 ended; b's stays for its runs
    assert len(door.audio) == 0


def test_an_agent_returning_garbage_fails_its_run_only() -> None:
    answers: list[Any] = [
        {"tool_calls": "nope"},
        russo.AgentResponse(tool_calls=[russo.tool_call("ok")]),
        [{"name": 42}],
        None,
        [{"name": "ok", "arguments": {"deep": [[[{"x": None}]]]}}],
    ]

    @russo.agent
    async def hostile(audio: russo.Audio) -> Any:
        return answers[int((audio.transcript or "p0")[1:])]

    result = asyncio.run(russo.run_concurrent(
        [f"p{i}" for i in range(len(answers))], Synth(), hostile,
        ExactEvaluator(ignore_extra_args=True), [russo.tool_call("ok")],
    ))  # fmt: skip
    assert [run.passed for run in result.runs] == [False, True, False, False, True]
    assert all(run.error is not None for run in (result.runs[0], result.runs[2], result.runs[3]))


def test_an_endpoint_that_floods_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 10_000)

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(100):
            await response.write(b"x" * 1000)
        await response.write_eof()
        return response

    async def go() -> Exception:
        app = web.Application()
        app.router.add_post("/agent", flood)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        agent = russo.HttpAgent(f"http://127.0.0.1:{port}/agent")
        try:
            await agent.run(russo.Audio(data=base64.b64encode(b"x")))
        except Exception as exc:
            return exc
        finally:
            await agent.aclose()
            await runner.cleanup()
        raise AssertionError("no error")

    error = asyncio.run(go())
    assert isinstance(error, BadRequestError) and "more than 10000 bytes" in str(error)


def test_concurrent_writers_share_a_cache_safely(tmp_path: Path) -> None:
    async def go() -> list[russo.Audio]:
        synths = [CachedSynthesizer(Synth(), cache=AudioCache(tmp_path)) for _ in range(8)]
        return await asyncio.gather(*(s.synthesize("shared") for s in synths))

    audios = asyncio.run(go())
    assert len({a.data for a in audios}) == 1
    assert AudioCache(tmp_path).size() == 1
    assert not list(tmp_path.glob("*.tmp"))
    key = next(tmp_path.glob("*.json")).stem
    assert AudioCache(tmp_path).get(key) is not None


def test_a_leftover_temp_file_from_a_killed_writer_is_harmless(tmp_path: Path) -> None:
    cache = AudioCache(tmp_path)
    (tmp_path / ".abc.audio.123.tmp").write_bytes(b"half")
    synth = CachedSynthesizer(Synth(), cache=cache)
    asyncio.run(synth.synthesize("x"))
    assert cache.size() == 1
    assert cache.clear() == 1 and not list(tmp_path.iterdir())


def test_an_unreachable_agent_fails_fast_and_stops_the_batch(closed_port: int) -> None:
    import time

    port = closed_port
    agent = russo.HttpAgent(f"http://127.0.0.1:{port}/agent")
    started = time.monotonic()
    result = asyncio.run(russo.run_concurrent(
        "Book", Synth(), agent, None, [russo.tool_call("book_flight")], runs=50,
        max_concurrency=2, retry_policy=FAST,
    ))  # fmt: skip
    assert time.monotonic() - started < 10
    assert result.total == 50 and result.failed_count == 50
    kinds = [run.error.type for run in result.runs if run.error]
    assert kinds.count("ConnectionError") >= 3
    assert set(kinds) == {"ConnectionError", "NotRun"}
    first = next(run.error for run in result.runs if run.error and run.error.type != "NotRun")
    assert first is not None and f"cannot connect to 127.0.0.1:{port}: connection refused" in (
        first.message)  # fmt: skip
