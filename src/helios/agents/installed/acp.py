"""`acp:ID[@VERSION]`: any agent that speaks the Agent Client Protocol (ACP), run
inside the sandbox from its published package and driven by one ACP client
(the `agent-client-protocol` package), with no adapter per agent.

What ID means:

- `acp:npm:PKG[@VERSION]`: an npm package whose program speaks ACP on stdio;
- `acp:pip:PKG[@VERSION]` (or `==VERSION`): a PyPI package, run by its console script;
- `acp:bin:PATH`: an executable file on the host (a script with its `#!` line, a
  static binary), copied into the agent cache; its version is its content's hash;
- `acp:NAME[@VERSION]`: a known ACP agent (`KNOWN`: its package and the flags
  that turn ACP on, such as Gemini CLI's `--experimental-acp`).

`--agent-version` pins another release than the ID's (or the table's). npm and
PyPI packages install once per version into the host's agent cache
(`installed.cache`) and are shown read-only to the sandbox; the sandbox runs them
with its own `node` / `python3`.

The agent runs as one long command of the agent phase (so the processes it starts
live as long as it does), under the agent timeout, with the model's endpoint and
key in the variables of the model's wire (`OPENAI_BASE_URL`/`OPENAI_API_KEY`,
`ANTHROPIC_…`, `GOOGLE_GEMINI_BASE_URL`/`GEMINI_API_KEY`) and `HELIOS_MODEL`.
Its stdio goes over the sandbox's exec (`sandbox_pipe`, as the tool agent's MCP
servers do). The client sends the instruction as one prompt, allows every
permission the agent asks for, offers no file system or terminal of its own
(the agent acts in the sandbox itself), passes the task's stdio MCP servers to
the new session, and records each session update (`agent/acp.log`) as Helios
messages: the agent's text and thoughts, its tool calls and their results, and
the tokens the prompt's answer reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import posixpath
import re
import shlex
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from helios._proc import within
from helios.agents.base import AgentContext, AgentOutcome
from helios.agents.installed.base import MOUNT_ROOT, STOP_MARGIN, InstalledAgent
from helios.agents.installed.cache import Installed, Package, cache_root, check_reachable
from helios.agents.sandbox_pipe import PipeClosed, SandboxPipe
from helios.environments.base import Environment
from helios.errors import ConfigError
from helios.failures import ErrorInfo
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.secrets import redact
from helios.usage import Usage

PREFIX = "acp:"
#: one JSON-RPC line from the agent, bytes
MAX_LINE_BYTES = 16 * 1024 * 1024
#: how long the agent has to end once its stdin is closed
END_GRACE = 5.0


@dataclass(frozen=True)
class ACPSource:
    """Where an ACP agent comes from: `kind` is "npm", "pip" or "bin"."""

    kind: str
    #: the package's name (npm, pip) or the host file (bin)
    package: str
    version: str
    #: the arguments that make its program speak ACP on stdio
    args: tuple[str, ...] = ()
    #: the program to run, when the package has several (npm `bin`, pip console script)
    program: str | None = None
    #: the model wire the agent speaks, when it is not the model's default one
    wire: str | None = None


#: ACP agents known by name: `acp:gemini`, `acp:claude-code`
KNOWN: dict[str, ACPSource] = {
    "gemini": ACPSource("npm", "@google/gemini-cli", "0.61.0", ("--experimental-acp",), "gemini",
                        "gemini"),
    "claude-code": ACPSource("npm", "@zed-industries/claude-code-acp", "0.16.2"),
}
_DEFAULT_VERSION = "latest"


def parse_acp(name: str) -> ACPSource:
    """The source an `acp:` agent name says; ConfigError (one line) for a bad one."""
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else name
    kind, sep, spec = rest.partition(":")
    if not sep:
        found_name, version = _split_version(rest)
        known = KNOWN.get(found_name)
        if known is None:
            raise ConfigError(
                f"unknown ACP agent {name!r}: use acp:npm:PKG[@VERSION], acp:pip:PKG[@VERSION], "
                f"acp:bin:PATH or one of {', '.join(f'acp:{k}' for k in KNOWN)}",
                field="--agent",
            )
        return dataclasses.replace(known, version=version or known.version)
    if kind == "bin":
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ConfigError(f"{name}: no file {spec!r} on this host", field="--agent")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        return ACPSource("bin", str(path.resolve()), digest)
    if kind not in ("npm", "pip") or not spec:
        raise ConfigError(f"bad ACP agent {name!r}: the kinds are npm, pip and bin "
                          "(acp:npm:PKG[@VERSION])", field="--agent")  # fmt: skip
    package, version = _split_version(spec)
    if not re.fullmatch(r"@?[A-Za-z0-9._/-]+", package):
        raise ConfigError(f"bad package name in {name!r}", field="--agent")
    return ACPSource(kind, package, version or _DEFAULT_VERSION)


def _split_version(spec: str) -> tuple[str, str | None]:
    if "==" in spec:
        package, _, version = spec.partition("==")
        return package, version or None
    at = spec.rfind("@")
    if at > 0:  # a leading @ is an npm scope
        return spec[:at], spec[at + 1:] or None
    return spec, None


@functools.cache
def acp_agent_class(name: str) -> type[ACPAgent]:
    """The agent class for `name` (`acp:…`): one per name, so lookups agree."""
    source = parse_acp(name)
    return type(f"ACPAgent[{name}]", (ACPAgent,), {
        "name": name, "source": source, "registry": source.kind,
        "package": source.package, "default_version": source.version,
    })  # fmt: skip


class ACPAgent(InstalledAgent):
    """Drives one ACP agent (made per name by `acp_agent_class`)."""

    name: ClassVar[str] = "acp"
    source: ClassVar[ACPSource]
    key_variable: ClassVar[str] = "OPENAI_API_KEY"
    takes: ClassVar[frozenset[str]] = frozenset({"mcp"})

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "source": self.source.kind,
                "package": f"{self.source.package}@{self.agent_version}",
                "args": list(self.source.args), "settings": self.settings}  # fmt: skip

    @property
    def home(self) -> str:
        what = Path(self.source.package).name if self.source.kind == "bin" else self.source.package
        safe = re.sub(r"[^A-Za-z0-9._-]", "+", f"{self.source.kind}-{what}")
        return f"{MOUNT_ROOT}/acp-{safe.lstrip('+')}-{self.agent_version}"

    # -- the InstalledAgent contract ---------------------------------------------------
    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        """The agent's program, quoted (the instruction goes as a prompt, not here)."""
        return shlex.join(self._argv)

    def environment(self, model: ModelSpec) -> dict[str, str]:
        """The model's wire variables, and `GIVEN` (Helios gives them; it reads none)."""
        model = self._model(model)
        base, key, name = _WIRE_VARIABLES.get(model.api, _WIRE_VARIABLES["openai"])
        env = {"HELIOS_MODEL": model.model, "HELIOS_MODEL_API": model.api, name: model.model}
        if model.base_url:
            env[base] = model.base_url
        if model.api_key:
            env[key] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        return acp_log_messages(log, ctx.usage)

    # -- running ------------------------------------------------------------------------
    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._argv: list[str] = []

    def endpoint(self, model: ModelSpec) -> str | None:
        return self._model(model).base_url

    def _model(self, model: ModelSpec) -> ModelSpec:
        """The model on the wire the agent speaks."""
        if self.source.wire is None:
            return model
        return model.with_api(self.source.wire)  # type: ignore[arg-type]

    async def _install(self) -> tuple[Installed, Path]:
        """The install and its folder (a host file: a cache folder holding a copy of
        it, so it reaches the sandbox as an install does); sets `_argv`."""
        source = self.source
        if source.kind == "bin":
            host = Path(source.package)
            folder = cache_root() / f"acp-bin-{host.name}-{self.agent_version}"
            if not (folder / host.name).is_file():
                folder.mkdir(parents=True, exist_ok=True)
                folder.chmod(0o755)
                copy = folder / f".{host.name}.{os.getpid()}"
                shutil.copy2(host, copy)
                copy.chmod(0o755)
                copy.replace(folder / host.name)
            check_reachable(folder)
            self._argv = [f"{self.home}/{host.name}", *source.args]
            return Installed(folder, 0.0), folder
        installed, payload = await super()._install()
        self._argv = [*_launcher(source, installed.folder, self.home), *source.args]
        return installed, payload

    def _package(self) -> Package:
        if self.source.kind == "bin":
            return Package("bin", self.source.package, self.agent_version)
        return super()._package()

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        if ctx.services is None:
            raise ConfigError(f"the {self.name} agent needs a model (--model)", field="--model")
        spec = ctx.services.spec
        started = time.monotonic()
        installed, payload = await self._install()  # made before the sandbox: found now
        placed = "mounted"
        if not await env.mount_readonly(payload, self.home):
            await env.upload(payload, self.home)
            placed = "uploaded"
        self._record_install(ctx.logs_dir, installed, placed=placed,
                             place_seconds=round(time.monotonic() - started, 3))  # fmt: skip
        variables = {**ctx.exec_env, **self.environment(spec)}
        before = await self._open_route(env, spec)
        if before is not None:  # as the base does: the model's calls through the proxy
            host = (urlsplit(self.endpoint(spec) or "").hostname or "").lower()
            direct = ",".join(h for h in env.direct_hosts() if h != host)
            variables.update({"NO_PROXY": direct, "no_proxy": direct})
        # stopped before the trial's own timeout, with time left to end it and read its log
        left = ctx.timeout - (time.monotonic() - started)
        budget = max(1.0, left - min(STOP_MARGIN, 0.1 * ctx.timeout) - min(2.0, 0.2 * left))
        session = _Session(self, env, ctx, spec)
        ctx.conversation.append(Message("user", instruction))
        try:
            error = await session.run(instruction, budget, variables)
        finally:  # kept even when the trial stops it
            if before is not None:
                await env.set_network(before)
            log = redact("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                 for r in session.records))  # fmt: skip
            if ctx.logs_dir is not None:
                (ctx.logs_dir / "acp.log").write_text(log)
                (ctx.logs_dir / "acp.stderr").write_text(redact(
                    session.stderr + f"\n[helios] {self.name} ended: {session.ending}\n"))
        messages = self.convert(log, ctx)
        ctx.conversation.extend(messages)
        turns = sum(1 for m in messages if m.role == "assistant")
        return AgentOutcome(error=error, n_turns=turns, conversation=ctx.conversation)


#: the variables Helios gives an ACP agent (the model and its wire); not settings of Helios
GIVEN = ("HELIOS_MODEL", "HELIOS_MODEL_API")
_WIRE_VARIABLES = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"),
    "responses": ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"),
    "anthropic": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"),
    "gemini": ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY", "GEMINI_MODEL"),
}


