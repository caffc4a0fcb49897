"""The model layer against the project's own HTTP model servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from helios.errors import ConfigError
from helios.models.base import GenerationConfig, Message
from helios.models.errors import (
    AuthError,
    ContextWindowError,
    RateLimitError,
    RetriesExhausted,
    TransientError,
)
from helios.models.limiter import AdaptiveLimiter
from helios.models.pricing import Price, PriceTable
from helios.models.retry import RetryPolicy, call_with_retries
from helios.models.routing import resolve_model, split_name
from helios.models.services import ModelServices, create_model
from helios.testing.mock_llm import MockLLMServer
from helios.usage import Usage

KEY = "sk-test-0123456789"
BASH_TOOL_OPENAI = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "run",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
BASH_TOOL_ANTHROPIC = {
    "name": "bash",
    "description": "run",
    "input_schema": BASH_TOOL_OPENAI["function"]["parameters"],
}  # type: ignore[index]
SCRIPT = {
    "scenarios": [
        {
            "match": "",
            "turns": [
                {
                    "text": "listing",
                    "reasoning": "think first",
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "ls"}},
                        {"name": "bash", "arguments": {"command": "pwd"}},
                    ],
                },
                {"text": "all done"},
            ],
        }
    ]
}
FAST = RetryPolicy(max_attempts=6, base_delay=0.01, max_delay=0.05)


# -- routing ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "provider", "model"),
    [
        ("anthropic/claude-x", "anthropic", "claude-x"),
        ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("gpt-5-mini", "openai", "gpt-5-mini"),
        ("o3", "openai", "o3"),
        ("openrouter/meta/llama-3", "openrouter", "meta/llama-3"),
        ("gemini/gemini-2.5-pro", "gemini", "gemini-2.5-pro"),
        ("openai-compatible/qwen", "openai-compatible", "qwen"),
    ],
)
def test_routing(name: str, provider: str, model: str) -> None:
    assert split_name(name) == (provider, model)


def test_unknown_provider_lists_known() -> None:
    with pytest.raises(ConfigError) as info:
        split_name("mistral/large")
    assert "anthropic" in str(info.value) and "openrouter" in str(info.value)
    with pytest.raises(ConfigError):
        split_name("llama-3")


def test_missing_key_names_the_variable_and_alternatives() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model("anthropic/claude-x", environ={})
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message and "--agent oracle" in message and "-m" in message
    spec = resolve_model("openai/gpt-5", environ={"OPENAI_API_KEY": KEY})
    assert spec.api_key == KEY and KEY not in repr(spec)
    local = resolve_model("openai-compatible/m", base_url="http://127.0.0.1:1/v1", environ={})
    assert local.api_key is None
    with pytest.raises(ConfigError, match="--base-url"):
        resolve_model("openai-compatible/m", environ={})


# -- both APIs through the SDKs -------------------------------------------------
def _generate(server: MockLLMServer, api: str, messages: list[Message]) -> Any:
    name = "anthropic/claude-test" if api == "anthropic" else "openai-compatible/scripted"
    url = server.anthropic_base_url if api == "anthropic" else server.openai_base_url
    spec = resolve_model(name, base_url=url, api_key=KEY)
    tools = [BASH_TOOL_ANTHROPIC if api == "anthropic" else BASH_TOOL_OPENAI]

    async def go() -> Any:
        model = create_model(spec)
        try:
            return await model.generate(messages, tools, GenerationConfig(max_tokens=256))
        finally:
            await model.close()

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_tool_calls_round_trip(api: str) -> None:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        messages = [Message("system", "be brief"), Message("user", "list files")]
        first = _generate(server, api, messages)
        assert [c.name for c in first.tool_calls] == ["bash", "bash"]
        assert first.tool_calls[0].arguments == {"command": "ls"}
        assert first.message.content == "listing" and first.reasoning == "think first"
        assert first.finish_reason == "tool_calls"
        assert first.usage.output_tokens > 0 and first.usage.calls == 1
        messages.append(first.message)
        for call in first.tool_calls:
            messages.append(Message("tool", f"out of {call.arguments}", tool_call_id=call.id))
        second = _generate(server, api, messages)
        assert second.message.content == "all done" and not second.tool_calls
        assert second.finish_reason == "stop"
        body = server.requests[-1].body
        # the second request carried the whole conversation in the provider's format
        if api == "anthropic":
            assert body["system"] == "be brief"
            kinds = [
                b["type"]
                for m in body["messages"]
                for b in (m["content"] if isinstance(m["content"], list) else [])
            ]
            assert kinds.count("tool_result") == 2 and "thinking" in kinds
        else:
            assert [m["role"] for m in body["messages"]] == [
                "system",
                "user",
                "assistant",
                "tool",
                "tool",
            ]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"fail_sequence": [429]}, RateLimitError),
        ({"fail_sequence": [500]}, TransientError),
        ({"fail_sequence": ["drop"]}, TransientError),
        ({"fail_sequence": ["malformed"]}, TransientError),
        ({"require_key": "another-key-123"}, AuthError),
    ],
)
def test_errors_are_typed(api: str, fault: dict[str, Any], error: type[Exception]) -> None:
    with MockLLMServer(script=SCRIPT, retry_after=2, **fault) as server:
        with pytest.raises(error) as info:
            _generate(server, api, [Message("user", "hi")])
        assert KEY not in str(info.value)
        if isinstance(info.value, RateLimitError):
            assert info.value.retry_after == pytest.approx(2)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_context_overflow_is_typed(api: str) -> None:
    script = {"scenarios": [{"match": "", "turns": [{"context_overflow": True}]}]}
    with MockLLMServer(script=script) as server, pytest.raises(ContextWindowError):
        _generate(server, api, [Message("user", "hi")])


# -- retries and the limiter ----------------------------------------------------
def _services(server: MockLLMServer, **kwargs: Any) -> ModelServices:
    spec = resolve_model("openai-compatible/scripted", base_url=server.openai_base_url, api_key=KEY)
    return ModelServices(spec=spec, policy=kwargs.pop("policy", FAST), **kwargs)


def test_retries_recover_and_count() -> None:
    with MockLLMServer(
        script=SCRIPT, fail_sequence=[429, 500, "drop", "malformed"], retry_after=0
    ) as server:
        services = _services(server)
        retries: list[str] = []

        async def go() -> Any:
            try:
                return await services.generate(
                    [Message("user", "hi")],
                    [BASH_TOOL_OPENAI],
                    on_retry=lambda e, d, a: retries.append(e.kind),
                )
            finally:
                await services.close()

        response = asyncio.run(go())
        assert response.tool_calls and response.usage.retries == 4
        assert retries == ["RateLimitError", "TransientError", "TransientError", "TransientError"]
        assert services.totals.retries == 4 and services.totals.calls == 1
        assert server.stats["requests"] == 5


def test_auth_errors_are_not_retried() -> None:
    with MockLLMServer(script=SCRIPT, require_key="different-key-1") as server:
        services = _services(server)

        async def go() -> None:
            try:
                await services.generate([Message("user", "hi")], [])
            finally:
                await services.close()

        with pytest.raises(AuthError):
            asyncio.run(go())
        assert server.stats["requests"] == 1


def test_retry_caps_attempts() -> None:
    with MockLLMServer(script=SCRIPT, rate_500=1.0) as server:
        services = _services(server, policy=RetryPolicy(max_attempts=3, base_delay=0.01))

        async def go() -> None:
            try:
                await services.generate([Message("user", "hi")], [])
            finally:
                await services.close()

        with pytest.raises(RetriesExhausted, match="3 attempts"):
            asyncio.run(go())
        assert server.stats["requests"] == 3


def test_retry_after_is_honoured() -> None:
    calls: list[float] = []

    async def flaky() -> str:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RateLimitError("slow down", retry_after=0.3)
        return "ok"

    result, retries = asyncio.run(call_with_retries(flaky, limiter=AdaptiveLimiter(), policy=FAST))
    assert (result, retries) == ("ok", 1)
    assert calls[1] - calls[0] >= 0.3


def test_limiter_shrinks_on_429_once_per_burst_and_grows_back() -> None:
    limiter = AdaptiveLimiter(initial=16, cooldown=0.05)
    for _ in range(5):  # one burst of 429s from concurrent calls
        limiter.on_rate_limit()
    assert limiter.current == 8
    time.sleep(0.06)
    for _ in range(40):
        limiter.on_success()
    assert 8 < limiter.current <= 13


def test_limiter_bounds_calls_in_flight() -> None:
    limiter = AdaptiveLimiter(initial=3)
    peak = 0

    async def one() -> None:
        nonlocal peak
        async with limiter.slot():
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.01)

    async def go() -> None:
        await asyncio.gather(*(one() for _ in range(20)))

    asyncio.run(go())
    assert peak == 3 and limiter.in_flight == 0


def test_limiter_admits_waiters_in_order_and_a_cancel_never_leaks_room() -> None:
    """A release admits the next waiter only (first come, first served), a growing limit
    admits more, and a call cancelled while waiting, or just after it was admitted,
    leaves the room to the others."""

    async def go() -> None:
        limiter = AdaptiveLimiter(initial=2, maximum=3)
        await limiter.acquire()
        await limiter.acquire()
        order: list[int] = []

        async def settle() -> None:  # every task that can run has run
            for _ in range(5):
                await asyncio.sleep(0)

        async def wait(i: int) -> None:
            await limiter.acquire()
            order.append(i)

        waiting = [asyncio.create_task(wait(i)) for i in range(5)]
        await settle()
        assert order == [] and limiter.in_flight == 2
        waiting[0].cancel()  # cancelled while it waits
        await limiter.release()
        await settle()
        assert order == [1] and limiter.in_flight == 2
        await limiter.release()
        waiting[2].cancel()  # admitted, then cancelled before it ran
        await settle()
        assert order == [1, 3] and limiter.in_flight == 2
        while limiter.current < 3:  # the limit grows: one more call is let in
            limiter.on_success()
        await settle()
        assert order == [1, 3, 4] and limiter.in_flight == 3
        for _ in range(3):
            await limiter.release()
        assert limiter.in_flight == 0
        await asyncio.gather(*waiting, return_exceptions=True)
        assert [t.cancelled() for t in waiting] == [True, False, True, False, False]
        limiter.forget()  # an unknown holder's room is never counted below zero
        assert limiter.in_flight == 0

    asyncio.run(go())


# -- prices -----------------------------------------------------------------------
def test_prices_library_and_user_file(tmp_path: Path) -> None:
    table = PriceTable()
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert table.cost("anthropic/claude-sonnet-4-5", usage) is not None  # genai-prices
    assert table.cost("unknown-model", usage) is None  # unknown, not free
    extra = tmp_path / "prices.json"
    extra.write_text('{"scripted": {"input": 1.0, "output": 2.0}}')
    table.extend_from_file(extra)
    assert table.cost("scripted", usage) == pytest.approx(3.0)
    cached = Usage(cache_read_tokens=1_000_000)
    assert Price(1.0, 2.0).cost(cached) == pytest.approx(0.1)
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": {"inputs": 1}}')
    with pytest.raises(ConfigError, match=r"bad\.json"):
        table.extend_from_file(bad)


# -- generation settings reach each API in its own terms -------------------------
def _sent_body(api: str, name: str, config: GenerationConfig) -> dict[str, Any]:
    with MockLLMServer(script=SCRIPT) as server:
        url = server.anthropic_base_url if api == "anthropic" else server.openai_base_url
        spec = resolve_model(name, base_url=url, api_key=KEY)

        async def go() -> None:
            model = create_model(spec)
            try:
                await model.generate([Message("user", "hi")], [], config)
            finally:
                await model.close()

        asyncio.run(go())
        return server.requests[-1].body


def test_openai_settings() -> None:
    body = _sent_body(
        "openai",
        "openai/gpt-5",
        GenerationConfig(max_tokens=77, temperature=0.2, reasoning_effort="high"),
    )
    assert body["max_completion_tokens"] == 77 and body["temperature"] == 0.2
    assert body["reasoning_effort"] == "high"
    local = _sent_body("openai", "openai-compatible/m", GenerationConfig(max_tokens=55))
    assert local["max_tokens"] == 55 and "reasoning_effort" not in local


def test_openrouter_routing_and_reasoning() -> None:
    routing = {"order": ["a", "b"], "ignore": ["c"], "sort": "price"}
    body = _sent_body(
        "openai",
        "openrouter/x/y",
        GenerationConfig(reasoning_effort="low", openrouter_provider=routing),
    )
    assert body["model"] == "x/y"
    assert body["provider"] == routing and body["reasoning"] == {"effort": "low"}
    off = _sent_body("openai", "openrouter/x/y", GenerationConfig(reasoning_effort="none"))
    assert off["reasoning"] == {"enabled": False}


def test_anthropic_thinking_budget_and_temperature() -> None:
    body = _sent_body(
        "anthropic",
        "anthropic/claude-x",
        GenerationConfig(max_tokens=1000, temperature=0.5, reasoning_effort="medium"),
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] > 8192 and "temperature" not in body
    plain = _sent_body("anthropic", "anthropic/claude-x", GenerationConfig(temperature=0.5))
    assert plain["temperature"] == 0.5 and "thinking" not in plain


def test_cli_routing_parser() -> None:
    from helios.cli.options import _routing

    assert _routing("order=a,b;ignored=c;allowed=d;sort=price") == {
        "order": ["a", "b"],
        "ignore": ["c"],
        "only": ["d"],
        "sort": "price",
    }
    with pytest.raises(ConfigError):
        _routing("fastest=yes")
