"""`openhands`: OpenHands (All Hands AI), installed from PyPI, run headless.

OpenHands 1.x (`openhands-ai`) is its app server on top of the OpenHands Software
Agent SDK (`openhands-sdk` and `openhands-tools`, pinned by each release); the
V0 entry point `python -m openhands.core.main` and its runtimes are gone. Helios
runs what that server runs for a conversation, in one process in the sandbox: the
SDK's default agent (`openhands.tools.preset.default.get_default_agent`, in its
CLI mode: the terminal, file-editor and task-tracker tools, no browser) in a local
`Conversation` on the task's working directory, sent the instruction and run to
its end, its events persisted under a private folder. The model is a LiteLLM
`LLM` (`openai/MODEL` at the model's base URL, native tool calls): Chat
Completions, or the Responses API for the OpenAI models LiteLLM knows to take it.
`LITELLM_LOCAL_MODEL_COST_MAP` keeps LiteLLM from fetching its price list.

The launcher reads the model, endpoint and key from its own variables and drops
them, with those that ran the bundled Python, before OpenHands starts, so the
commands the agent runs (through tmux when the sandbox has it, else a plain
subprocess) see neither the key nor the bundle. When the run ends (or fails) it
writes each of the conversation's events (OpenHands's own JSON) and the run's
metrics (tokens per model call, by response id) as JSON lines: the log that
`convert` reads. OpenHands's own output goes to `agent/openhands.stderr`.

The install is `pip install --target` with the host's Python 3.13 (OpenHands
needs 3.12 or 3.13; Helios may run on 3.11: `installed.python_runtime.find`), beside
a relocatable copy of that Python: the sandbox needs no Python, only a glibc as
new as the host's. About 1.3 GB in 60,000 files.
"""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any, ClassVar

from helios.agents.base import AgentContext
from helios.agents.installed import python_runtime
from helios.agents.installed.base import InstalledAgent, counts, tool_arguments
from helios.errors import ConfigError
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.usage import Usage

#: OpenHands's private folder inside the sandbox (its conversation and the log)
OPENHANDS_HOME = "/tmp/.helios-openhands"
LOG = f"{OPENHANDS_HOME}/events.jsonl"
#: what carries the model and endpoint to the launcher (dropped before OpenHands starts)
MODEL_VARIABLE = "HELIOS_OPENHANDS_MODEL"
BASE_URL_VARIABLE = "HELIOS_OPENHANDS_BASE_URL"
#: dropped once the bundled Python has started: the agent's commands see the task's own
_FORGET = ("PYTHONHOME", "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONDONTWRITEBYTECODE")
_LAUNCH = """import json, os, sys
instruction, log = sys.argv[1], sys.argv[2]
model = os.environ.pop(%(model)r)
base_url = os.environ.pop(%(base)r, "") or None
key = os.environ.pop(%(key)r, "") or "none"  # LiteLLM's OpenAI client refuses no key at all
for name in %(forget)r:
    os.environ.pop(name, None)
from openhands.sdk import LLM, Conversation
from openhands.tools.preset.default import get_default_agent
llm = LLM(model=model, base_url=base_url, api_key=key, usage_id="agent",
          native_tool_calling=True)
conversation = Conversation(agent=get_default_agent(llm, cli_mode=True),
                            workspace=os.getcwd(), visualizer=None,
                            persistence_dir=%(home)r + "/conversations")
try:
    conversation.send_message(instruction)
    conversation.run()
finally:
    with open(log, "w", encoding="utf-8") as out:
        for event in conversation.state.events:
            out.write(json.dumps({"type": "event", "event": event.model_dump(mode="json")}))
            out.write("\\n")
        metrics = conversation.conversation_stats.get_combined_metrics()
        out.write(json.dumps({"type": "metrics", "metrics": metrics.model_dump(mode="json")}))
        out.write("\\n")
"""