def _launcher(source: ACPSource, folder: Path, home: str) -> list[str]:
    """How the sandbox starts the installed package's program."""
    if source.kind == "npm":
        manifest = folder / "node_modules" / source.package / "package.json"
        try:
            bins = json.loads(manifest.read_text()).get("bin") or {}
        except (OSError, ValueError):
            bins = {}
        if isinstance(bins, str):
            bins = {source.package.rsplit("/", 1)[-1]: bins}
        program = source.program or (next(iter(bins)) if len(bins) == 1 else None)
        if program not in bins:
            has = ", ".join(bins) or "none"
            raise ConfigError(f"{source.package}: say which of its programs speaks ACP "
                              f"(it has: {has})", field="--agent")  # fmt: skip
        script = posixpath.normpath(f"node_modules/{source.package}/{bins[program]}")
        return ["node", f"{home}/{script}"]
    scripts = _console_scripts(folder / "site")
    program = source.program or (next(iter(scripts)) if len(scripts) == 1 else None)
    if program is None and source.package in scripts:
        program = source.package
    if program not in scripts:
        raise ConfigError(f"{source.package}: say which of its console scripts speaks ACP "
                          f"(it has: {', '.join(scripts) or 'none'})", field="--agent")  # fmt: skip
    module, _, func = scripts[program].partition(":")
    code = f"import sys; sys.path.insert(0, {home + '/site'!r}); from {module} import {func} as f; "
    code += "sys.argv[0] = " + repr(program) + "; sys.exit(f())"
    return ["python3", "-c", code]


