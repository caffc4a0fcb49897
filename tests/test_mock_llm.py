"""Tests for the scripted mock model server, driven through the official SDKs over 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
import pytest

from helios.testing.mock_llm import MockLLMServer

from .mock_llm_helpers import (
    ANTHROPIC_TOOLS,
    OPENAI_TOOLS,
    SCRIPT,
    ant,
    ant_ask,
    oai,
    oai_ask,
    run,
    user,
)

# ----- scripted conversations ------------------------------------------------------------------


def test_openai_two_turns_with_parallel_tool_calls() -> None:
    async def body(server: MockLLMServer) -> None:
        async with oai(server) as client:
            messages: list[Any] = [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Please list the files here."},
            ]
            first = await client.chat.completions.create(
                model="gpt-mock", messages=messages, tools=OPENAI_TOOLS, max_tokens=100
            )
            choice = first.choices[0]
            assert choice.finish_reason == "tool_calls"
            assert choice.message.content == "Let me look."
            assert (choice.message.model_extra or {}).get("reasoning_content") == (
                "I should look at the directory first."
            )
            calls = choice.message.tool_calls or []
            assert [c.id for c in calls] == ["call_0_0", "call_0_1"]
            assert [c.function.name for c in calls] == ["bash", "read_file"]  # type: ignore[union-attr]
            assert json.loads(calls[0].function.arguments) == {"command": "ls -la"}  # type: ignore[union-attr]
            assert json.loads(calls[1].function.arguments) == {"path": "notes.txt"}  # type: ignore[union-attr]
            usage = first.usage
            assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
            assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
            assert usage.completion_tokens_details is not None
            assert usage.completion_tokens_details.reasoning_tokens == (
                len("I should look at the directory first.") // 4 + 1
            )
            assert usage.prompt_tokens_details is not None
            assert usage.prompt_tokens_details.cached_tokens == 0

            messages.append(choice.message.model_dump(exclude_none=True))
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "a.txt"})
            second = await client.chat.completions.create(
                model="gpt-mock", messages=messages, tools=OPENAI_TOOLS
            )
            assert second.choices[0].finish_reason == "stop"
            assert second.choices[0].message.content == "There are two files: a.txt and notes.txt."
            assert not second.choices[0].message.tool_calls

            messages.append({"role": "assistant", "content": "There are two files."})
            messages.append({"role": "user", "content": "thanks"})
            third = await client.chat.completions.create(model="gpt-mock", messages=messages)
            assert third.choices[0].message.content == "All finished."

        recorded = server.requests
        assert len(recorded) == 3
        assert recorded[0].provider == "openai" and recorded[0].path == "/v1/chat/completions"
        assert recorded[0].headers["authorization"] == "Bearer test-key"
        assert recorded[1].body["messages"][-1]["tool_call_id"] == "call_0_1"
        assert "test-key" not in repr(recorded[0])

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))


def test_anthropic_tool_use_then_text() -> None:
    async def body(server: MockLLMServer) -> None:
        async with ant(server) as client:
            messages: list[Any] = user("hello")
            system: Any = [{"type": "text", "text": "Your job: list the files in the repo."}]
            first = await client.messages.create(
                model="claude-mock",
                max_tokens=256,
                system=system,
                messages=messages,
                tools=ANTHROPIC_TOOLS,
            )
            assert first.stop_reason == "tool_use"
            kinds = [block.type for block in first.content]
            assert kinds == ["thinking", "text", "tool_use", "tool_use"]
            thinking, text, use_a, use_b = first.content
            assert thinking.type == "thinking" and thinking.thinking.startswith("I should look")
            assert text.type == "text" and text.text == "Let me look."
            assert use_a.type == "tool_use" and use_b.type == "tool_use"
            assert (use_a.id, use_a.name, use_a.input) == (
                "toolu_0_0",
                "bash",
                {"command": "ls -la"},
            )
            assert (use_b.id, use_b.name, use_b.input) == (
                "toolu_0_1",
                "read_file",
                {"path": "notes.txt"},
            )
            assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
            assert first.usage.cache_read_input_tokens == 0

            messages.append({"role": "assistant", "content": first.content})
            results = [
                {"type": "tool_result", "tool_use_id": u.id, "content": "ok"}
                for u in (use_a, use_b)
            ]
            messages.append({"role": "user", "content": results})
            second = await client.messages.create(
                model="claude-mock", max_tokens=256, system=system, messages=messages
            )
            assert second.stop_reason == "end_turn"
            assert [b.type for b in second.content] == ["text"]
            assert second.content[0].text == "There are two files: a.txt and notes.txt."  # type: ignore[union-attr]

        recorded = server.requests
        assert [r.path for r in recorded] == ["/v1/messages", "/v1/messages"]
        # Older SDKs send x-api-key, newer ones Authorization: Bearer; the server accepts both.
        headers = recorded[0].headers
        assert headers.get("x-api-key", headers.get("authorization")) in (
            "test-key",
            "Bearer test-key",
        )

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))


def test_concurrent_conversations_are_independent() -> None:
    async def body(server: MockLLMServer) -> None:
        prompts = ["please list the files", "something else", "list the files again"] * 10
        replies = await asyncio.gather(*(oai_ask(server, p) for p in prompts))
        for prompt, reply in zip(prompts, replies, strict=True):
            if "list the files" in prompt:
                assert reply.choices[0].message.tool_calls[0].function.name == "bash"
            else:
                assert reply.choices[0].message.content == "Default hello."
        assert server.stats["served_ok"] == len(prompts)

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))


def test_no_matching_scenario_is_a_clear_400() -> None:
    script = {"scenarios": [{"match": "only this", "turns": [{"text": "x"}]}]}
    with MockLLMServer(script=script) as server:
        with pytest.raises(openai.BadRequestError, match="no scenario matches"):
            run(oai_ask(server, "something unrelated"))
        assert server.stats["unmatched"] == 1


def test_empty_script_always_says_done() -> None:
    with MockLLMServer() as server:
        reply = run(ant_ask(server, "anything"))
        assert reply.content[0].text == "Done."
        assert reply.stop_reason == "end_turn"


def test_odd_turns_bad_arguments_empty_truncated() -> None:
    async def body(server: MockLLMServer) -> None:
        async with oai(server) as client:
            history: list[Any] = user("odd replies please")
            first = await client.chat.completions.create(model="m", messages=history)
            call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
            assert call.function.arguments == '{"command": "ls"'  # type: ignore[union-attr]
            with pytest.raises(json.JSONDecodeError):
                json.loads(call.function.arguments)  # type: ignore[union-attr]

            history += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "bad args"},
            ]
            second = await client.chat.completions.create(model="m", messages=history)
            assert second.choices[0].message.content == ""
            assert not second.choices[0].message.tool_calls
            assert second.choices[0].finish_reason == "stop"

            history += [{"role": "assistant", "content": ""}, {"role": "user", "content": "go"}]
            third = await client.chat.completions.create(model="m", messages=history)
            assert third.choices[0].finish_reason == "length"
            assert third.usage.prompt_tokens_details.cached_tokens == 5  # type: ignore[union-attr]

        # Anthropic: bad_arguments is ignored (input stays an object); empty means no blocks.
        async with ant(server) as aclient:
            amsgs: list[Any] = user("odd replies please")
            a1 = await aclient.messages.create(model="c", max_tokens=50, messages=amsgs)
            assert a1.content[0].input == {"command": "ls"}  # type: ignore[union-attr]
            amsgs += [
                {"role": "assistant", "content": a1.content},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_0_0", "content": "x"}
                    ],
                },
            ]
            a2 = await aclient.messages.create(model="c", max_tokens=50, messages=amsgs)
            assert a2.content == [] and a2.stop_reason == "end_turn"
            amsgs += [{"role": "assistant", "content": "..."}, {"role": "user", "content": "go"}]
            a3 = await aclient.messages.create(model="c", max_tokens=50, messages=amsgs)
            assert a3.stop_reason == "max_tokens"
            assert a3.usage.cache_read_input_tokens == 5

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))


def test_unanswered_tool_calls_are_rejected_like_the_real_apis() -> None:
    broken_openai: list[Any] = [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0_0",
                    "type": "function",
                    "function": {"name": "bash", "arguments": "{}"},
                }
            ],
        },
        {"role": "user", "content": "where is my answer?"},
    ]
    broken_anthropic: list[Any] = [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_0_0", "name": "bash", "input": {}}],
        },
        {"role": "user", "content": "where is my answer?"},
    ]

    async def body(server: MockLLMServer) -> None:
        async with oai(server) as client:
            with pytest.raises(openai.BadRequestError, match="call_0_0"):
                await client.chat.completions.create(model="m", messages=broken_openai)
        async with ant(server) as aclient:
            with pytest.raises(anthropic.BadRequestError, match="toolu_0_0"):
                await aclient.messages.create(model="c", max_tokens=9, messages=broken_anthropic)
        assert server.stats["bad_request"] == 2

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))
    with MockLLMServer(script=SCRIPT, strict_history=False) as lenient:
        reply = run(oai_ask(lenient, "list the files"))
        assert reply.choices[0].message.tool_calls


# ----- streaming -------------------------------------------------------------------------------


def test_openai_streaming_accumulates_to_the_scripted_turn() -> None:
    async def body(server: MockLLMServer) -> None:
        async with oai(server) as client:
            stream = await client.chat.completions.create(
                model="m",
                messages=user("list the files"),
                tools=OPENAI_TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            text, reasoning, finish = "", "", None
            args: dict[int, str] = {}
            names: dict[int, str] = {}
            usage = None
            chunks = 0
            async for chunk in stream:
                chunks += 1
                usage = chunk.usage or usage
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                reasoning += getattr(delta, "reasoning_content", None) or ""
                finish = chunk.choices[0].finish_reason or finish
                for tc in delta.tool_calls or []:
                    if tc.function and tc.function.name:
                        names[tc.index] = tc.function.name
                    args[tc.index] = args.get(tc.index, "") + (
                        (tc.function.arguments if tc.function else None) or ""
                    )
            assert chunks > 5  # really streamed in pieces
            assert text == "Let me look."
            assert reasoning == "I should look at the directory first."
            assert finish == "tool_calls"
            assert names == {0: "bash", 1: "read_file"}
            assert json.loads(args[0]) == {"command": "ls -la"}
            assert json.loads(args[1]) == {"path": "notes.txt"}
            assert usage is not None and usage.completion_tokens > 0

            plain = await client.chat.completions.create(
                model="m", messages=user("hi"), stream=True
            )
            got = [c async for c in plain]
            assert all(c.usage is None for c in got)  # no include_usage -> no usage chunk
            assert "".join(c.choices[0].delta.content or "" for c in got) == "Default hello."
        assert server.stats["streamed"] == 2

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))


def test_anthropic_streaming_matches_non_streaming() -> None:
    async def body(server: MockLLMServer) -> None:
        async with ant(server) as client:
            plain = await client.messages.create(
                model="c", max_tokens=99, messages=user("list the files")
            )
            texts: list[str] = []
            async with client.messages.stream(
                model="c", max_tokens=99, messages=user("list the files")
            ) as stream:
                async for text in stream.text_stream:
                    texts.append(text)
                final = await stream.get_final_message()
            assert "".join(texts) == "Let me look."
            assert final.stop_reason == "tool_use"
            assert [b.model_dump() for b in final.content] == [
                b.model_dump() for b in plain.content
            ]
            assert final.usage.output_tokens == plain.usage.output_tokens

    with MockLLMServer(script=SCRIPT) as server:
        run(body(server))