class OpenHandsAgent(InstalledAgent):
    name: ClassVar[str] = "openhands"
    registry: ClassVar[str] = "pip"
    package: ClassVar[str] = "openhands-ai"
    default_version: ClassVar[str] = "1.11.0"
    python_version: ClassVar[str] = "3.13"
    #: the packages (`site/`) and the Python that runs them (`python/`)
    payload: ClassVar[str] = "."
    key_variable: ClassVar[str] = "HELIOS_OPENHANDS_API_KEY"

    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        launch = _LAUNCH % {"model": MODEL_VARIABLE, "base": BASE_URL_VARIABLE,
                            "key": self.key_variable, "forget": _FORGET,
                            "home": OPENHANDS_HOME}  # fmt: skip
        runtime = {**python_runtime.launch_env(f"{home}/python"), "PYTHONPATH": f"{home}/site",
                   "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        python = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in runtime.items()),
                           shlex.quote(f"{home}/python/python")])  # fmt: skip
        # its own output goes to standard error; standard output is the events' log
        return "\n".join([
            f"mkdir -p {OPENHANDS_HOME} && rm -f {LOG} || exit 1",
            f"{python} -c {shlex.quote(launch)} {shlex.quote(instruction)} {LOG} "
            "< /dev/null 1>&2",
            f"cat {LOG} 2>/dev/null",
        ])  # fmt: skip

    def environment(self, model: ModelSpec) -> dict[str, str]:
        if model.api != "openai":
            raise ConfigError(f"openhands is run over OpenAI's API; {model.qualified} does "
                              "not speak it (use an openai/, openrouter/ or openai-compatible/ "
                              "model)", field="--model")  # fmt: skip
        env = {MODEL_VARIABLE: f"openai/{model.model}",
               **({BASE_URL_VARIABLE: model.url} if model.url else {}),
               "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "OPENHANDS_SUPPRESS_BANNER": "1"}  # fmt: skip
        if model.api_key:
            env[self.key_variable] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        usage = Usage()
        messages = event_messages(log, usage)
        if ctx.services is not None and not usage.cost_usd:  # no price LiteLLM knew
            model = ctx.services.spec.qualified
            for reply in messages:
                if reply.usage is not None:
                    ctx.services.prices.price_usage(model, reply.usage)
            ctx.services.prices.price_usage(model, usage)
        ctx.usage.add(usage)
        return messages


def event_messages(log: str, usage: Usage) -> list[Message]:
    """OpenHands's events as Helios messages: each model reply (its text, reasoning
    and tool calls, the actions of one response made one message, with that
    response's tokens) and each observation or agent error as a tool result. The
    system prompt and the first user message (the instruction) are left out; the
    run's metrics are added to `usage`."""
    events: list[dict[str, Any]] = []
    metrics: dict[str, Any] = {}
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "event" and isinstance(record.get("event"), dict):
            events.append(record["event"])
        elif record.get("type") == "metrics" and isinstance(record.get("metrics"), dict):
            metrics = record["metrics"]
    per_response = {str(u.get("response_id")): _usage(u)
                    for u in metrics.get("token_usages") or [] if isinstance(u, dict)}  # fmt: skip
    messages: list[Message] = []
    replies: dict[str, Message] = {}  # by response id: one reply's several actions
    instruction_seen = False
    for event in events:
        kind = event.get("kind")
        response = str(event.get("llm_response_id") or "")
        count = len(messages)
        if kind == "ActionEvent":
            reply = replies.get(response) if response else None
            if reply is None:
                reply = Message("assistant", _text(event.get("thought")),
                                reasoning=_string(event.get("reasoning_content")),
                                usage=per_response.get(response))  # fmt: skip
                messages.append(reply)
                if response:
                    replies[response] = reply
            reply.tool_calls.append(_tool_call(event))
        elif kind == "MessageEvent":
            raw = event.get("llm_message")
            raw = raw if isinstance(raw, dict) else {}
            text = _text(raw.get("content"))
            if event.get("source") == "user":
                if instruction_seen:
                    messages.append(Message("user", text))
                instruction_seen = True
            elif event.get("source") == "agent":
                messages.append(Message("assistant", text,
                                        reasoning=_string(raw.get("reasoning_content")),
                                        usage=per_response.get(response)))  # fmt: skip
        elif kind == "ObservationEvent":
            raw = event.get("observation")
            raw = raw if isinstance(raw, dict) else {}
            code = raw.get("exit_code")
            failed = bool(raw.get("is_error")) or (isinstance(code, int) and code not in (0, -1))
            messages.append(Message("tool", _text(raw.get("content")),
                                    tool_call_id=str(event.get("tool_call_id") or ""),
                                    is_error=failed))  # fmt: skip
        elif kind == "AgentErrorEvent":
            messages.append(Message("tool", str(event.get("error") or ""),
                                    tool_call_id=str(event.get("tool_call_id") or ""),
                                    is_error=True))  # fmt: skip
        at = _time(event.get("timestamp"))
        if at is not None and len(messages) > count:
            messages[-1].created = at
    total = Usage()
    for one in per_response.values():
        total.add(one)
    cost = metrics.get("accumulated_cost")
    if isinstance(cost, int | float) and cost > 0:
        total.cost_usd = float(cost)
    usage.add(total)
    return messages


def _tool_call(event: dict[str, Any]) -> ToolCall:
    raw = event.get("tool_call")
    call: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return ToolCall(id=str(call.get("id") or event.get("tool_call_id") or ""),
                    name=str(call.get("name") or event.get("tool_name") or ""),
                    arguments=tool_arguments(call.get("arguments")))  # fmt: skip


def _text(content: Any) -> str:
    """OpenHands's content (a list of text and image parts) as text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(str(p.get("text") or "") for p in content
                     if isinstance(p, dict) and p.get("type") == "text")  # fmt: skip


def _time(value: Any) -> float | None:
    """An event's ISO timestamp (the sandbox's local time when naive) in seconds."""
    try:
        return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else None
    except ValueError:
        return None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _usage(raw: dict[str, Any]) -> Usage:
    """One model call's tokens, as OpenHands counted them."""

    count = counts(raw)
    return Usage(input_tokens=count("prompt_tokens"), output_tokens=count("completion_tokens"),
                 cache_read_tokens=count("cache_read_tokens"),
                 cache_write_tokens=count("cache_write_tokens"),
                 reasoning_tokens=count("reasoning_tokens"), calls=1)  # fmt: skip
