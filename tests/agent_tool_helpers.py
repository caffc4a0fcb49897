"""Helpers of the tool tests: a tool runner in a real sandbox, and checks of its outcomes."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from helios.agents.tools import ToolRunner
from helios.environments.base import Environment

Scenario = Callable[[ToolRunner], Awaitable[None]]
MARKER = re.compile(r"\n\[\.\.\. (\d+) characters truncated \.\.\.\]\n")
SEQ_OUTPUT = "".join(f"{i}\n" for i in range(1, 100001))


def _run_in(env: Environment, scenario: Scenario, *, build: bool = False, **kw: Any) -> None:
    async def go() -> None:
        if build:
            await env.build()
        await env.start()
        try:
            await scenario(ToolRunner(env, workdir=env.workdir, **kw))
        finally:
            await env.stop()

    asyncio.run(go())


async def ok(runner: ToolRunner, name: str, **args: Any) -> str:
    outcome = await runner.run(name, args)
    assert not outcome.is_error, outcome.output
    assert not outcome.finished
    return outcome.output


async def err(runner: ToolRunner, name: str, **args: Any) -> str:
    outcome = await runner.run(name, args)
    assert outcome.is_error, outcome.output
    assert outcome.output.startswith("Error: "), outcome.output
    assert not outcome.finished
    return outcome.output


async def content(runner: ToolRunner, path: str) -> str:
    result = await runner.env.exec(f"cat {path}")
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _split_truncated(text: str) -> tuple[str, int, str]:
    match = MARKER.search(text)
    assert match is not None, text[:200]
    return text[: match.start()], int(match.group(1)), text[match.end() :]
