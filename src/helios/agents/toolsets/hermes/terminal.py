"""Hermes's `terminal` tool: a shell command in the prompt's sandbox, with a timeout.

The result is Hermes's `{"output", "exit_code", "error"}`: a non-zero exit code is
not an error (the model reads it and corrects itself); a timeout is.
"""

from __future__ import annotations

import itertools
import shlex
from typing import Any, ClassVar

from pydantic import Field

from helios.agents.tools_text import ToolInputError, check_shell_text
from helios.agents.toolsets.base import ToolContext
from helios.agents.toolsets.hermes.base import HermesArgs, HermesTool, sandbox_path, tool_spec

DEFAULT_TIMEOUT = 180
MAX_TIMEOUT = 600
#: providers whose commands each run in their own short-lived process namespace
NO_BACKGROUND = frozenset({"local"})
_background_ids = itertools.count(1)


class TerminalArgs(HermesArgs):
    command: str = Field(description="The shell command to run in the sandbox.")
    background: bool = Field(
        False,
        description=(
            "Start the command in the background and return at once; its output goes to a "
            "log file whose path the result names (read it later with another command). For "
            "servers and other long-lived processes. Not every sandbox keeps background "
            "processes alive."
        ),
    )
    timeout: int | None = Field(
        None,
        ge=1,
        description=(
            f"Seconds to wait before the command is killed (default {DEFAULT_TIMEOUT}, at most "
            f"{MAX_TIMEOUT}). The call returns as soon as the command finishes."
        ),
    )
    workdir: str | None = Field(
        None,
        description="Working directory for this command (absolute path). Defaults to the "
        "task's working directory.",
    )


TERMINAL_DESCRIPTION = (
    "Run a shell command in the task's Linux sandbox and return its combined output and exit "
    "code. Each call starts a fresh `sh -c` in the working directory: `cd` and variables do "
    "not carry over between calls, so chain commands (`cd src && make`); files persist. "
    "There is no interactive terminal and stdin is empty: avoid pagers and prompts (use "
    "`git --no-pager`, `apt-get -y`). Long output is cut in the middle; write big outputs to "
    "a file and read parts of it. The network may be off."
)


def _merge(stdout: str, stderr: str) -> str:
    if not stderr:
        return stdout.rstrip("\n")
    if not stdout:
        return stderr.rstrip("\n")
    return f"{stdout.rstrip(chr(10))}\n{stderr.rstrip(chr(10))}"


class TerminalTool(HermesTool[TerminalArgs]):
    Args: ClassVar[type[TerminalArgs]] = TerminalArgs
    spec = tool_spec("terminal", TERMINAL_DESCRIPTION, TerminalArgs)

    async def call(self, args: TerminalArgs, ctx: ToolContext) -> dict[str, Any]:
        check_shell_text("command", args.command)
        if not args.command.strip():
            raise ToolInputError("terminal: the command is empty")
        if args.timeout is not None and args.timeout > MAX_TIMEOUT:
            raise ToolInputError(
                f"terminal: timeout {args.timeout}s is above the foreground maximum of "
                f"{MAX_TIMEOUT}s; use background=true for longer commands"
            )
        cwd = sandbox_path(args.workdir, ctx.workdir) if args.workdir else ctx.workdir
        if args.background:
            return await self._background(args.command, cwd, ctx)
        timeout = float(args.timeout or DEFAULT_TIMEOUT)
        result = await ctx.env.exec(
            args.command, cwd=cwd, env=ctx.exec_env or None, timeout=timeout
        )
        output = _merge(result.stdout, result.stderr)
        if result.timed_out:
            return {
                "output": output,
                "exit_code": 124,
                "error": f"Command timed out after {timeout:g}s and was killed",
            }
        return {"output": output, "exit_code": result.exit_code, "error": None}

    async def _background(self, command: str, cwd: str, ctx: ToolContext) -> dict[str, Any]:
        if ctx.env.name in NO_BACKGROUND:
            raise ToolInputError(
                "terminal: background commands are not supported in this sandbox (each "
                "command runs in its own short-lived process namespace); run it in the "
                f"foreground with a timeout of at most {MAX_TIMEOUT}s"
            )
        log = f"/tmp/background-{next(_background_ids)}.log"
        script = f"nohup sh -c {shlex.quote(command)} > {log} 2>&1 < /dev/null & echo $!"
        result = await ctx.env.exec(script, cwd=cwd, env=ctx.exec_env or None, timeout=30)
        pid = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "?"
        if result.exit_code != 0:
            output = _merge(result.stdout, result.stderr)
            error = "could not start the background command"
            return {"output": output, "exit_code": result.exit_code, "error": error}
        return {
            "output": f"Started in the background (pid {pid}); output goes to {log}",
            "exit_code": 0,
            "error": None,
        }
