"""`helios` starts at once: `--help` imports no command, and a command imports what it
uses only (`helios.cli.lazy_group`). Each check runs a fresh interpreter and reads
its `sys.modules`, so an import added anywhere on the way shows up here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

import helios
from helios.cli.app import app, command_tree
from helios.cli.lazy_group import LazyCommand, LazyGroup
from helios.models.pricing import price_source

ROOT = Path(__file__).resolve().parent.parent
#: the subprocesses import the helios this test imported, from any folder
SOURCES = Path(helios.__file__).resolve().parent.parent

#: what `helios --help` must not import: the command modules, and what they pull in
NOT_FOR_HELP = (
    "asyncio", "rich", "aiohttp", "pydantic", "yaml", "helios.cli.batch", "helios.cli.common",
    "helios.cli.compare", "helios.cli.generate", "helios.cli.maintenance",
    "helios.cli.options", "helios.cli.tasks_check", "helios.cli.toolcalls", "helios.cli.view",
    "helios.engine.run", "helios.models", "helios.tasks", "helios.datagen", "helios.toolcalls",
    "helios.view", "helios.display", "helios.environments", "helios.agents", "ray", "daytona",
    "datasets",
)  # fmt: skip
#: what a batch of tasks on the local sandbox does not use, up to its first trial
NOT_FOR_BATCH = (
    "helios.view", "helios.results", "ray", "helios.engine.ray_executor", "daytona",
    "helios.environments.daytona", "helios.environments.docker", "aiodocker",
    "helios.toolcalls", "helios.datagen", "datasets", "helios.cli.generate",
    "helios.cli.compare", "helios.cli.view",
    # the --watch server's (and model clients') HTTP library; the prices' snapshot,
    # whose date run.json records, is read once per installed version and kept
    "aiohttp", "genai_prices",
    # a job file's models and YAML (--config), a dataset's fetch (-d)
    "helios.tasks.job", "yaml", "helios.tasks.datasets",
    # a GUI task's desktop, its --watch view and server, the computer agent's settings,
    # a task's MCP servers' client; the retry loop's library (a call that is retried)
    "helios.environments.desktop.desktop", "helios.environments.desktop.actions",
    "helios.environments.desktop.vnc", "helios.environments.desktop.xdotool",
    "helios.environments.desktop.capture", "helios.display.watch", "helios.agents.computer",
    "helios.agents.mcp_tools", "tenacity",
    # an allowlisted network's namespace and proxy
    "helios.environments.egress.proxy", "helios.environments.egress.netns",
)  # fmt: skip

#: runs `helios ARGS...` in this interpreter; prints sys.modules as JSON on exit
CLI = """
import atexit, json, sys
atexit.register(lambda: print("\\nMODULES " + json.dumps(sorted(sys.modules))))
sys.argv = ["helios", *sys.argv[1:]]
from helios.cli.entry import main
main()
"""


def _modules(*args: str, cwd: Path = ROOT, code: str = CLI) -> list[str]:
    path = os.pathsep.join(filter(None, [str(SOURCES), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env={**os.environ, "PYTHONPATH": path},
        capture_output=True, text=True, timeout=120, cwd=cwd, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.rsplit("\nMODULES ", 1)[-1]
    modules: list[str] = json.loads(line)
    return modules


def _found(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules that are one of `names` or inside one of them."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_help_imports_no_command() -> None:
    modules = _modules("--help")
    assert _found(modules, NOT_FOR_HELP) == []
    assert "typer" in modules  # the check itself is live


def test_a_commands_help_imports_that_command_only() -> None:
    modules = _modules("batch", "--help")
    assert "helios.cli.batch" in modules
    others = (
        "helios.cli.generate", "helios.cli.compare", "helios.cli.view", "helios.cli.toolcalls",
        "helios.cli.tasks_check", "helios.cli.maintenance", "helios.view", "ray", "daytona",
        "datasets",
    )  # fmt: skip
    assert _found(modules, others) == []


#: `helios ARGS...` with a dump of sys.modules when the first trial starts
FIRST_TRIAL_HOOK = """
import json, os, sys
from helios.engine import episode
start = episode.EpisodeSession.__init__
def first(self, *args, **kwargs):
    if not os.path.exists("first-trial.json"):
        with open("first-trial.json", "w") as out:
            json.dump(sorted(sys.modules), out)
    start(self, *args, **kwargs)
