"""Text mode (ModelAgent on Helios's model clients) and the response parsers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from helios import toolcalls as russo
from helios.errors import ConfigError
from helios.models.retry import RetryPolicy
from helios.testing.mock_llm import MockLLMServer

SCRIPT = {"scenarios": [
    {"match": "flight", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"from_city": "NYC", "to_city": "LA"}}]}]},
    {"match": "weather", "turns": [{"tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": {"city": "Rome"}}]}]},
    {"match": "broken", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"x": 1}, "bad_arguments": True}]}]},
    {"match": "*", "turns": [{"text": "I cannot help."}]},
]}  # fmt: skip
TOOLS = [
    {"type": "function", "function": {"name": "book_flight", "description": "Book a flight",
     "parameters": {"type": "object", "properties": {"from_city": {"type": "string"},
                                                     "to_city": {"type": "string"}}}}},
    {"name": "get_weather", "description": "Weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
]  # fmt: skip
FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02)


@pytest.fixture
def mock() -> Iterator[MockLLMServer]:
    with MockLLMServer(script=SCRIPT) as server:
        yield server


def _agent(mock: MockLLMServer, provider: str = "openai") -> russo.ModelAgent:
    if provider == "anthropic":
        return russo.ModelAgent("anthropic/claude-test", TOOLS, "You book travel.",
                                base_url=mock.anthropic_base_url, api_key="k-anthropic",
                                retry_policy=FAST)  # fmt: skip
    return russo.ModelAgent("openai-compatible/mock", TOOLS, "You book travel.",
                            base_url=mock.openai_base_url, retry_policy=FAST)  # fmt: skip


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_text_mode_measures_tool_calling(mock: MockLLMServer, provider: str) -> None:
    result = asyncio.run(russo.run_concurrent(
        cases=[
            ("Book a flight from NYC to LA",
             [russo.tool_call("book_flight", from_city="NYC", to_city="LA")]),
            ("What is the weather in Paris and Rome?",
             [russo.tool_call("get_weather", city="Rome"),
              russo.tool_call("get_weather", city="Paris")]),
            ("Tell me a joke", [russo.tool_call("book_flight")]),
        ],
        synthesizer=None, agent=_agent(mock, provider), runs=2, max_concurrency=3,
    ))  # fmt: skip
    assert [run.passed for run in result.runs] == [True, True, True, True, False, False]
    assert result.runs[4].error is None  # a wrong answer, not an error
    request = mock.requests[0]
    names = [t.get("name") or t["function"]["name"] for t in request.body["tools"]]
    assert names == ["book_flight", "get_weather"]


def test_text_mode_skips_synthesis_even_with_a_synthesizer(mock: MockLLMServer) -> None:
    class Exploding:
        async def synthesize(self, text: str) -> russo.Audio:
            raise AssertionError("text mode must not synthesize")

    result = asyncio.run(russo.run(
        "Book a flight", Exploding(), _agent(mock),
        expect=[russo.tool_call("book_flight", from_city="NYC", to_city="LA")],
    ))  # fmt: skip
    assert result.passed


def test_invalid_argument_json_stays_visible(mock: MockLLMServer) -> None:
    result = asyncio.run(russo.run("broken request", None, _agent(mock),
                                   expect=[russo.tool_call("book_flight", x=1)]))  # fmt: skip
    assert not result.passed
    assert "_raw" in result.actual[0].arguments


def test_rate_limits_are_retried_by_the_model_layer(mock: MockLLMServer) -> None:
    mock.set_faults(fail_sequence=[429, 500], retry_after=0.01)
    result = asyncio.run(russo.run("Book a flight", None, _agent(mock),
                                   expect=[russo.tool_call("book_flight", from_city="NYC",
                                                           to_city="LA")]))  # fmt: skip
    assert result.passed
    assert mock.stats["injected_429"] == 1 and mock.stats["injected_500"] == 1


def test_unknown_provider_or_missing_key_fails_before_any_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        russo.ModelAgent("openai/gpt-4.1", TOOLS)
    with pytest.raises(ConfigError, match="unknown model provider"):
        russo.ModelAgent("nowhere/model", TOOLS)


# -- parsers ----------------------------------------------------------------------
def test_openai_parser_reads_dicts_and_sdk_objects() -> None:
    raw = {"choices": [{"message": {"tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"id": "2", "type": "function", "function": {"name": "g", "arguments": "{oops"}},
    ]}}]}  # fmt: skip
    calls = russo.OpenAIResponseParser().parse(raw).tool_calls
    # unreadable arguments are {} as russo's parsers make them; the text stays on the call
    assert calls == [russo.tool_call("f", a=1), russo.ToolCall("g", {})]
    assert calls[1].raw_arguments == "{oops"
    function = SimpleNamespace(name="f", arguments='{"a": 1}')
    sdk = SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(
        tool_calls=[SimpleNamespace(function=function)], function_call=None))])  # fmt: skip
    assert russo.OpenAIResponseParser().parse(sdk).tool_calls == [russo.tool_call("f", a=1)]
    assert russo.OpenAIResponseParser().parse({"choices": []}).tool_calls == []


@pytest.mark.parametrize(
    ("parser", "raw"),
    [
        (russo.JsonResponseParser(), {"tool_calls": [{"name": "fn", "arguments": "not-json"}]}),
        (russo.OpenAIResponseParser(), {"choices": [{"message": {"tool_calls": [
            {"function": {"name": "fn", "arguments": "not-json"}}]}}]}),
        (russo.GeminiResponseParser(), {"candidates": [{"content": {"parts": [
            {"functionCall": {"name": "fn", "args": "not-json"}}]}}]}),
    ],
    ids=["json", "openai", "gemini"],
)  # fmt: skip
def test_invalid_json_string_defaults_to_empty(parser: Any, raw: Any) -> None:
    """russo's own test, on each parser: unreadable arguments are {} (issue 21, point 6);
    Helios keeps their text in the call's `raw_arguments`, a field russo's call lacks."""
    (call,) = parser.parse(raw).tool_calls
    assert call.name == "fn" and call.arguments == {}
    assert call.raw_arguments == "not-json"
    # a JSON value that is not an object is no arguments either, as in russo
    (listed,) = russo.JsonResponseParser().parse(
        {"tool_calls": [{"name": "fn", "arguments": "[1, 2]"}]}).tool_calls  # fmt: skip
    assert listed.arguments == {}


def test_gemini_parser_reads_rest_sdk_and_live_shapes() -> None:
    rest = {"candidates": [{"content": {"parts": [
        {"text": "ok"}, {"functionCall": {"name": "f", "args": {"a": 1}}}]}}]}  # fmt: skip
    sdk = SimpleNamespace(
        candidates=[
            SimpleNamespace(
                content=SimpleNamespace(
                    parts=[SimpleNamespace(function_call=SimpleNamespace(name="f", args={"a": 1}))]
                )
            )
        ]
    )
    live = [{"setupComplete": {}}, {"toolCall": {"functionCalls": [
        {"id": "x", "name": "f", "args": {"a": 1}}]}}]  # fmt: skip
    parser = russo.GeminiResponseParser()
    for raw in (rest, sdk, live):
        assert parser.parse(raw).tool_calls == [russo.tool_call("f", a=1)]


@pytest.mark.parametrize(
    ("parser", "raw", "expected"),
    [
        (russo.JsonResponseParser(), {"tool_calls": [{"name": "f", "arguments": {"a": 1}}]},
         [("f", {"a": 1})]),
        (russo.JsonResponseParser(tool_calls_key="result.calls", name_key="fn",
                                  arguments_key="params"),
         {"result": {"calls": [{"fn": "f", "params": '{"a": 1}'}, {"fn": ""}]}},
         [("f", {"a": 1})]),
        (russo.JsonResponseParser(tool_calls_key="toolCall", single=True),
         {"toolCall": {"name": "f", "arguments": {}}}, [("f", {})]),
        (russo.JsonResponseParser(tool_calls_key="data.0.calls", name_key="fn.name",
                                  arguments_key="fn.args"),
         {"data": [{"calls": [{"fn": {"name": "f", "args": {"a": 1}}}]}]}, [("f", {"a": 1})]),
        (russo.JsonResponseParser(),
         [{"event": "x"}, {"tool_calls": [{"name": "f"}]}, {"tool_calls": [{"name": "g"}]}],
         [("f", {}), ("g", {})]),
        (russo.JsonResponseParser(), {"other": 1}, []),
        (russo.JsonResponseParser(), "not json at all", []),
        (russo.JsonResponseParser(tool_calls_key="a.5"), {"a": [1]}, []),
    ],
)  # fmt: skip
def test_json_parser_paths(
    parser: Any, raw: Any, expected: list[tuple[str, dict[str, Any]]]
) -> None:
    calls = parser.parse(raw).tool_calls
    assert [(c.name, c.arguments) for c in calls] == expected
