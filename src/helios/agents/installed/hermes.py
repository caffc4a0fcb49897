"""`hermes`: the Hermes agent (Nous Research), installed from PyPI, run headless.

`hermes -z PROMPT -m MODEL --provider custom:helios --toolsets terminal,file
--usage-file USAGE` (its one-shot mode: approvals bypassed, the final answer on
standard output). The endpoint is a named provider in the `config.yaml` of a
private `HERMES_HOME`, written inside the sandbox before it starts (`base_url`,
`key_env`, Chat Completions); the model's context length is given there too, or
Hermes would look the model up on openrouter.ai. The config also asks for a JSON
snapshot of the session, Hermes's own structured log: its messages in the Chat
Completions shape (text, reasoning, tool calls, tool results). After Hermes exits,
one line each of the usage report (tokens, model calls) and of the session become
the log that `convert` reads.

The install is `pip install --target` with the host's Python into the cache, beside
a relocatable copy of that Python (`installed.python_runtime`): the sandbox needs no
Python, only a glibc as new as the host's. The variables that run that copy
(`PYTHONHOME`, `LD_LIBRARY_PATH`, `PYTHONPATH`) are given to its processes alone
and dropped again once it has started, so the commands Hermes runs see the task's
own Python and libraries.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, ClassVar

from helios.agents.base import AgentContext
from helios.agents.installed import python_runtime
from helios.agents.installed.base import (
    InstalledAgent,
    content_text,
    counts,
    json_record,
    tool_arguments,
)
from helios.errors import ConfigError
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.usage import Usage

#: Hermes's private home inside the sandbox (its config, sessions, state and logs)
HERMES_HOME = "/tmp/.helios-hermes"
#: the provider's name in config.yaml
PROVIDER = "helios"
#: the toolsets offered: the shell and the file tools
TOOLSETS = "terminal,file"
#: the context length Hermes is told (it would otherwise ask openrouter.ai)
CONTEXT_LENGTH = 128_000
#: started, the bundled Python forgets the variables that found it, so that the
#: commands Hermes runs see the task's own Python and libraries
_FORGET = ("PYTHONHOME", "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONDONTWRITEBYTECODE")
#: Hermes writes its session snapshot at a turn's start and end only: the launcher
#: has it written around each round of tool calls too (the call, then its results),
#: so an agent stopped at its timeout leaves its steps so far (a release without
#: these methods runs unchanged)
_LAUNCH = f"""import os, sys
[os.environ.pop(v, None) for v in {_FORGET!r}]
def _snapshots():
    try:
        from run_agent import AIAgent
        run, save = AIAgent._execute_tool_calls, AIAgent._save_session_log
    except Exception:
        return
    def _save(agent, messages):
        try:
            save(agent, messages)
        except Exception:
            pass
    def _execute_tool_calls(self, message, messages, *args, **kwargs):
        _save(self, messages)
        try:
            return run(self, message, messages, *args, **kwargs)
        finally:
            _save(self, messages)
    AIAgent._execute_tool_calls = _execute_tool_calls
_snapshots()
from hermes_cli.main import main
sys.argv[0] = "hermes"
sys.exit(main())
"""
#: prints the usage report and the session snapshot, one JSON line each
_COLLECT = """import glob, json, os, sys
home = os.environ["HERMES_HOME"]
def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
usage = read(home + "/usage.json") or {}
sid = usage.get("session_id")
paths = [f"{home}/sessions/session_{sid}.json"] if sid else sorted(
    glob.glob(home + "/sessions/session_*.json"))
print(json.dumps({"type": "usage", "usage": usage, "exit_code": int(sys.argv[1])}))
for path in paths:
    session = read(path)
    if session is not None:
        print(json.dumps({"type": "session", "session": session}))
