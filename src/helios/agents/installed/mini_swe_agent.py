"""`mini-swe-agent`: Princeton's and Stanford's mini-swe-agent, installed from PyPI,
run headless.

`python3.X -m minisweagent.run.mini -y --exit-immediately -m openai/MODEL -c mini.yaml
-c model.model_kwargs.api_base=URL -t INSTRUCTION -o TRAJECTORY`, with
`MSWEA_CONFIGURED=true`, `MSWEA_COST_TRACKING=ignore_errors` (without it a model
LiteLLM has no price for aborts after its first call), `LITELLM_LOCAL_MODEL_COST_MAP`
(no price list fetched from the internet) and the key in `OPENAI_API_KEY`. It calls
one `bash` tool over Chat Completions (through LiteLLM, its own dependency).

The install is `pip install --target` with Helios's own Python, made before the
sandbox is built, so the sandbox needs a Python of the same minor version
(`python3.11` for Helios on 3.11: the compiled wheels are built for it); the
command says so in one line when the image has none.
Its trajectory file (the messages it sent and received, each reply with the
provider's response and usage) is printed after the run and becomes the trajectory;
its own output goes to `agent/mini-swe-agent.stderr`.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any, ClassVar

from helios.agents.base import AgentContext
from helios.agents.installed.base import InstalledAgent
from helios.errors import ConfigError
from helios.models.base import Message, ToolCall
from helios.models.routing import ModelSpec
from helios.usage import Usage

#: where the run's trajectory is written inside the sandbox
TRAJECTORY = "/tmp/.helios-mini-swe-agent.traj.json"
#: the Python the install is made with, which the sandbox must have too
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
MISSING_PYTHON = (
    f"mini-swe-agent needs python{PYTHON} in the sandbox (its install is made with Helios's "
    f"own Python, {PYTHON}); the task's image has none"
)


class MiniSweAgent(InstalledAgent):
    name: ClassVar[str] = "mini-swe-agent"
    registry: ClassVar[str] = "pip"
    package: ClassVar[str] = "mini-swe-agent"
    default_version: ClassVar[str] = "2.4.6"
    key_variable: ClassVar[str] = "OPENAI_API_KEY"

    def command(self, instruction: str, model: ModelSpec, home: str) -> str:
        python = f"python{PYTHON}"
        argv = [python, "-m", "minisweagent.run.mini", "-y", "--exit-immediately",
                "-m", f"openai/{model.model}", "-c", "mini.yaml"]  # fmt: skip
        if model.base_url:
            argv += ["-c", f"model.model_kwargs.api_base={model.base_url}"]
        argv += ["-t", instruction, "-o", TRAJECTORY]
        # its own output goes to standard error; standard output is the trajectory
        return (
            f"if ! command -v {python} >/dev/null; then "
            f"echo {shlex.quote(MISSING_PYTHON)} >&2; exit 127; fi; "
            f"rm -f {TRAJECTORY}; {shlex.join(argv)} < /dev/null 1>&2; cat {TRAJECTORY}"
        )

    def salvage(self, home: str) -> str | None:
        """Stopped at the timeout: the trajectory file, which it rewrites after each step."""
        return f"cat {TRAJECTORY} 2>/dev/null"

    def environment(self, model: ModelSpec) -> dict[str, str]:
        if model.api != "openai":
            raise ConfigError(f"mini-swe-agent is run over Chat Completions; {model.qualified} "
                              "does not speak it (use an OpenAI-compatible model)",
                              field="--model")  # fmt: skip
        env = {
            "PYTHONPATH": f"{self.home}/site",
            "MSWEA_CONFIGURED": "true",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/.helios-mini-swe-agent",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if model.api_key:
            env[self.key_variable] = model.api_key
        return env

    def convert(self, log: str, ctx: AgentContext) -> list[Message]:
        return trajectory_messages(log, ctx.usage)


def trajectory_messages(log: str, usage: Usage) -> list[Message]:
    """mini-swe-agent's trajectory file as Helios messages: each model reply (with the
    tokens and cost of its response) and each tool result; their sum is added to
    `usage`. The system prompt and the templated task are left out (the trial's
    first message is the instruction)."""
    try:
        trajectory = json.loads(log)
    except ValueError:
        return []
    if not isinstance(trajectory, dict):
        return []
    messages: list[Message] = []
    total = Usage()
    for raw in trajectory.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        role = raw.get("role")
        if role == "assistant":
            response = (raw.get("extra") or {}).get("response") or {}
            reply = Message(
                "assistant",
                str(raw.get("content") or ""),
                model=response.get("model") if isinstance(response, dict) else None,
            )
            for call in raw.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                function = call.get("function") or {}
                reply.tool_calls.append(
                    ToolCall(
                        id=str(call.get("id") or ""),
                        name=str(function.get("name") or ""),
                        arguments=_arguments(function.get("arguments")),
                    )
                )
            extra = raw.get("extra") or {}
            reply.usage = _usage(
                response.get("usage") if isinstance(response, dict) else None,
                extra.get("cost") if isinstance(extra, dict) else None,
            )
            total.add(reply.usage)
            total.calls += 1
            messages.append(reply)
        elif role == "tool":
            extra = raw.get("extra") or {}
            code = extra.get("returncode") if isinstance(extra, dict) else None
            messages.append(Message("tool", str(raw.get("content") or ""),
                                    tool_call_id=raw.get("tool_call_id"),
                                    is_error=isinstance(code, int) and code != 0))  # fmt: skip
    usage.add(total)
    return messages


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _usage(raw: Any, cost: Any) -> Usage:
    """One reply's tokens, and its cost as LiteLLM priced it (0: no price known)."""
    raw = raw if isinstance(raw, dict) else {}

    def count(key: str, within: Any = raw) -> int:
        value = within.get(key) if isinstance(within, dict) else None
        return value if isinstance(value, int) else 0

    usage = Usage(input_tokens=count("prompt_tokens"), output_tokens=count("completion_tokens"),
                  cache_read_tokens=count("cached_tokens", raw.get("prompt_tokens_details")),
                  reasoning_tokens=count("reasoning_tokens",
                                         raw.get("completion_tokens_details")))  # fmt: skip
    if isinstance(cost, int | float) and cost > 0:
        usage.cost_usd = float(cost)
    else:
        usage.mark_cost_unknown("mini-swe-agent reported no cost (LiteLLM knows no price)")
    return usage
