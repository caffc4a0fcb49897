"""Agent lookup: built-ins plus plugins from the `helios.agents` entry point, and
which agent runs when none is named.

The rule, when no agent is named: a model whose name says `computer-use`
(`gemini/gemini-2.5-computer-use-preview-10-2025`, `openai/computer-use-preview`)
can only drive a desktop, so it gets the `computer` agent, and so does a task that
has a desktop (`[environment.desktop]`, or Harbor's `category = "computer-use"`);
everything else gets the `tool` agent. Naming the `tool` agent with a computer-use
model is an error, said in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from helios.agents.base import Agent
from helios.errors import ConfigError, HeliosError
from helios.lazy import LazyImports
from helios.plugins import Plugins

ENTRY_POINT_GROUP = "helios.agents"


def _builtins() -> Mapping[str, type[Agent]]:
    """Each imported when asked for by name (the oracle needs no model client)."""
    return LazyImports({
        "tool": "helios.agents.tool_agent:ToolAgent",
        "computer": "helios.agents.computer.agent:ComputerAgent",
        "oracle": "helios.agents.oracle:OracleAgent",
        "nop": "helios.agents.nop:NopAgent",
        "claude-code": "helios.agents.installed.claude_code:ClaudeCodeAgent",
        "codex": "helios.agents.installed.codex:CodexAgent",
        "hermes": "helios.agents.installed.hermes:HermesAgent",
        "mini-swe-agent": "helios.agents.installed.mini_swe_agent:MiniSweAgent",
        "gemini-cli": "helios.agents.installed.gemini_cli:GeminiCliAgent",
        "openhands": "helios.agents.installed.openhands:OpenHandsAgent",
    })  # fmt: skip


def _adopt(loaded: object) -> type[Agent] | None:
    return loaded if isinstance(loaded, type) and issubclass(loaded, Agent) else None


# `_builtins` and `entry_points` are looked up at each call (tests replace them).
AGENTS: Plugins[type[Agent]] = Plugins(
    ENTRY_POINT_GROUP, "agent", lambda: _builtins(), _adopt,
    must_be="an Agent subclass", field="--agent",
    entries=lambda group: entry_points(group=group),
)  # fmt: skip


def available_agents() -> list[str]:
    return AGENTS.names()


def agent_class(name: str) -> type[Agent]:
    if name.startswith("acp:"):  # any ACP agent, by package (helios.agents.installed.acp)
        from helios.agents.installed.acp import acp_agent_class

        return acp_agent_class(name)
    return AGENTS.get(name)


def create_agent(name: str, **settings: Any) -> Agent:
    return agent_class(name)(**settings)


def agent_version(name: str, settings: Mapping[str, Any]) -> str | None:
    """The release of the third-party program an installed agent runs: the one its
    settings pin (`--agent-version`), else its default; None for other agents (and
    for a name that is no agent: that is said elsewhere)."""
    try:
        found = agent_class(name)
    except HeliosError:
        return None
    default = getattr(found, "default_version", None)
    if not isinstance(default, str):
        return None
    return str(settings.get("version") or default)


def agent_package(name: str) -> str | None:
    """The package an agent comes from, with its version: "helios 0.1.0" for a
    built-in, the distribution that offers a plugin ("my-agents 2.3.1"); None when
    no installed distribution is known for it. What a rerun compares: a plugin's
    code can change with no change to its `version`."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    from helios.version import __version__

    if name in _builtins():
        return f"helios {__version__}"
    for ep in AGENTS.entries(AGENTS.group):
        if ep.name != name:
            continue
        dist = getattr(ep, "dist", None)  # importlib.metadata's EntryPoint knows it
        if dist is not None and getattr(dist, "name", None):
            return f"{dist.name} {dist.version}"
        top = ep.value.split(":", 1)[0].split(".", 1)[0]
        for dist_name in packages_distributions().get(top, [])[:1]:
            try:
                return f"{dist_name} {version(dist_name)}"
            except PackageNotFoundError:
                return None
        return None
    return None


def is_computer_use_model(model: str | None) -> bool:
    """Whether `model` is a computer-use-only model (its name says `computer-use`)."""
    return model is not None and "computer-use" in model.lower()


def choose_agent(agent: str | None, model: str | None, *, desktop: bool = False) -> str:
    """The agent to run: the one named; else `computer` for a computer-use model or
    a task with a desktop; else `tool`. The `tool` agent with a computer-use model
    is a ConfigError."""
    if agent is None:
        return "computer" if desktop or is_computer_use_model(model) else "tool"
    if agent == "tool" and is_computer_use_model(model):
        raise ConfigError(
            f"{model} is a computer-use model: it drives a desktop, not the tool agent's "
            "tools; use --agent computer (or leave --agent out)",
            field="--agent",
        )
    return agent
