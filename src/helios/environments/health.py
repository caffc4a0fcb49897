"""Readiness checks: a command run in the sandbox until it succeeds, like Docker's
HEALTHCHECK, so the agent starts only in a ready environment.

The check runs through `Environment.exec`, so it works the same on every
provider. During the start period failures do not count; after it,
`retries` failures in a row make the sandbox unhealthy: an infrastructure
error that carries the last check's output.
"""

from __future__ import annotations

import asyncio
import time

from helios.environments.base import Environment, ExecResult
from helios.environments.spec import HealthCheck
from helios.errors import EnvironmentUnhealthy

__all__ = ["HealthCheck", "describe", "wait_healthy"]

#: characters of the last check's output kept in the error
OUTPUT_TAIL = 300


async def wait_healthy(env: Environment, check: HealthCheck, *, what: str = "environment") -> int:
    """Run `check` until it passes; return how many checks ran. Raise
    `EnvironmentUnhealthy` (with the last output) once it has failed `retries`
    times in a row after the start period."""
    start_ends = time.monotonic() + check.start_period
    failures = runs = 0
    while True:
        runs += 1
        result = await env.exec(check.command, timeout=check.timeout)
        if result.ok:
            return runs
        if time.monotonic() < start_ends:
            await asyncio.sleep(check.start_interval)
            continue
        failures += 1
        if failures >= max(1, check.retries):
            raise EnvironmentUnhealthy(
                f"{what} unhealthy after {runs} check(s) of `{check.command}`: "
                f"{describe(result, check.timeout)}"
            )
        await asyncio.sleep(check.interval)


def describe(result: ExecResult, timeout: float) -> str:
    status = f"timed out after {timeout:g}s" if result.timed_out else f"exit {result.exit_code}"
    output = " ".join((result.stdout + " " + result.stderr).split())
    if len(output) > OUTPUT_TAIL:
        output = "…" + output[-OUTPUT_TAIL:]
    return f"{status}; last output: {output}" if output else f"{status}; no output"
