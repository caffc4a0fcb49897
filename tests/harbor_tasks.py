"""Builders of Harbor-format task folders that use the schema's newer features
(users, workdir, env per phase, separate verifier, healthcheck, network, steps)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from helios.tasks.runner import ParallelRunner
from helios.tasks.summary import BatchResult

DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\n"


def write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    path.chmod(mode)
    return path


def task(
    root: Path,
    name: str,
    toml: str,
    *,
    solve: str | None = "true\n",
    test: str | None = "echo 1 > /logs/verifier/reward.txt\n",
    instruction: str | None = "Do the thing.\n",
    dockerfile: str | None = DOCKERFILE,
) -> Path:
    """A task folder; `toml` is the whole task.toml (dedented)."""
    folder = root / name
    write(folder / "task.toml", toml)
    if dockerfile is not None:
        write(folder / "environment" / "Dockerfile", dockerfile)
    if instruction is not None:
        write(folder / "instruction.md", instruction)
    if solve is not None:
        # 0600 on purpose: files Helios uploads for a user must be readable by them
        write(folder / "solution" / "solve.sh", "#!/bin/bash\n" + textwrap.dedent(solve), 0o600)
    if test is not None:
        write(folder / "tests" / "test.sh", "#!/bin/bash\n" + textwrap.dedent(test), 0o600)
    return folder


def step(folder: Path, name: str, *, solve: str | None, test: str | None) -> Path:
    """A step's folder under an existing task: instruction, solution, tests."""
    base = folder / "steps" / name
    write(base / "instruction.md", f"Step {name}.\n")
    if solve is not None:
        write(base / "solution" / "solve.sh", "#!/bin/sh\n" + textwrap.dedent(solve))
    if test is not None:
        write(base / "tests" / "test.sh", "#!/bin/sh\n" + textwrap.dedent(test))
    return base


#: a Dockerfile that makes the users Harbor's examples name
USERS_DOCKERFILE = """\
FROM debian:bookworm-slim
RUN useradd -m agent && useradd -m checker && mkdir -p /custom-workdir \\
    && chown agent /custom-workdir
WORKDIR /app
"""

USERS_TOML = """
schema_version = "1.2"
[agent]
timeout_sec = 60
user = "agent"
[verifier]
timeout_sec = 60
user = "checker"
[verifier.env]
ONLY_VERIFIER = "v"
[solution.env]
ONLY_SOLUTION = "s"
[environment]
workdir = "/custom-workdir"
memory_mb = 512
[environment.env]
EVERY_PHASE = "e"
"""

#: the solution records who and where it ran, and what it saw
USERS_SOLVE = """
set -e
whoami > who.txt
pwd > where.txt
echo "${EVERY_PHASE:-}|${ONLY_SOLUTION:-}|${ONLY_VERIFIER:-}" > env.txt
"""

USERS_TEST = """
ok=1
cd /custom-workdir || ok=0
[ "$(cat who.txt)" = agent ] || { echo "solve.sh ran as $(cat who.txt)"; ok=0; }
[ "$(cat where.txt)" = /custom-workdir ] || { echo "solve.sh ran in $(cat where.txt)"; ok=0; }
[ "$(cat env.txt)" = "e|s|" ] || { echo "solve.sh saw $(cat env.txt)"; ok=0; }
[ "$(whoami)" = checker ] || { echo "test.sh runs as $(whoami)"; ok=0; }
[ "${EVERY_PHASE:-}|${ONLY_SOLUTION:-}|${ONLY_VERIFIER:-}" = "e||v" ] || {
  echo "test.sh sees the wrong variables"; ok=0; }
echo $ok > /logs/verifier/reward.txt
"""


@pytest.fixture(params=["docker", "local"])
def provider(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue("need_docker" if request.param == "docker" else "need_bwrap")
    return str(request.param)


def run_tasks(tasks: Path, out: Path, provider: str, **kwargs: Any) -> BatchResult:
    kwargs.setdefault("agent", "oracle")
    runner = ParallelRunner(
        tasks, provider=provider, output_dir=out, show_progress=False, n_concurrent=2, **kwargs
    )
    return asyncio.run(runner.run())


def records_of(batch: BatchResult) -> dict[str, dict[str, Any]]:
    assert batch.output_dir is not None
    return {
        r.name: json.loads((batch.output_dir / r.folder / "result.json").read_text())
        for r in batch.results
    }


def only_record(batch: BatchResult) -> dict[str, Any]:
    (record,) = records_of(batch).values()
    return record
