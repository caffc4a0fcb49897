"""Tool-call runs go through the engine (issue 20): an episode per run (null sandbox,
the agent under test behind an adapter, the evaluator as scorer), the engine's
endpoint calls (limiter, timeout per attempt, retries), the model layer's error
mapping, one ToolCall type."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from helios import toolcalls as russo
from helios.engine import EndpointCalls, EpisodeContext, SharedValues, Slot
from helios.events import Event, PhaseChanged, Retrying
from helios.models import ToolCall
from helios.models.errors import RetriesExhausted, TransientError
from helios.models.retry import RetryPolicy
from helios.testing.mock_llm import MockLLMServer
from helios.toolcalls.door import ToolCallDoor
from helios.toolcalls.evaluators import ExactEvaluator
from helios.toolcalls.report import batch_document
from helios.toolcalls.runner import Case, plan_units
from helios.toolcalls.transport import classify

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02)
BOOK = russo.tool_call("book_flight", to_city="LA")
ANSWER = {"tool_calls": [{"name": "book_flight", "arguments": {"to_city": "LA"}}]}


class Synth:
    async def synthesize(self, text: str) -> russo.Audio:
        return russo.Audio(data=b"\x00" * 480, format="pcm", transcript=text)


@asynccontextmanager
async def endpoint(answers: list[tuple[int, Any]]) -> AsyncIterator[tuple[str, list[int]]]:
    """An HTTP agent on 127.0.0.1 that gives `answers` (status, JSON body) in turn, then
    the booking; yields its URL and the statuses it sent."""
    sent: list[int] = []

    async def agent(request: web.Request) -> web.Response:
        status, body = answers.pop(0) if answers else (200, ANSWER)
        sent.append(status)
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_post("/agent", agent)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/agent", sent
    finally:
        await runner.cleanup()


def test_a_flaky_http_agent_is_retried_by_the_engine() -> None:
    async def go() -> tuple[russo.BatchResult, list[int]]:
        async with endpoint([(503, {"error": "busy"}), (500, {"error": "oops"})]) as (url, sent):
            agent = russo.HttpAgent(url)
            result = await russo.run_concurrent("Book", Synth(), agent, None, [BOOK],
                                                retry_policy=FAST)  # fmt: skip
            return result, sent

    result, sent = asyncio.run(go())
    assert result.passed, result.summary()
    assert sent == [503, 500, 200]
    assert result.runs[0].retries == 2


def test_a_context_length_400_is_a_context_window_error_and_not_retried() -> None:
    too_long = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }

    async def go() -> tuple[russo.BatchResult, list[int]]:
        async with endpoint([(400, too_long)] * 5) as (url, sent):
            agent = russo.HttpAgent(url)
            result = await russo.run_concurrent("Book", Synth(), agent, None, [BOOK],
                                                retry_policy=FAST)  # fmt: skip
            return result, sent

    result, sent = asyncio.run(go())
    error = result.runs[0].error
    assert error is not None
    assert (error.type, error.phase) == ("ContextWindowError", "agent")
    assert "maximum context length is 8192 tokens" in error.message
    assert sent == [400] and result.runs[0].retries == 0
    assert "error in agent: ContextWindowError: " in result.summary()


def test_http_statuses_map_as_the_model_layer_maps_them() -> None:
    from aiohttp import ClientResponseError, RequestInfo
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL

    def error(status: int, message: str) -> Exception:
        info = RequestInfo(URL("http://x/agent"), "POST", CIMultiDictProxy(CIMultiDict()))
        return ClientResponseError(info, (), status=status, message=message,
                                   headers=CIMultiDict({"retry-after": "7"}))  # fmt: skip

    assert type(classify(error(400, "prompt is too long"))).__name__ == "ContextWindowError"
    assert type(classify(error(400, "no such field"))).__name__ == "BadRequestError"
    assert type(classify(error(401, "bad key"))).__name__ == "AuthError"
    limited: Any = classify(error(429, "slow down"))
    assert type(limited).__name__ == "RateLimitError" and limited.retry_after == 7.0
    assert classify(error(503, "busy")).retryable  # type: ignore[union-attr]
    assert classify(ConnectionResetError("dropped")).retryable  # type: ignore[union-attr]
    assert classify(ValueError("a bug")) is None


def test_each_run_is_an_engine_episode_on_the_null_sandbox() -> None:
    events: list[Event] = []
    heard: list[str] = []

    @russo.agent
    async def agent(audio: russo.Audio) -> russo.AgentResponse:
        heard.append(audio.transcript or "")
        return russo.AgentResponse(tool_calls=[BOOK])

    calls = EndpointCalls(policy=FAST, limit=1, timeout=5)
    door = ToolCallDoor(synthesizer=Synth(), agent=agent, evaluator=ExactEvaluator(),
                        text_mode=False, agent_calls=calls, synthesizer_calls=calls)  # fmt: skip
    units = plan_units([Case("Book", (BOOK,), runs=2)])
    door.plan(units)
    ctx = EpisodeContext(run_id="r", run_dir=None, start_gate=asyncio.Semaphore(1),
                         emit=events.append)  # fmt: skip

    async def go() -> list[Any]:
        return [await door.run_unit(unit, ctx, Slot(asyncio.Semaphore(1))) for unit in units]

    results = asyncio.run(go())
    assert [r.passed for r in results] == [True, True]
    assert heard == ["Book", "Book"]
    phases = [(e.trial_id, e.phase) for e in events if isinstance(e, PhaseChanged)]
    first, second = units[0].trial_id, units[1].trial_id
    # the first run makes the audio; both are episodes: sandbox, agent, scorer
    assert phases == [(first, "synthesis"), (first, "environment"), (first, "agent"),
                      (first, "evaluator"), (second, "environment"), (second, "agent"),
                      (second, "evaluator")]  # fmt: skip


def test_retries_are_announced_with_their_phase() -> None:
    events: list[Event] = []
    attempts = 0

    @russo.agent
    async def flaky(audio: russo.Audio) -> russo.AgentResponse:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise TransientError("busy")
        return russo.AgentResponse(tool_calls=[BOOK])

    calls = EndpointCalls(policy=FAST, limit=1, timeout=5)
    door = ToolCallDoor(synthesizer=Synth(), agent=flaky, evaluator=ExactEvaluator(),
                        text_mode=False, agent_calls=calls, synthesizer_calls=calls)  # fmt: skip
    (unit,) = plan_units([Case("Book", (BOOK,))])
    ctx = EpisodeContext(run_id="r", run_dir=None, start_gate=asyncio.Semaphore(1),
                         emit=events.append)  # fmt: skip
    result = asyncio.run(door.run_unit(unit, ctx, Slot(asyncio.Semaphore(1))))
    assert result.passed and result.retries == 1
    (retry,) = [e for e in events if isinstance(e, Retrying)]
    assert (retry.trial_id, retry.phase, retry.error) == (unit.trial_id, "agent",
                                                          "TransientError: busy")  # fmt: skip


# -- text mode: the model layer's limiter and retries are the only ones -----------------------
@pytest.fixture
def mock() -> Iterator[MockLLMServer]:
    script = {"scenarios": [{"match": "*", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        yield server


def _model_agent(mock: MockLLMServer, attempts: int) -> russo.ModelAgent:
    return russo.ModelAgent(
        "openai-compatible/mock", [{"name": "book_flight", "parameters": {"type": "object"}}],
        base_url=mock.openai_base_url,
        retry_policy=RetryPolicy(max_attempts=attempts, base_delay=0.01, max_delay=0.02),
    )  # fmt: skip


def test_a_model_agent_has_one_limiter_timeout_and_retry_layer(mock: MockLLMServer) -> None:
    """Its model services are the engine's for the batch: the door's endpoint calls do
    not wrap it a second time (whose own timeout would cut a slow answer short)."""
    mock.set_faults(latency_ms=300)
    result = asyncio.run(russo.run("Book", None, _model_agent(mock, attempts=2), expect=[BOOK],
                                   timeout=0.05, retry_policy=FAST))  # fmt: skip
    assert result.passed, result.summary()
    assert mock.stats["requests"] == 1
    mock.set_faults(latency_ms=0, fail_sequence=[500] * 20)
    failed = asyncio.run(russo.run("Book", None, _model_agent(mock, attempts=2), expect=[BOOK]))
    assert failed.error is not None and failed.error.type == "RetriesExhausted"
    assert mock.stats["injected_500"] == 2  # the model services' two attempts


def test_a_model_agents_retries_count_in_its_run(mock: MockLLMServer) -> None:
    mock.set_faults(fail_sequence=[429], retry_after=0.01)
    result = asyncio.run(russo.run_concurrent("Book", None, _model_agent(mock, attempts=3),
                                              expect=[BOOK]))  # fmt: skip
    assert result.passed, result.summary()
    assert result.runs[0].retries == 1


# -- one ToolCall type -------------------------------------------------------------------------
def test_the_russo_names_make_the_models_tool_call() -> None:
    made = [russo.ToolCall("f", {"a": 1}), russo.ToolCall(name="f", arguments={"a": 1}),
            russo.tool_call("f", a=1)]  # fmt: skip
    for call in made:
        assert type(call) is ToolCall and isinstance(call, russo.ToolCall)
        assert (call.id, call.name, call.arguments, str(call)) == ("", "f", {"a": 1}, "f(a=1)")
    # the id and the raw text are how a call travelled, not what it is
    from_model = ToolCall("call_9", "f", {"a": 1}, '{"a": 1}')
    assert from_model == made[0] and hash(from_model) == hash(made[0])
    assert from_model != ToolCall("call_9", "f", {"a": 2})
    with pytest.raises(ValueError, match="1 validation error for ToolCall"):
        russo.ToolCall(name=42)  # type: ignore[arg-type]


def test_a_models_unreadable_arguments_are_converted_in_one_place() -> None:
    broken = ToolCall("c1", "f", None, "{oops")
    response = russo.AgentResponse(tool_calls=[broken, {"name": "g"}])
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("f", {"_raw": "{oops"}),
                                                                     ("g", {})]  # fmt: skip
    result = ExactEvaluator().evaluate([russo.tool_call("f", a=1)], [broken])
    assert not result.passed and "missing" in result.matches[0].details


def test_results_show_a_tool_call_by_its_name_and_arguments_only() -> None:
    call = ToolCall("call_1", "f", {"a": (1, 2)}, '{"a": [1, 2]}')
    evaluation = ExactEvaluator().evaluate([russo.tool_call("f", a=[1, 2])], [call])
    dumped = evaluation.model_dump(mode="json")
    assert dumped["actual"] == [{"name": "f", "arguments": {"a": [1, 2]}}]
    assert dumped["matches"][0]["expected"] == {"name": "f", "arguments": {"a": [1, 2]}}
    run = russo.SingleRunResult(prompt="p", run_index=0, eval_result=evaluation)
    document = batch_document(russo.BatchResult(runs=[run]))
    assert document["runs"][0]["actual"] == [{"name": "f", "arguments": {"a": [1, 2]}}]
    assert json.loads(json.dumps(document)) == document
    assert russo.EvalResult.model_validate(dumped).actual == [russo.tool_call("f", a=[1, 2])]


# -- the engine's pieces the door uses ----------------------------------------------------------
def test_endpoint_calls_time_out_each_attempt_and_retry() -> None:
    attempts = 0

    async def slow_once() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.sleep(5)
        return "ok"

    calls = EndpointCalls(policy=FAST, limit=2, timeout=0.05)
    assert asyncio.run(calls.call(slow_once)) == ("ok", 1)

    async def hung() -> str:
        await asyncio.sleep(5)
        return "never"

    with pytest.raises(RetriesExhausted, match="TransientError: timed out"):
        asyncio.run(calls.call(hung))


def test_endpoint_calls_leave_untyped_failures_alone() -> None:
    async def bug() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        asyncio.run(EndpointCalls(policy=FAST, limit=1, timeout=None).call(bug))


def test_shared_values_are_made_once_failures_included() -> None:
    made: list[str] = []

    async def make(key: str) -> str:
        made.append(key)
        await asyncio.sleep(0.01)
        if key == "bad":
            raise RuntimeError("broken")
        return key.upper()

    async def go() -> list[Any]:
        shared: SharedValues[str, str] = SharedValues()
        asks = [shared.get(key, lambda key=key: make(key)) for key in ("a", "bad", "a", "bad")]
        return await asyncio.gather(*asks, return_exceptions=True)

    values = asyncio.run(go())
    assert values[0] == values[2] == "A"
    assert all(isinstance(v, RuntimeError) for v in (values[1], values[3]))
    assert made == ["a", "bad"]


def test_a_cancelled_maker_leaves_the_value_to_the_next_asker() -> None:
    async def go() -> str:
        shared: SharedValues[str, str] = SharedValues()
        started = asyncio.Event()

        async def stuck() -> str:
            started.set()
            await asyncio.sleep(60)
            return "never"

        async def quick() -> str:
            return "made again"

        maker = asyncio.create_task(shared.get("k", stuck))
        await started.wait()
        waiter = asyncio.create_task(shared.get("k", quick))
        await asyncio.sleep(0)
        maker.cancel()
        for task in (maker, waiter):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert "k" not in shared
        return await shared.get("k", quick)

    assert asyncio.run(go()) == "made again"
