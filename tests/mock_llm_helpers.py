"""Helpers of the mock model server's tests: a script, tools, and SDK clients on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Coroutine
from typing import Any, TypeVar

import anthropic
import openai

from helios.testing.mock_llm import MockLLMServer

T = TypeVar("T")

SCRIPT: dict[str, Any] = {
    "scenarios": [
        {
            "match": "list the files",
            "turns": [
                {
                    "reasoning": "I should look at the directory first.",
                    "text": "Let me look.",
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "ls -la"}},
                        {"name": "read_file", "arguments": {"path": "notes.txt"}},
                    ],
                },
                {"text": "There are two files: a.txt and notes.txt."},
            ],
            "final": {"text": "All finished."},
        },
        {"match": "overflow please", "turns": [{"context_overflow": True}]},
        {
            "match": "odd replies",
            "turns": [
                {
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "ls"}, "bad_arguments": True}
                    ]
                },
                {"empty": True, "text": "ignored because empty"},
                {"text": "cut off", "truncated": True, "cached_tokens": 5},
            ],
        },
        {"match": "*", "turns": [{"text": "Default hello."}]},
    ]
}

OPENAI_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
ANTHROPIC_TOOLS: list[Any] = [
    {
        "name": "bash",
        "description": "run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


def run(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run one async test body with a hard time bound."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def oai(server: MockLLMServer, key: str = "test-key") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=server.openai_base_url, api_key=key, max_retries=0, timeout=10.0
    )


def ant(server: MockLLMServer, key: str = "test-key") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=server.anthropic_base_url, api_key=key, max_retries=0, timeout=10.0
    )


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


async def oai_ask(server: MockLLMServer, text: str, **kwargs: Any) -> Any:
    async with oai(server) as client:
        return await client.chat.completions.create(model="gpt-mock", messages=user(text), **kwargs)


async def ant_ask(server: MockLLMServer, text: str, **kwargs: Any) -> Any:
    async with ant(server) as client:
        return await client.messages.create(
            model="claude-mock", max_tokens=256, messages=user(text), **kwargs
        )


def http_json(url: str, payload: Any | None = None) -> tuple[int, Any]:
    """GET (or POST `payload` to) a control URL of the server: (status, parsed body)."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def ask_once(base_url: str, api: str) -> object:
    """One "hi" to a loopback server through Helios's own client of `api` ("openai" or
    "anthropic"): the ModelResponse, or the exception it raised (its type is what the
    callers check)."""
    from helios.models.base import GenerationConfig, Message
    from helios.models.routing import resolve_model
    from helios.models.services import create_model

    if api == "openai":
        spec = resolve_model("openai-compatible/m", base_url=f"{base_url}/v1", api_key="k")
    else:
        spec = resolve_model("anthropic/m", base_url=base_url, api_key="k")
    model = create_model(spec)
    try:
        return await model.generate([Message("user", "hi")], [], GenerationConfig(timeout=10))
    except Exception as exc:
        return exc
    finally:
        await model.close()
