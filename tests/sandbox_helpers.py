"""Running a test body in a fresh local sandbox (started, then always stopped)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from helios.environments.local import LocalEnvironment
from helios.environments.spec import SandboxSpec

Body = Callable[[LocalEnvironment], Awaitable[None]]


def in_sandbox(body: Body, *, spec: SandboxSpec | None = None, run_id: str = "test") -> None:
    env = LocalEnvironment(spec or SandboxSpec(), trial_id=uuid.uuid4().hex[:8], run_id=run_id)

    async def go() -> None:
        await env.start()
        try:
            await body(env)
        finally:
            await env.stop()

    asyncio.run(go())
