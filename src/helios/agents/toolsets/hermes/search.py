"""Hermes's `search_files`: regex search in file contents, or find files by name.

Runs `grep -E` / `find` inside the sandbox (POSIX tools; no ripgrep assumed), and
pages the results with `offset` and `limit` like Hermes.
"""

from __future__ import annotations

import shlex
from typing import Any, ClassVar, Literal

from pydantic import Field

from helios.agents.tools_text import ToolInputError, check_shell_text
from helios.agents.toolsets.base import ToolContext
from helios.agents.toolsets.hermes.base import HermesArgs, HermesTool, sandbox_path, tool_spec

SEARCH_TIMEOUT = 60.0
#: lines read back from the sandbox at most (the rest is counted, not shipped)
MAX_LINES = 5000


class SearchFilesArgs(HermesArgs):
    pattern: str = Field(description="Regex pattern for content search, or glob pattern "
                         "(e.g., '*.py') for file search")  # fmt: skip
    target: Literal["content", "files"] = Field(
        "content",
        description="'content' searches inside file contents, 'files' searches for files by name",
    )
    path: str = Field(".", description="Directory or file to search in (default: the working "
                      "directory)")  # fmt: skip
    file_glob: str | None = Field(
        None, description="Only search files whose name matches this glob (content search)"
    )
    limit: int = Field(50, ge=1, le=1000, description="Maximum number of results to return "
                       "(default: 50)")  # fmt: skip
    offset: int = Field(0, ge=0, description="Skip the first N results, for paging "
                        "(default: 0)")  # fmt: skip
    output_mode: Literal["content", "files_only", "count"] = Field(
        "content",
        description="Content search output: 'content' gives matching lines with line numbers, "
        "'files_only' the file paths, 'count' match counts per file",
    )
    context: int = Field(0, ge=0, le=20, description="Lines of context before and after each "
                         "match (content search)")  # fmt: skip


def _grep_command(args: SearchFilesArgs, path: str) -> str:
    flags = {"content": "-rnIE", "files_only": "-rlIE", "count": "-rcIE"}[args.output_mode]
    parts = ["grep", flags]
    if args.output_mode == "content" and args.context:
        parts.append(f"-C{args.context}")
    if args.file_glob:
        parts.append(f"--include={shlex.quote(args.file_glob)}")
    parts += ["-e", shlex.quote(args.pattern), "--", shlex.quote(path)]
    return " ".join(parts)


def _find_command(args: SearchFilesArgs, path: str) -> str:
    # Newest first, as Hermes sorts file results; plain find where -printf is missing.
    quoted, pattern = shlex.quote(path), shlex.quote(args.pattern)
    return (
        f"{{ find {quoted} -type f -name {pattern} -printf '%T@ %p\\n' 2>/dev/null "
        f"| sort -rn | cut -d' ' -f2- ; }} || find {quoted} -type f -name {pattern}"
    )


class SearchFilesTool(HermesTool[SearchFilesArgs]):
    Args: ClassVar[type[SearchFilesArgs]] = SearchFilesArgs
    bulky_field: ClassVar[str] = "output"
    spec = tool_spec(
        "search_files",
        "Search file contents with a regular expression (target='content'), or find files "
        "by name with a glob (target='files'), in the sandbox. Results are paged with "
        "offset and limit; content matches come as 'path:line:text'.",
        SearchFilesArgs,
    )

    async def call(self, args: SearchFilesArgs, ctx: ToolContext) -> dict[str, Any]:
        check_shell_text("pattern", args.pattern)
        if not args.pattern:
            raise ToolInputError("search_files: the pattern is empty")
        path = sandbox_path(args.path, ctx.workdir)
        files = args.target == "files"
        command = _find_command(args, path) if files else _grep_command(args, path)
        script = f"{command} | head -n {MAX_LINES + 1}"
        result = await ctx.env.exec(script, cwd=ctx.workdir, timeout=SEARCH_TIMEOUT)
        if result.timed_out:
            return {"error": f"the search did not finish within {SEARCH_TIMEOUT:g}s; narrow "
                    "the path or the pattern"}  # fmt: skip
        lines = [line for line in result.stdout.splitlines() if line]
        if args.output_mode == "count" and args.target == "content":
            lines = [line for line in lines if not line.endswith(":0")]
        if not lines and result.stderr.strip():
            # grep's and find's own complaints: a bad regex, a missing path
            return {"error": result.stderr.strip().splitlines()[-1][:300]}
        page = lines[args.offset : args.offset + args.limit]
        found: dict[str, Any] = {
            "total_count": len(lines),
            "output": "\n".join(page),
        }
        if len(lines) > MAX_LINES:
            found["total_count"] = f"more than {MAX_LINES}"
        if args.offset + args.limit < len(lines):
            found["truncated"] = True
            found["hint"] = f"Use offset={args.offset + args.limit} to see more results"
        return found
