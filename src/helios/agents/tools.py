"""The task door's tools: `bash`, `editor` and `submit` (the `core` toolset).

`ToolRunner` executes a model's calls against one environment with any list of
tools. A bad call by the model never raises: it comes back as an error result
that says how to call the tool correctly, so the model can fix it on the next
turn. Only infrastructure failures (`EnvironmentError_`) and cancellation
propagate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from helios.agents.tools_editor import EDITOR_COMMANDS, MAX_FILE_BYTES, FileEditor
from helios.agents.tools_text import (
    ToolInputError,
    check_shell_text,
    opt_int,
    req_str,
    truncate_middle,
)
from helios.agents.toolsets.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT,
    Tool,
    ToolContext,
    ToolOutcome,
)
from helios.environments.base import Environment, ExecResult
from helios.errors import EnvironmentError_
from helios.models.tools import ToolSpec

__all__ = [
    "BASH",
    "CORE_TOOLS",
    "DEFAULT_TOOLS",
    "EDITOR",
    "SUBMIT",
    "BashTool",
    "EditorTool",
    "SubmitTool",
    "ToolOutcome",
    "ToolRunner",
    "ToolSpec",
    "truncate_middle",
]

log = logging.getLogger(__name__)

MAX_TIMEOUT = 600


BASH = ToolSpec(
    name="bash",
    description=(
        "Run a shell command in the sandbox and return its output.\n\n"
        "The command runs with `sh -c` in a fresh shell that starts in the task's working "
        "directory, so `cd`, variables and other shell state do not carry over between calls: "
        "chain commands instead (e.g. `cd src && make`). Files you create or change persist "
        "for the rest of the task; processes do not reliably survive the call, and a background "
        "process that keeps the output open makes the call wait for it, so start one only with "
        "its output redirected (`nohup server > /tmp/server.log 2>&1 &`).\n\n"
        f"The command is killed after `timeout` seconds (default {DEFAULT_TIMEOUT:g}, at most "
        f"{MAX_TIMEOUT}); what it printed until then is returned. The result is stdout, then "
        "stderr after a `[stderr]` line, then `[exit code N]` if the exit code is not 0. Output "
        f"longer than about {DEFAULT_MAX_OUTPUT_CHARS} characters is cut in the middle, keeping "
        "the beginning and the end: for big outputs, write them to a file and read parts with "
        "grep, head or tail. There is no terminal and stdin is empty: avoid interactive "
        "programs, pagers and editors (use `git --no-pager`, `apt-get -y`, ...)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "The shell command to run, e.g. `ls -la` or `python3 test.py`.",
            },
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT,
                "description": f"Seconds until the command is killed (default {DEFAULT_TIMEOUT:g})",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
)

EDITOR = ToolSpec(
    name="editor",
    description=(
        "View, create and edit text files in the sandbox. `path` must be absolute "
        "(e.g. /app/main.py). Commands:\n"
        "- `view`: show a file with line numbers (like `cat -n`); `view_range` [start, end] "
        "(1-based, inclusive, end -1 = to the end) shows part of it. On a directory, list its "
        "files and subdirectories up to 2 levels deep, hidden ones omitted.\n"
        "- `create`: write `file_text` as the whole content of the file, creating parent "
        "directories; an existing file is overwritten. The text is written exactly as given, so "
        "end it with a newline if the file should end with one.\n"
        "- `str_replace`: replace `old_str` with `new_str` (omit `new_str` to delete). "
        "`old_str` must occur exactly once and match the file exactly, including whitespace and "
        "indentation; include surrounding lines to make it unique. The line numbers shown by "
        "`view` are not part of the file.\n"
        "- `insert`: insert `new_str` as new lines after line `insert_line` (0 = at the top).\n"
        "Changes are saved immediately and return a numbered snippet of the changed region. "
        f"Binary files and files over {MAX_FILE_BYTES // (1024 * 1024)} MiB are refused: use "
        "bash for them. Long views are cut in the middle like bash output."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": list(EDITOR_COMMANDS),
                "description": "The operation: view, create, str_replace or insert.",
            },
            "path": {
                "type": "string",
                "description": "Absolute path of the file or directory, e.g. /app/main.py.",
            },
            "file_text": {
                "type": "string",
                "description": "create: the full content of the file.",
            },
            "old_str": {
                "type": "string",
                "description": "str_replace: the exact text to replace; must occur exactly once.",
            },
            "new_str": {
                "type": "string",
                "description": "str_replace: the replacement text. insert: the lines to insert.",
            },
            "insert_line": {
                "type": "integer",
                "minimum": 0,
                "description": "insert: the line after which `new_str` goes (0 = at the top).",
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "view: [start, end] lines, 1-based inclusive; end -1 = to the end.",
            },
        },
        "required": ["command", "path"],
        "additionalProperties": False,
    },
)

SUBMIT = ToolSpec(
    name="submit",
    description=(
        "Finish the task. Call this once you have completed the task and checked your work "
        "(for example by running the program or its tests); you must call it when you are done. "
        "It ends your turn for good: the files in the sandbox are then graded as they are, and "
        "no further commands run. Do not call it to ask a question or report progress."
    ),
    parameters={
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "description": "Optional: a short summary of what you did.",
            },
        },
        "required": [],
        "additionalProperties": False,
    },
)

DEFAULT_TOOLS: tuple[ToolSpec, ...] = (BASH, EDITOR, SUBMIT)

_BASH_USAGE = 'Example: {"command": "ls -la", "timeout": 60} (timeout is optional).'


class BashTool(Tool):
    spec: ClassVar[ToolSpec] = BASH

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        command = req_str(arguments, "command", _BASH_USAGE)
        check_shell_text("command", command)
        if not command.strip():
            raise ToolInputError(f"`command` is empty. {_BASH_USAGE}")
        requested = opt_int(arguments, "timeout", _BASH_USAGE)
        if requested is not None and requested < 1:
            raise ToolInputError(f"`timeout` must be at least 1 (seconds), got {requested}.")
        timeout = ctx.default_timeout if requested is None else float(min(requested, MAX_TIMEOUT))
        result = await ctx.env.exec(
            command, cwd=ctx.workdir, env=ctx.exec_env or None, timeout=timeout
        )
        output = format_exec_result(result, timeout, ctx.max_output_chars)
        return ToolOutcome(output, is_error=result.timed_out)


class EditorTool(Tool):
    spec: ClassVar[ToolSpec] = EDITOR

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        editor = FileEditor(ctx.env, workdir=ctx.workdir, max_output_chars=ctx.max_output_chars)
        return ToolOutcome(await editor.run(arguments))


class SubmitTool(Tool):
    spec: ClassVar[ToolSpec] = SUBMIT

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        # `summary` is not checked: a model that wants to finish should not be
        # held back by the type of an optional note (it stays in the trajectory).
        return ToolOutcome("Submitted.", finished=True)


CORE_TOOLS: tuple[type[Tool], ...] = (BashTool, EditorTool, SubmitTool)


class ToolRunner:
    """Executes a model's tool calls inside one environment."""

    def __init__(
        self,
        env: Environment,
        *,
        workdir: str,
        tools: Sequence[Tool] | None = None,
        default_timeout: float = DEFAULT_TIMEOUT,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        exec_env: dict[str, str] | None = None,
    ) -> None:
        self.env = env
        self.workdir = workdir
        self.max_output_chars = max_output_chars
        chosen = list(tools) if tools is not None else [cls() for cls in CORE_TOOLS]
        self.tools: dict[str, Tool] = {tool.name: tool for tool in chosen}
        self.ctx = ToolContext(
            env=env,
            workdir=workdir,
            default_timeout=default_timeout,
            max_output_chars=max_output_chars,
            exec_env=dict(exec_env or {}),
        )

    @property
    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools.values()]

    async def run(self, name: str, arguments: Mapping[str, Any] | None) -> ToolOutcome:
        """Run one call. `arguments` is None when the model sent arguments that were not JSON."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools)
            return _error(
                f"unknown tool {name!r}: there is no tool named {name!r}. The available tools "
                f"are {known}: call one of them by name with a JSON object of arguments.",
                malformed=True,
            )
        if not isinstance(arguments, Mapping):
            got = "not valid JSON" if arguments is None else f"a {type(arguments).__name__}"
            return _error(
                f"the arguments of {name} are {got}; they must be a JSON object. Send a "
                'single JSON object such as {"command": "ls"} for bash.',
                malformed=True,
            )
        try:
            outcome = await tool.run(arguments, self.ctx)
        except ToolInputError as exc:
            return _error(str(exc))
        except EnvironmentError_:
            raise
        except Exception as exc:
            # A bug in a tool must not end the trial: report it to the model (and the log)
            # like any failed call. Cancellation is a BaseException and still propagates.
            log.exception("tool %s failed on %r", name, arguments)
            return _error(
                f"the {name} tool failed unexpectedly ({type(exc).__name__}: {exc}). "
                "Try again, or reach the same goal another way (e.g. with bash)."
            )
        # Every tool fits its own output; this is the guarantee for error texts.
        return ToolOutcome(
            truncate_middle(outcome.output, self.max_output_chars),
            is_error=outcome.is_error,
            finished=outcome.finished,
        )


def _error(message: str, *, malformed: bool = False) -> ToolOutcome:
    return ToolOutcome(f"Error: {message}", is_error=True, malformed=malformed)


def format_exec_result(result: ExecResult, timeout: float, limit: int) -> str:
    """stdout, a labelled stderr, then a status line that truncation never cuts."""
    body = result.stdout
    if result.stderr:
        if body and not body.endswith("\n"):
            body += "\n"
        body += "[stderr]\n" + result.stderr
    if result.timed_out:
        status = f"[command timed out after {timeout:g}s and was killed]"
    elif result.exit_code != 0:
        status = f"[exit code {result.exit_code}]"
    else:
        status = ""
    if not status:
        return truncate_middle(body, limit) if body else "(no output)"
    body = truncate_middle(body, max(limit - len(status) - 1, 0))
    separator = "\n" if body and not body.endswith("\n") else ""
    return f"{body}{separator}{status}"
