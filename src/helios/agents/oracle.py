"""`oracle`: runs the task's reference solution. A task that fails under it is broken."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.environments.base import Environment
from helios.errors import AgentError
from helios.failures import ErrorInfo
from helios.secrets import redact

RUN_SOLVE = (
    "if command -v bash >/dev/null 2>&1; then bash /solution/solve.sh; "
    "else sh /solution/solve.sh; fi"
)


class OracleAgent(Agent):
    name: ClassVar[str] = "oracle"
    #: it never uses skills or MCP servers: a task that offers them means the same
    takes: ClassVar[frozenset[str]] = frozenset({"skills", "mcp", "mcp-http"})

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        solution = ctx.solution_dir
        if solution is None or not (solution / "solve.sh").is_file():
            raise AgentError(f"task {ctx.label} has no solution/solve.sh")
        await env.upload(solution, "/solution")
        variables = {**ctx.exec_env, **ctx.solution_env}
        ctx.tool_called("bash", {"command": "sh /solution/solve.sh"})
        result = await env.exec(
            RUN_SOLVE, cwd=ctx.workdir, env=variables or None, timeout=ctx.timeout
        )
        log = (
            f"$ solve.sh (exit {result.exit_code})\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
        if ctx.logs_dir is not None:
            await asyncio.to_thread((ctx.logs_dir / "oracle.txt").write_text, redact(log), "utf-8")
        outcome = AgentOutcome(n_turns=1)
        if not result.ok:
            message = "timed out" if result.timed_out else f"exited {result.exit_code}"
            outcome.error = ErrorInfo(
                type="SolutionFailed", message=f"solve.sh {message}", phase="agent"
            )
        return outcome