episode.EpisodeSession.__init__ = first
"""


@pytest.mark.bwrap
@pytest.mark.usefixtures("need_bwrap")
def test_batch_reaches_its_first_trial_without_what_it_does_not_use(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "tasks" / "hello-file", tmp_path / "tasks" / "hello-file")
    args = ["batch", "tasks", "--provider", "local", "--agent", "oracle", "-n", "1", "-q"]
    price_source.cache_clear()
    price_source()  # the kept price source, in this HOME: the batch reads it
    at_exit = _modules(*args, "-o", "out", cwd=tmp_path, code=FIRST_TRIAL_HOOK + CLI)
    at_first_trial = json.loads((tmp_path / "first-trial.json").read_text())
    assert "helios.environments.local" in at_first_trial
    assert _found(at_first_trial, NOT_FOR_BATCH) == []
    # nor once the batch has written its results
    assert _found(at_exit, NOT_FOR_BATCH) == []


def _groups() -> list[tuple[str, type[LazyGroup]]]:
    tree = typer.main.get_command(app)
    groups = [("helios", type(tree))]
    groups += [(name, type(sub)) for name, sub in tree.commands.items() if hasattr(sub, "commands")]
    return [(name, cls) for name, cls in groups if issubclass(cls, LazyGroup)]


def _entries() -> list[tuple[str, LazyCommand]]:
    return [(f"{group} {entry.name}", entry) for group, cls in _groups()
            for entry in cls.lazy_commands]  # fmt: skip


@pytest.mark.parametrize(("name", "entry"), _entries(), ids=[name for name, _ in _entries()])
def test_the_listed_line_is_the_commands_own(name: str, entry: LazyCommand) -> None:
    """The line `helios --help` shows without importing a command is the one the
    command itself gives, at every width click may shorten it to."""
    real, stub = entry.load(), entry.stub()
    assert real.name == stub.name == entry.name
    for limit in range(20, 120):
        assert stub.get_short_help_str(limit) == real.get_short_help_str(limit), limit


def test_help_reads_the_same_as_with_every_command_loaded() -> None:
    def help_of(group: Any) -> str:
        text: str = group.get_help(group.make_context("helios", [], resilient_parsing=True))
        return text

    lazy = typer.main.get_command(app)
    listed = help_of(lazy)
    assert not any(lazy.commands.is_loaded(name) for name in ("run", "batch", "view"))
    assert listed == help_of(command_tree())
    assert "Run every task under TASKS_DIR" in listed and "Work with task folders." in listed


def test_the_command_tree_holds_every_command_loaded() -> None:
    tree = command_tree()
    assert list(tree.commands) == [
        "run", "batch", "rerun", "generate", "export", "cleanup", "toolcalls", "compare", "view",
        "tasks", "config", "cache",
    ]  # fmt: skip
    assert all(tree.commands.is_loaded(name) for name in tree.commands)
    batch = tree.commands["batch"]
    assert "--n-concurrent" in {opt for param in batch.params for opt in param.opts}
    assert list(tree.commands["tasks"].commands) == ["check", "list"]
    assert list(tree.commands["config"].commands) == ["show"]
    assert list(tree.commands["cache"].commands) == ["stats", "clear", "show"]


REGISTRIES = """
import json, sys
from helios.agents.registry import agent_class, available_agents
from helios.environments.registry import available_providers, sandbox_provider
assert "daytona" in available_providers() and "tool" in available_agents()
sandbox_provider("local"), agent_class("oracle")
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def test_a_registry_imports_only_the_builtin_asked_for() -> None:
    modules = _modules(code=REGISTRIES)
    assert "helios.environments.local" in modules and "helios.agents.oracle" in modules
    unused = ("helios.environments.daytona", "helios.environments.docker", "aiodocker",
              "helios.agents.tool_agent", "helios.agents.computer.agent")  # fmt: skip
    assert _found(modules, unused) == []


TOOL_AGENT = """
import json, sys
import helios.agents.tool_agent
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def test_the_tool_agent_imports_no_yaml() -> None:
    """YAML is read from a task's skills (SKILL.md), imported when one is found:
    `helios generate` and a tool agent's batch without skills never import it."""
    modules = _modules(code=TOOL_AGENT)
    assert "helios.agents.skills" in modules
    assert _found(modules, ("yaml", "tenacity", "helios.environments.desktop.desktop")) == []


def test_a_command_runs_with_what_it_imported_out_of_the_collectors_passes() -> None:
    """`run_coroutine` freezes the heap it starts with (`frozen_heap`: the imports, tens
    of thousands of objects a full collection would walk each time) while the work runs,
    and gives it back to the collector after."""
    import gc

    from helios.cli.common import run_coroutine

    async def frozen_now() -> int:
        return gc.get_freeze_count()

    assert gc.get_freeze_count() == 0
    assert run_coroutine(frozen_now()) > 10_000
    assert gc.get_freeze_count() == 0
