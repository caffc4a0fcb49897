"""The same workload through Inspect AI (the optional `bench` extra): its react
agent with its bash tool in its `local` sandbox, against the same model server,
with its fastest flags. Runs `inspect eval` as a process and
measures it from outside (wall, CPU of it and its children, peak RSS).

Note: Inspect's `local` sandbox runs commands on the host itself, with no
isolation; Helios's local sandbox is bwrap. Inspect gets the cheaper sandbox.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TASK = """
from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.tool import bash


@task
def bench():
    samples = [Sample(input=f"Task {{i}}: run echo hello a few times, then submit.",
                      target="hello") for i in range({episodes})]
    return Task(dataset=samples, solver=react(tools=[bash(timeout=60)]),
                scorer=includes(), sandbox="local")
"""

FAST_FLAGS = ["--no-log-realtime", "--no-log-samples", "--no-score-display",
              "--adaptive-connections", "false"]  # fmt: skip


def inspect_binary() -> str | None:
    here = Path(sys.executable).parent / "inspect"
    return str(here) if here.exists() else shutil.which("inspect")


def run(params: dict[str, Any], workdir: Path) -> dict[str, Any]:
    binary = inspect_binary()
    if binary is None:
        raise RuntimeError("inspect-ai is not installed (pip install -e '.[bench]')")
    workdir.mkdir(parents=True, exist_ok=True)
    task_file = workdir / "bench_task.py"
    task_file.write_text(TASK.format(episodes=params["episodes"]))
    concurrency = str(params["concurrency"])
    argv = [binary, "eval", task_file.name, "--model", "openai-api/helios/bench",
            "--max-connections", concurrency, "--max-samples", concurrency,
            "--max-sandboxes", concurrency, "--max-subprocesses", concurrency,
            "--log-dir", str(workdir / "logs"), "--display", "none", *FAST_FLAGS]  # fmt: skip
    # Inspect's OpenAI-compatible provider (Chat Completions): HELIOS_BASE_URL/_API_KEY.
    # An empty HOME: Inspect's bash tool runs a login shell, which would otherwise read
    # the user's profile (here root's `pyenv init` and rehash, on every command), a
    # cost Helios's sandboxes do not pay.
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HELIOS_BASE_URL": params["url"] + "/v1", "HELIOS_API_KEY": "bench",
           "INSPECT_LOG_LEVEL": "warning", "HOME": str(home)}  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False,
                          cwd=workdir)  # fmt: skip
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"inspect eval failed: {proc.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"done": params["episodes"], "failed": 0, "wall": wall, "cpu": cpu,
            "cpu_self": cpu, "cpu_children": 0.0, "rss_mb": after.ru_maxrss / 1024,
            "rss_children_mb": 0.0}  # fmt: skip