"""


class HermesAgent(InstalledAgent):
    name: ClassVar[str] = "hermes"
    registry: ClassVar[str] = "pip"
    package: ClassVar[str] = "hermes-agent"
    default_version: ClassVar[str] = "0.19.0"
    #: the packages (`site/`) and the Python that runs them (`python/`)
    payload: ClassVar[str] = "."
    key_variable: ClassVar[str] = "HELIOS_HERMES_API_KEY"

    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        config = shlex.quote(config_yaml(model, key_variable=self.key_variable))
        argv = ["-z", instruction, "-m", model.model, "--provider", f"custom:{PROVIDER}",
                "--toolsets", TOOLSETS, "--usage-file", f"{HERMES_HOME}/usage.json"]  # fmt: skip
        python = _python(home)
        return "\n".join([
            f'mkdir -p "$HERMES_HOME" && printf %s {config} > "$HERMES_HOME/config.yaml" || exit 1',
            f"{python} -c {shlex.quote(_LAUNCH)} {shlex.join(argv)} < /dev/null "
            '> "$HERMES_HOME/final.txt"',
            f"{python} -c {shlex.quote(_COLLECT)} $?",
        ])  # fmt: skip

    def salvage(self, home: str) -> str | None:
        """Stopped at the timeout: the session snapshot Hermes rewrites at each of its
        persistence points (after each tool round), without the usage report it
        writes at its end (137: killed)."""
        return f"{_python(home)} -c {shlex.quote(_COLLECT)} 137"

    def environment(self, model: ModelSpec) -> dict[str, str]:
        if model.api != "openai":
            raise ConfigError(f"hermes is run over Chat Completions; {model.qualified} does "
                              "not speak it (use an openai/, openrouter/ or openai-compatible/ "
                              "model)", field="--model")  # fmt: skip
        env = {"HERMES_HOME": HERMES_HOME}
        if model.api_key:
            env[self.key_variable] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        usage = Usage()
        messages = session_messages(log, usage)
        if ctx.services is not None:  # Hermes's own estimate knows no scripted model
            model = ctx.services.spec.qualified
            for reply in messages:
                if reply.usage is not None:
                    ctx.services.prices.price_usage(model, reply.usage)
            ctx.services.prices.price_usage(model, usage)
        ctx.usage.add(usage)
        return messages


def _python(home: str) -> str:
    """The install's own Python, with the variables that run it (its process alone)."""
    runtime = {**python_runtime.launch_env(f"{home}/python"), "PYTHONPATH": f"{home}/site",
               "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in runtime.items()),
                     shlex.quote(f"{home}/python/python")])  # fmt: skip


def config_yaml(model: ModelSpec, *, key_variable: str) -> str:
    """Hermes's config.yaml for `model` (JSON, which YAML reads): a named provider at
    the model's endpoint over Chat Completions, the context length, and the
    session's JSON snapshot on."""
    provider: dict[str, Any] = {"name": PROVIDER, "base_url": model.url,
                                "transport": "chat_completions"}  # fmt: skip
    if model.api_key:
        provider["key_env"] = key_variable
    config = {
        "model": {
            "default": model.model,
            "provider": f"custom:{PROVIDER}",
            "context_length": CONTEXT_LENGTH,
        },
        "providers": {PROVIDER: provider},
        "sessions": {"write_json_snapshots": True},
    }
    return json.dumps(config, indent=1) + "\n"


def session_messages(log: str, usage: Usage) -> list[Message]:
    """The log's Hermes session as Helios messages (its first user message, the
    instruction, left out); the usage report's tokens are added to `usage` and set
    on the last reply (Hermes reports them for the whole run)."""
    messages: list[Message] = []
    total: Usage | None = None
    for line in log.splitlines():
        record = json_record(line)
        if record is None:
            continue
        if record.get("type") == "usage" and record.get("usage") and isinstance(
                record.get("usage"), dict):  # fmt: skip
            total = _usage(record["usage"])  # none when it was stopped before writing it
        elif record.get("type") == "session" and isinstance(record.get("session"), dict):
            raw = record["session"].get("messages") or []
            messages = [m for m in map(_message, raw[1:] if raw else raw) if m is not None]
    replies = [m for m in messages if m.role == "assistant"]
    if total is not None:
        if replies:
            replies[-1].usage = total.model_copy()
        usage.add(total)
    return messages


def _message(raw: Any) -> Message | None:
    if not isinstance(raw, dict):
        return None
    role = raw.get("role")
    content = content_text(raw.get("content"))
    if role == "assistant":
        reasoning = raw.get("reasoning_content") or raw.get("reasoning")
        reply = Message("assistant", content,
                        reasoning=reasoning if isinstance(reasoning, str) else None)  # fmt: skip
        for call in raw.get("tool_calls") or []:
            if isinstance(call, dict):
                reply.tool_calls.append(_tool_call(call))
        return reply
    if role == "tool":
        return Message("tool", content, tool_call_id=str(raw.get("tool_call_id") or ""),
                       is_error=_failed(content))  # fmt: skip
    if role == "user":
        return Message("user", content)
    return None


def _tool_call(call: dict[str, Any]) -> ToolCall:
    given = call.get("function")
    function: dict[str, Any] = given if isinstance(given, dict) else {}
    return ToolCall(id=str(call.get("id") or ""), name=str(function.get("name") or ""),
                    arguments=tool_arguments(function.get("arguments")))  # fmt: skip


def _failed(content: str) -> bool:
    """Hermes's tool results are JSON: a nonzero exit code or an error is a failure."""
    try:
        result = json.loads(content)
    except ValueError:
        return False
    if not isinstance(result, dict):
        return False
    code = result.get("exit_code")
    return bool(result.get("error")) or (isinstance(code, int) and code != 0)


def _usage(raw: dict[str, Any]) -> Usage:
    count = counts(raw)
    return Usage(input_tokens=count("input_tokens"), output_tokens=count("output_tokens"),
                 cache_read_tokens=count("cache_read_tokens"),
                 cache_write_tokens=count("cache_write_tokens"),
                 reasoning_tokens=count("reasoning_tokens"), calls=count("api_calls"))  # fmt: skip
