"""MCP servers for the tool agent: a task's `[[environment.mcp_servers]]`, reached
through the official `mcp` SDK's client session, their tools offered next to the
agent's own.

A stdio server runs INSIDE the sandbox, started as a Helios service
(`Environment.start_service`) whose stdin is a file the host appends to and whose
stdout is a file the host reads from, both through the sandbox's own exec: so it
works on every provider with services (local, docker) without a socket, a socat
or a Python in the image. An HTTP server (`url`; `transport = "sse"` for the
older SSE transport, else streamable HTTP) is reached with the SDK's HTTP client
from where the agent runs, the host: a compose sidecar's name
(`http://mcp-server:8000/mcp`) resolves only on the trial's compose network, so
such a server is left out with a note.

The server is a service, so the clean-up after each command spares its own
program's processes but kills a child running another program (a `sed` from a
shell script): a server must be one program (Python, Node, a shell's builtins).

Everything the server says is bounded: the tools it lists (`MAX_TOOLS`, their
descriptions and schemas), a line it writes (`MAX_LINE_BYTES`), a result
(truncated to the tool output bound) and the time it takes (`timeout`). A server
that breaks one of them, or answers garbage, becomes a tool error, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helios.agents.sandbox_pipe import PipeClosed, SandboxPipe, safe_name
from helios.agents.toolsets.base import Tool, ToolContext, ToolOutcome
from helios.models.tools import ToolSpec

if TYPE_CHECKING:
    from helios.environments.base import Environment

log = logging.getLogger(__name__)

#: tools taken from one server; the rest are left out (and said so)
MAX_TOOLS = 64
MAX_DESCRIPTION_CHARS = 2000
MAX_SCHEMA_CHARS = 20000
#: one JSON-RPC line from the server, bytes; a longer one ends the session
MAX_LINE_BYTES = 4 * 1024 * 1024
#: how long the server has to start, list its tools, or answer one call
DEFAULT_TIMEOUT = 60.0
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class MCPServer:
    """One MCP server a task offers its agent (Harbor's `[[environment.mcp_servers]]`)."""

    name: str
    transport: str = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None

    @property
    def stdio(self) -> bool:
        return self.command is not None and self.url is None


class MCPUnavailable(Exception):
    """A server that could not be started or listed: its tools are left out."""


def _pipe(env: Environment, server: MCPServer, idle_after: float) -> SandboxPipe:
    safe = safe_name(server.name, "server")
    return SandboxPipe(env, f"/tmp/helios-mcp/{safe}", idle_after, f"the MCP server {server.name}")


async def _start(pipe: SandboxPipe, server: MCPServer, workdir: str) -> None:
    """Start the server as a Helios service fed from the pipe."""
    try:
        await pipe.make()
    except PipeClosed as exc:
        raise MCPUnavailable(str(exc)) from None
    argv = " ".join(shlex.quote(a) for a in (server.command or "", *server.args))
    command = f"cd {shlex.quote(workdir)} 2>/dev/null || cd /; {pipe.feed(argv)}"
    await pipe.env.start_service(f"mcp-{safe_name(server.name, 'server')}", command)


@contextlib.asynccontextmanager
async def _streams(pipe: SandboxPipe, service: str) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's two streams over the sandbox pipe (what its `stdio_client` gives)."""
    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        # Any failure (the sandbox's, the server's death) closes the stream: the
        # session's pending requests then fail at once, as a tool error each.
        async with read_writer:
            try:
                await read_lines()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            except Exception as exc:
                log.info("%s: reading stopped: %s", pipe.label, exc)

    async def read_lines() -> None:
        async def alive() -> bool:
            return await pipe.env.service_running(service)

        async for line in pipe.lines(alive, MAX_LINE_BYTES):
            try:
                message = types.jsonrpc_message_adapter.validate_json(line)
            except ValueError as exc:
                await read_writer.send(exc)
                continue
            await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        try:
            async with write_reader:
                async for item in write_reader:
                    await pipe.send(item.message.model_dump_json(by_alias=True, exclude_unset=True))
        except Exception as exc:
            log.info("%s: writing stopped: %s", pipe.label, exc)
            await read_writer.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _http_streams(server: MCPServer, timeout: float) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's streams to an HTTP server (`url`), reached from where the agent runs:
    streamable HTTP, or the older SSE transport when the task says `sse`."""
    if not server.url:
        raise MCPUnavailable("it has neither a command nor a url")
    if server.transport == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(server.url, timeout=timeout) as (read, write):
            yield read, write
        return
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(server.url) as streams:
        yield streams[0], streams[1]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [truncated]"


class MCPTool(Tool):
    """One tool of an MCP server, called through the server's client session."""

    def __init__(self, spec: ToolSpec, remote_name: str, link: MCPLink) -> None:
        self.spec = spec  # type: ignore[misc]  # each instance is a tool of its own
        self._spec = spec
        self.remote_name = remote_name
        self.link = link

    @property
    def name(self) -> str:
        return self._spec.name

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        limit = ctx.max_output_chars
        try:
            result = await self.link.call(self.remote_name, dict(arguments))
        except Exception as exc:  # the server's failure is the model's observation
            failed = f"the MCP server {self.link.server.name!r} failed: {exc}"
            return ToolOutcome(_clip(failed, limit), is_error=True)
        is_error = bool(_field(result, "is_error", "isError"))
        return ToolOutcome(_clip(_result_text(result), limit), is_error=is_error)


def _field(item: Any, name: str, old_name: str) -> Any:
    """A field of an SDK object under its name in mcp 2 (snake case) or in mcp 1."""
    value = getattr(item, name, None)
    return getattr(item, old_name, None) if value is None else value


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for item in getattr(result, "content", None) or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'content')}]")
    structured = _field(result, "structured_content", "structuredContent")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    return "\n".join(parts) or "(no output)"


