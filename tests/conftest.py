"""Shared fixtures. Docker and bwrap tests skip when the engine is missing,
unless HELIOS_REQUIRE_DOCKER / HELIOS_REQUIRE_BWRAP is set (CI): then they fail."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from helios.environments.local import LocalEnvironment

# pytester drives the tool-call pytest plugin's own tests (tests/toolcalls/); pytest
# only accepts pytest_plugins in the top-level conftest.
pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "tasks"


def _docker_ok() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        return False
    image = subprocess.run(
        ["docker", "image", "inspect", "debian:bookworm-slim"], capture_output=True, timeout=30
    )
    return image.returncode == 0


def _bwrap_ok() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(
        ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


def _need(flag: str, available: bool, what: str) -> None:
    if available:
        return
    if os.environ.get(flag) == "1":
        pytest.fail(f"{what} is required ({flag}=1) but not available", pytrace=False)
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="session")
def docker_available() -> bool:
    return _docker_ok()


@pytest.fixture(scope="session")
def bwrap_available() -> bool:
    return _bwrap_ok()


@pytest.fixture
def need_docker(docker_available: bool) -> None:
    _need("HELIOS_REQUIRE_DOCKER", docker_available, "a Docker engine with debian:bookworm-slim")


@pytest.fixture
def need_bwrap(bwrap_available: bool) -> None:
    _need("HELIOS_REQUIRE_BWRAP", bwrap_available, "bubblewrap")


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    target = tmp_path / "tasks"
    shutil.copytree(EXAMPLES, target, symlinks=True)
    return target


TaskMaker = Callable[..., Path]


@pytest.fixture
def make_task(tmp_path: Path) -> TaskMaker:
    """Write a small task: make_task("name", test="...", solve="...", toml_extra="")."""

    def make(
        name: str,
        *,
        test: str = "echo 1 > /logs/verifier/reward.txt\n",
        solve: str | None = "true\n",
        instruction: str = "Do the thing.\n",
        toml_extra: str = "",
        agent_timeout: float = 60,
        verifier_timeout: float = 60,
        root: Path | None = None,
        files: dict[str, str] | None = None,
    ) -> Path:
        task = (root or tmp_path / "tasks") / name
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        copies = "".join(f"COPY {f} /app/{f}\n" for f in (files or {}))
        (task / "environment" / "Dockerfile").write_text(
            f"FROM debian:bookworm-slim\nWORKDIR /app\n{copies}"
        )
        for rel, content in (files or {}).items():
            (task / "environment" / rel).write_text(content)
        (task / "task.toml").write_text(
            'version = "1.0"\n[metadata]\nauthor = "test"\n'
            f"[verifier]\ntimeout_sec = {verifier_timeout}\n"
            f"[agent]\ntimeout_sec = {agent_timeout}\n"
            f"[environment]\ncpus = 1\nmemory_mb = 256\n{toml_extra}"
        )
        (task / "instruction.md").write_text(instruction)
        (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + test)
        if solve is not None:
            (task / "solution").mkdir()
            (task / "solution" / "solve.sh").write_text("#!/bin/sh\n" + solve)
        return task

    return make


def helios_cmd(*args: str) -> list[str]:
    """The installed CLI, run with this interpreter (works inside or outside a venv)."""
    return [sys.executable, "-m", "helios", *args]


def mock_llm_cmd(script: Path, port_file: Path, key: str) -> list[str]:
    """The scripted model server as a user starts it: any free port, written to
    `port_file`, answering only requests with `key`."""
    return [sys.executable, "-m", "helios.testing.mock_llm", "--port", "0", "--script",
            str(script), "--port-file", str(port_file), "--require-key", key]  # fmt: skip


@pytest.fixture
def local_env(need_bwrap: None, make_task: TaskMaker) -> LocalEnvironment:
    """A local sandbox (not started) for a plain task, for the tools' tests."""
    from helios.environments.local import LocalEnvironment
    from helios.tasks.task import load_task

    task = load_task(make_task("tools"))
    return LocalEnvironment(task.sandbox_spec(), trial_id=uuid.uuid4().hex[:8], run_id="test")


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port that refuses connections for the whole test. It stays bound (and not
    listening): a port merely closed again is an ephemeral port like any other, so a
    client's retries could be given it as their own source and connect to themselves
    (a TCP self-connect), or another process could take it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