def _console_scripts(site: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for entry_points in site.glob("*.dist-info/entry_points.txt"):
        section = ""
        for line in entry_points.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "console_scripts" and "=" in line:
                key, _, value = line.partition("=")
                found[key.strip()] = value.strip().split()[0]
    return found


# -- the client ----------------------------------------------------------------------
class _PipeTransport:
    """acp's message transport over the sandbox pipe."""

    def __init__(self, pipe: SandboxPipe, lines: AsyncIterator[bytes]) -> None:
        self.pipe = pipe
        self.lines = lines

    async def send(self, message: dict[str, Any]) -> None:
        await self.pipe.send(json.dumps(message, ensure_ascii=False, separators=(",", ":")))

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await anext(self.lines)
            except (StopAsyncIteration, PipeClosed, OSError):
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue  # an agent's stray output line
            if isinstance(message, dict):
                return message

    async def close(self) -> None:
        await self.lines.aclose()  # type: ignore[attr-defined]


class _Client:
    """What the agent may ask of Helios: permissions (always allowed) and session
    updates (recorded)."""

    def __init__(self, session: _Session) -> None:
        self.session = session

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> Any:  # fmt: skip
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        rank = {"allow_always": 0, "allow_once": 1}
        allowed = sorted((o for o in options if o.kind in rank), key=lambda o: rank[o.kind])
        self.session.records.append({"permission": _dump(tool_call), "allowed": bool(allowed)})
        if not allowed:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allowed[0].option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        record = _dump(update)
        self.session.records.append({"update": record})
        if record.get("sessionUpdate") == "tool_call":
            raw = record.get("rawInput")
            self.session.ctx.tool_called(str(record.get("title") or record.get("kind") or "tool"),
                                         raw if isinstance(raw, dict) else None)  # fmt: skip

    def on_connect(self, conn: Any) -> None:
        pass


def _dump(item: Any) -> dict[str, Any]:
    if hasattr(item, "model_dump"):
        dumped: dict[str, Any] = item.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped
    return dict(item) if isinstance(item, dict) else {"value": str(item)}


class _Session:
    """One run of the agent: its process, the ACP connection, what it said."""

    def __init__(self, agent: ACPAgent, env: Environment, ctx: AgentContext,
                 spec: ModelSpec) -> None:  # fmt: skip
        self.agent = agent
        self.env = env
        self.ctx = ctx
        self.spec = spec
        self.records: list[dict[str, Any]] = []
        self.stderr = ""
        self.ending = "not started"
        tag = re.sub(r"[^A-Za-z0-9_-]", "_", ctx.trial_id or "run")[:40]
        self.pipe = SandboxPipe(env, f"/tmp/helios-acp/{tag}", 0.0, f"the ACP agent {agent.name}")

    def _script(self) -> str:
        d = shlex.quote(self.pipe.dir)
        argv = self.agent.command("", self.spec, self.agent.home)
        # The agent reads a fifo fed by `tail -f` of the pipe's input. The client
        # ends it by a line to the `ctl` fifo (from any exec, even one in another pid
        # namespace): the tail stops, the agent's stdin ends, a second later it is
        # asked to stop (SIGTERM: some never read their stdin's end), then killed.
        # An agent that ends by itself stops the tail: the command ends with it (a
        # `|` would wait for the tail).
        return (
            f"rm -f {d}/p {d}/ctl && mkfifo {d}/p {d}/ctl || exit 97\n"
            f"{argv} < {d}/p > {d}/out 2> {d}/err & a=$!\n"
            f"tail -s 0.05 -n +1 -f {d}/in > {d}/p 2>/dev/null & t=$!\n"
            f"( read x < {d}/ctl; kill $t; [ \"$x\" = now ] || sleep 1; kill $a; "
            f"sleep {END_GRACE:g}; kill -9 $a ) "
            f">/dev/null 2>&1 & w=$!\n"
            f"wait $a; rc=$?; kill $t $w 2>/dev/null; exit $rc\n"
        )

    async def run(self, instruction: str, budget: float,
                  variables: dict[str, str]) -> ErrorInfo | None:  # fmt: skip
        import acp
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        from helios.version import __version__

        await self.pipe.make()
        self.pipe.idle_after = budget + 1  # a prompt is pending all along
        process = asyncio.create_task(self.env.exec(
            self._script(), cwd=self.ctx.workdir, env=variables, timeout=budget + END_GRACE))

        async def alive() -> bool:
            return not process.done()

        transport = _PipeTransport(self.pipe, self.pipe.lines(alive, MAX_LINE_BYTES))
        # _Client serves only what the agent may ask of it (the rest: method not found)
        conn = acp.connect_to_agent(_Client(self), transport)  # type: ignore[arg-type]
        error: ErrorInfo | None = None
        try:
            async with asyncio.timeout(budget):
                started = await conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                        terminal=False),
                    client_info=Implementation(name="helios", version=__version__))
                methods = [m.id for m in started.auth_methods or [] if "api-key" in m.id]
                if methods and self.spec.api_key:  # the key is in its variables
                    await conn.authenticate(method_id=methods[0])
                new = await conn.new_session(cwd=self.ctx.workdir,
                                             mcp_servers=_mcp_servers(self.ctx))  # fmt: skip
                answer = await conn.prompt(session_id=new.session_id,
                                           prompt=[acp.text_block(instruction)])  # fmt: skip
                self.records.append({"prompt_response": _dump(answer)})
                self.ending = f"stop reason {answer.stop_reason}"
        except TimeoutError:
            self.ending = "timed out"
            error = ErrorInfo(type="AgentTimeout", message=f"{self.agent.name} ran past the "
                              f"agent timeout ({self.ctx.timeout:.0f} s) and was stopped",
                              phase="agent")  # fmt: skip
        except Exception as exc:  # the agent's failure: the trial is still scored
            why = f"{type(exc).__name__}: {exc}"[:500]
            self.ending = f"failed: {why}"
            error = ErrorInfo(type="ACPError", message=f"{self.agent.name}: {why}", phase="agent")
        finally:
            await self._end(process, at_once=error is not None)
            with contextlib.suppress(Exception):
                await conn.close()
        return error

    async def _end(self, process: asyncio.Task[Any], at_once: bool) -> None:
        """Close the agent's stdin and stop it a second later (`at_once`: now, after a
        timeout or a failure); it is killed if it outlives that by END_GRACE."""
        if not process.done():
            with contextlib.suppress(Exception):
                ctl = shlex.quote(f"{self.pipe.dir}/ctl")
                say = "now" if at_once else "end"
                await self.env.exec(f"[ -p {ctl} ] && timeout 3 sh -c 'echo {say} > {ctl}'",
                                    cwd="/", timeout=10)  # fmt: skip
            with contextlib.suppress(TimeoutError):
                await within(END_GRACE + 4, asyncio.shield(process))
        if not process.done():
            process.cancel()
        with contextlib.suppress(BaseException):
            result = await process
            self.ending += f"; exit code {result.exit_code}"
        with contextlib.suppress(Exception):
            self.stderr = await self.pipe.stderr_tail(4000)


