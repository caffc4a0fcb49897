"""Hermes's `file` toolset: `read_file`, `write_file` and `patch` (find and replace).

`search_files` lives in `search.py`. Paths may be absolute, relative to the
working directory, or `~/...`.
"""

from __future__ import annotations

import difflib
import posixpath
from typing import Any, ClassVar, Literal

from pydantic import Field

from helios.agents.tools_text import ToolInputError, split_lines
from helios.agents.toolsets.base import ToolContext
from helios.agents.toolsets.hermes.base import HermesArgs, HermesTool, sandbox_path, tool_spec
from helios.agents.toolsets.hermes.sandbox_files import (
    FileMissing,
    read_text,
    upload_text,
    write_text,
)

READ_DEFAULT_LIMIT = 500
READ_MAX_LIMIT = 2000


class ReadFileArgs(HermesArgs):
    path: str = Field(description="Path to the file to read (absolute, relative, or ~/path)")
    offset: int = Field(1, ge=1, description="Line number to start reading from (1-indexed, "
                        "default: 1)")  # fmt: skip
    limit: int = Field(
        READ_DEFAULT_LIMIT,
        ge=1,
        le=READ_MAX_LIMIT,
        description=f"Maximum number of lines to read (default: {READ_DEFAULT_LIMIT}, max: "
        f"{READ_MAX_LIMIT})",
    )


class WriteFileArgs(HermesArgs):
    path: str = Field(description="Path to the file to write (created with its parent "
                      "directories if missing, overwritten if it exists)")  # fmt: skip
    content: str = Field(description="The complete new content of the file")


class PatchArgs(HermesArgs):
    mode: Literal["replace"] = Field(
        "replace", description="Edit mode: 'replace' finds old_string and replaces it."
    )
    path: str = Field(description="The file to edit.")
    old_string: str = Field(
        description="The exact text to find. It must occur once in the file unless "
        "replace_all is true; include surrounding lines to make it unique."
    )
    new_string: str = Field(description="The replacement text ('' deletes old_string).")
    replace_all: bool = Field(
        False, description="Replace every occurrence instead of requiring a unique one."
    )


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:6d}|{line}" for n, line in enumerate(lines, first))


class ReadFileTool(HermesTool[ReadFileArgs]):
    Args: ClassVar[type[ReadFileArgs]] = ReadFileArgs
    bulky_field: ClassVar[str] = "content"
    spec = tool_spec(
        "read_file",
        "Read a text file from the sandbox, with line numbers ('LINE_NUM|CONTENT'). Use "
        "offset and limit to page through long files. A missing file's result suggests "
        "similarly named files. Binary files are refused.",
        ReadFileArgs,
    )

    async def call(self, args: ReadFileArgs, ctx: ToolContext) -> dict[str, Any]:
        path = sandbox_path(args.path, ctx.workdir)
        try:
            file = await read_text(ctx.env, path)
        except FileMissing as exc:
            close = difflib.get_close_matches(posixpath.basename(path), exc.siblings, n=5)
            folder = posixpath.dirname(path)
            return {"error": str(exc), "similar_files": [posixpath.join(folder, c) for c in close]}
        lines = split_lines(file.text)
        start = min(args.offset, len(lines) + 1)
        window = lines[start - 1 : start - 1 + args.limit]
        result: dict[str, Any] = {
            "content": _numbered(window, start),
            "total_lines": len(lines),
            "file_size": file.size,
        }
        end = start - 1 + len(window)
        budget = ctx.max_output_chars - 200
        if len(result["content"]) > budget:
            # Cut at a line boundary and say where to go on, instead of a middle cut.
            kept = 0
            for i, line in enumerate(window):
                kept += len(line) + 8
                if kept > budget:
                    window = window[: max(i, 1)]
                    break
            end = start - 1 + len(window)
            result["content"] = _numbered(window, start)
        if end < len(lines):
            result["truncated"] = True
            result["hint"] = f"Showing lines {start}-{end} of {len(lines)}; use offset={end + 1}"
        return result


class WriteFileTool(HermesTool[WriteFileArgs]):
    Args: ClassVar[type[WriteFileArgs]] = WriteFileArgs
    spec = tool_spec(
        "write_file",
        "Write content to a file in the sandbox, replacing all of its existing content. "
        "Parent directories are created. For targeted edits use 'patch' instead.",
        WriteFileArgs,
    )

    async def call(self, args: WriteFileArgs, ctx: ToolContext) -> dict[str, Any]:
        path = sandbox_path(args.path, ctx.workdir)
        existed = await write_text(ctx.env, path, args.content)
        return {
            "path": path,
            "bytes_written": len(args.content.encode("utf-8", errors="replace")),
            "created": not existed,
        }


class PatchTool(HermesTool[PatchArgs]):
    Args: ClassVar[type[PatchArgs]] = PatchArgs
    bulky_field: ClassVar[str] = "diff"
    spec = tool_spec(
        "patch",
        "Targeted find-and-replace edit of a file in the sandbox. old_string must match the "
        "file exactly (whitespace included) and be unique unless replace_all is true. "
        "Returns a unified diff of the change.",
        PatchArgs,
    )

    async def call(self, args: PatchArgs, ctx: ToolContext) -> dict[str, Any]:
        path = sandbox_path(args.path, ctx.workdir)
        if not args.old_string:
            raise ToolInputError("patch: old_string is empty")
        if args.old_string == args.new_string:
            raise ToolInputError("patch: old_string and new_string are identical")
        file = await read_text(ctx.env, path)
        count = file.text.count(args.old_string)
        if count == 0:
            return {"success": False, "error": f"Could not find old_string in {path}. Use "
                    "read_file to see the current content."}  # fmt: skip
        if count > 1 and not args.replace_all:
            return {"success": False, "error": f"old_string occurs {count} times in {path}; "
                    "include more context to make it unique, or set replace_all=true"}  # fmt: skip
        if not file.writable:
            raise ToolInputError(f"{path} is not writable")
        limit = -1 if args.replace_all else 1
        updated = file.text.replace(args.old_string, args.new_string, limit)
        await upload_text(ctx.env, file.real_path, updated, file.mode)
        diff = difflib.unified_diff(
            file.text.splitlines(keepends=True),
            updated.splitlines(keepends=True),
            fromfile=f"a{path}",
            tofile=f"b{path}",
        )
        return {"success": True, "path": path, "replacements": count if args.replace_all
                else 1, "diff": "".join(diff)}  # fmt: skip