class MCPLink:
    """One server's client session, open for one agent run."""

    def __init__(self, server: MCPServer, session: Any, timeout: float) -> None:
        self.server = server
        self.session = session
        self.timeout = timeout

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            async with asyncio.timeout(self.timeout):
                return await self.session.call_tool(name, arguments)
        except TimeoutError:
            raise TimeoutError(f"no answer within {self.timeout:g} s") from None

    async def tools(self, taken: set[str]) -> tuple[list[MCPTool], list[str]]:
        """The server's tools as the agent's (named so none hides another); and notes."""
        async with asyncio.timeout(self.timeout):
            listed = await self.session.list_tools()
        tools: list[MCPTool] = []
        notes: list[str] = []
        items = list(listed.tools)
        if len(items) > MAX_TOOLS:
            notes.append(
                f"MCP server {self.server.name!r} lists {len(items)} tools; "
                f"the first {MAX_TOOLS} are offered"
            )
        for item in items[:MAX_TOOLS]:
            remote = str(item.name)
            name = _SAFE.sub("_", remote)[:64] or "tool"
            if name in taken:
                name = f"{_SAFE.sub('_', self.server.name)}__{name}"[:64]
            if name in taken:
                continue
            schema = _field(item, "input_schema", "inputSchema")
            schema = schema if isinstance(schema, dict) else {}
            too_big = len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS
            if too_big or schema.get("type") != "object":
                schema = {"type": "object"}
            description = _clip(str(item.description or ""), MAX_DESCRIPTION_CHARS)
            spec = ToolSpec(name, f"[MCP server {self.server.name}] {description}".strip(), schema)
            taken.add(name)
            tools.append(MCPTool(spec, remote, self))
        return tools, notes


@contextlib.asynccontextmanager
async def mcp_tools(
    env: Environment,
    servers: Sequence[MCPServer],
    *,
    workdir: str,
    taken: set[str],
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[tuple[list[Tool], list[str]]]:
    """Start and open each server; yield their tools and notes (one line each on a
    server left out: the model is told, and the trajectory keeps it)."""
    from mcp import ClientSession

    tools: list[Tool] = []
    notes: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            pipe = None if not server.stdio else _pipe(env, server, idle_after=timeout + 1)
            try:
                if pipe is None:
                    read, write = await stack.enter_async_context(_http_streams(server, timeout))
                else:
                    await _start(pipe, server, workdir)
                    service = f"mcp-{safe_name(server.name, 'server')}"
                    read, write = await stack.enter_async_context(_streams(pipe, service))
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=timeout)
                )
                async with asyncio.timeout(timeout):
                    await session.initialize()
                link = MCPLink(server, session, timeout)
                found, said = await link.tools(taken)
            except Exception as exc:
                with contextlib.suppress(Exception):
                    detail = await pipe.stderr_tail() if pipe is not None else ""
                    first = str(exc) or type(exc).__name__
                    exc = MCPUnavailable(f"{first}; its stderr: {detail}" if detail else first)
                log.info("MCP server %s unavailable: %s", server.name, exc)
                why = _clip(str(exc) or type(exc).__name__, 300)
                notes.append(f"MCP server {server.name!r} is not available: {why}")
                continue
            tools.extend(found)
            notes.extend(said)
        yield tools, notes