def _mcp_servers(ctx: AgentContext) -> list[Any]:
    from acp.schema import McpServerStdio

    return [McpServerStdio(name=s.name, command=s.command or "", args=list(s.args), env=[])
            for s in ctx.mcp_servers if s.stdio]  # fmt: skip


# -- the log to messages ---------------------------------------------------------------
def acp_log_messages(log: str, usage: Usage) -> list[Message]:
    """The recorded session updates as Helios messages: the agent's text (and
    thoughts) as assistant messages, each tool call on the message before it, each
    finished call's content as a tool message; the tokens of the prompt's answer
    (and the cost of the last usage update) are added to `usage`."""
    messages: list[Message] = []
    cost: float | None = None

    def reply() -> Message:
        if not messages or messages[-1].role != "assistant":
            messages.append(Message("assistant"))
        return messages[-1]

    for line in log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        update = record.get("update") if isinstance(record, dict) else None
        if isinstance(update, dict):
            kind = update.get("sessionUpdate")
            if kind == "agent_message_chunk":
                reply().content += _content_text(update.get("content"))
            elif kind == "agent_thought_chunk":
                message = reply()
                message.reasoning = (message.reasoning or "") + _content_text(update.get("content"))
            elif kind == "tool_call":
                _announce(messages, update, reply)
            elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
                parts = [c for c in update.get("content") or [] if isinstance(c, dict)]
                text = "\n".join(_content_text(c.get("content")) for c in parts)
                if not text and update.get("rawOutput") is not None:
                    raw_output = update["rawOutput"]
                    text = raw_output if isinstance(raw_output, str) else json.dumps(raw_output)
                messages.append(Message("tool", text, tool_call_id=str(update.get("toolCallId")),
                                        is_error=update.get("status") == "failed"))  # fmt: skip
            elif kind == "usage_update" and isinstance(update.get("cost"), dict):
                amount = update["cost"].get("amount")
                cost = float(amount) if isinstance(amount, int | float) else cost
        answer = record.get("prompt_response") if isinstance(record, dict) else None
        if isinstance(answer, dict):
            told = answer.get("usage") or {}
            total = Usage(input_tokens=int(told.get("inputTokens") or 0),
                          output_tokens=int(told.get("outputTokens") or 0),
                          cache_read_tokens=int(told.get("cachedReadTokens") or 0),
                          calls=sum(1 for m in messages if m.role == "assistant"))  # fmt: skip
            total.cost_usd = cost
            if cost is None:
                total.mark_cost_unknown("the ACP agent reported no cost")
            usage.add(total)
            # ACP reports the prompt's tokens, not each reply's: the last reply holds them
            last = next((m for m in reversed(messages) if m.role == "assistant"), None)
            if last is not None:
                last.usage = Usage(input_tokens=total.input_tokens,
                                   output_tokens=total.output_tokens,
                                   cache_read_tokens=total.cache_read_tokens)  # fmt: skip
    return messages


def _announce(messages: list[Message], update: dict[str, Any], reply: Any) -> None:
    """A `tool_call`: a new call on the current reply, or (an id said before: an
    agent may announce a call, then again with its input) the same call updated."""
    call_id = str(update.get("toolCallId") or "")
    raw = update.get("rawInput")
    arguments = raw if isinstance(raw, dict) and raw else None
    for message in reversed(messages):
        for call in message.tool_calls:
            if call.id == call_id:
                call.arguments = arguments or call.arguments
                return
    title = str(update.get("title") or "")
    # a title is a label ("`ls -l`"); a word-like one names the tool, else its kind does
    name = title if re.fullmatch(r"[\w.-]{1,64}", title) else str(update.get("kind") or "tool")
    message = reply()
    message.tool_calls.append(ToolCall(id=call_id, name=name, arguments=arguments))


def _content_text(content: Any) -> str:
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text") or "")
        return f"[{content.get('type', 'content')}]"
    return ""
