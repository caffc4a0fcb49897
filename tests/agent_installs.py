"""The installed agents' packages, installed ahead of the tests into the host's agent
cache (helios.agents.installed.cache): npm's download happens once, here, and the
tests find it. `python tests/agent_installs.py` (scripts/test.sh runs it) prints what
each install cost; a second run costs nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helios.agents.installed import python_runtime
from helios.agents.installed.acp import acp_agent_class
from helios.agents.installed.base import InstalledAgent
from helios.agents.installed.cache import Package, ensure_installed
from helios.agents.installed.claude_code import ClaudeCodeAgent
from helios.agents.installed.codex import CodexAgent
from helios.agents.installed.gemini_cli import GeminiCliAgent
from helios.agents.installed.hermes import HermesAgent
from helios.agents.installed.mini_swe_agent import MiniSweAgent
from helios.agents.installed.openhands import OpenHandsAgent

AGENTS: tuple[type[InstalledAgent], ...] = (
    ClaudeCodeAgent, CodexAgent, HermesAgent, MiniSweAgent, GeminiCliAgent,
)  # fmt: skip
AGENTS += (acp_agent_class("acp:claude-code"),)  # tests/test_acp_agent.py
AGENTS += (OpenHandsAgent,)  # tests/test_installed_openhands.py (1.3 GB, Python 3.13)


def install(agent: type[InstalledAgent]) -> tuple[Path, float]:
    made = agent()
    package = Package(made.registry, made.package, made.agent_version, made.extras,
                      made.python_version)  # fmt: skip
    installed = asyncio.run(ensure_installed(made.name, package))
    return installed.folder, installed.seconds


if __name__ == "__main__":
    for agent in AGENTS:
        if agent.python_version and python_runtime.find(agent.python_version) is None:
            print(f"[agent installs] {agent.name}: skipped (no Python {agent.python_version} "
                  "on this host; its test skips too)")
            continue
        folder, seconds = install(agent)
        print(f"[agent installs] {agent.name}: {folder} "
              f"({'cached' if seconds == 0.0 else f'installed in {seconds:.1f} s'})")
