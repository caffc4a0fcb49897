"""Shared fixtures. Docker and bwrap tests skip when the engine is missing,
unless HELIOS_REQUIRE_DOCKER / HELIOS_REQUIRE_BWRAP is set (CI): then they fail.

The markers docker, bwrap, desktop, ray and slow are applied here from
tests/engines.py, and checked while each test runs (see _engine_check below);
under pytest-xdist, a module with module- or class-scoped fixtures runs on one
worker (_GroupedScheduling)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Generator, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .engine_probe import helios_engine_probe as probe
from .engines import ENGINES, MARKERS, markers_of

if TYPE_CHECKING:
    from helios.environments.local import LocalEnvironment

    from .headless_browser import Chromium

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
    from .sandbox_helpers import host_system_binds

    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--unshare-all", *host_system_binds(), "/usr/bin/true"],
                           capture_output=True, timeout=30)  # fmt: skip
    return probe.returncode == 0


def _need(flag: str, available: bool, what: str) -> None:
    if available:
        return
    if os.environ.get(flag) == "1":
        pytest.fail(f"{what} is required ({flag}=1) but not available", pytrace=False)
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="session")
def docker_available() -> bool:
    with _unrecorded():  # a probe, not a test's use of docker
        return _docker_ok()


@pytest.fixture(scope="session")
def bwrap_available() -> bool:
    with _unrecorded():
        return _bwrap_ok()


@pytest.fixture
def need_docker(docker_available: bool, request: pytest.FixtureRequest) -> None:
    _marked(request, "docker")
    _need("HELIOS_REQUIRE_DOCKER", docker_available, "a Docker engine with debian:bookworm-slim")


@pytest.fixture
def need_bwrap(bwrap_available: bool, request: pytest.FixtureRequest) -> None:
    _marked(request, "bwrap")
    _need("HELIOS_REQUIRE_BWRAP", bwrap_available, "bubblewrap")


def _marked(request: pytest.FixtureRequest, marker: str) -> None:
    """A test asking for an engine carries its marker (tests/engines.py's rules)."""
    if request.node.get_closest_marker(marker) is None and not request.config.getoption(
        "engine_report"
    ):
        pytest.fail(f"{request.node.nodeid} uses {marker} but is not marked so "
                    "(add it to tests/engines.py)", pytrace=False)  # fmt: skip


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


# -- markers: applied from tests/engines.py, checked at run time -------------------

_PROBE_DIR = Path(__file__).resolve().parent / "engine_probe"
#: engines this process (pytest, or an xdist worker) started during the current test
_used_here: set[str] = set()
_recording = [True]


@contextlib.contextmanager
def _unrecorded() -> Iterator[None]:
    """The conftest's own probes of an engine (is docker there?) use no engine for a test."""
    _recording[0] = False
    try:
        yield
    finally:
        _recording[0] = True


def _record(engine: str) -> None:
    if _recording[0]:
        _used_here.add(engine)


_log_dir = Path(tempfile.mkdtemp(prefix="helios-engines-"))
_count = 0


def pytest_configure(config: pytest.Config) -> None:
    # every Python subprocess a test starts reports the engines it starts
    # (tests/engine_probe/sitecustomize.py), as this process does
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROBE_DIR), path]))
    probe.install(_record)
    if os.environ.get("HELIOS_TEST_TIMELINE") and hasattr(config, "workerinput"):
        # an xdist worker (not a pytest a test runs, which inherits the variables)
        _worker_group(os.environ["PYTEST_XDIST_WORKER"])  # before any fixture starts


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_log_dir, ignore_errors=True)
    if _own_group and _own_group[0] is not None:
        with contextlib.suppress(OSError):  # into the root group, then the group goes
            (_CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            _own_group[0].rmdir()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(markers_of(item)):
            item.add_marker(marker)
    if hasattr(config, "workerinput"):
        # Under pytest-xdist, the modules with a slow test, a desktop or a Ray cluster
        # go first, so that the run does not end waiting on one of them; each module
        # stays whole (its module-scoped fixtures are built once).
        marks = ("slow", "desktop", "ray")
        heavy = {item.nodeid.split("::", 1)[0] for item in items
                 if any(item.get_closest_marker(m) for m in marks)}  # fmt: skip
        items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in heavy)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _count
    _count += 1
    _used_here.clear()
    os.environ[probe.LOG_VAR] = str(_log_dir / f"{_count}.log")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    _engine_check(item)
    return result


def _engine_check(item: pytest.Item) -> None:
    """Fail a test that started an engine (itself, or in a Python process it started)
    without carrying that engine's marker: `pytest -m "not docker"` must start no
    container. With --engine-report=FILE, record what each test used instead."""
    log = Path(os.environ.pop(probe.LOG_VAR, "") or _log_dir / "none")
    used = set(_used_here)
    if log.is_file():
        used |= {line for line in log.read_text().split() if line in ENGINES}
        log.unlink()
    _used_here.clear()
    marked = {m for m in MARKERS if item.get_closest_marker(m) is not None}
    report = item.config.getoption("engine_report")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": item.nodeid, "used": sorted(used),
                                  "marked": sorted(marked)}) + "\n")  # fmt: skip
        return
    missing = sorted(used - marked)
    if missing:
        pytest.fail(f"{item.nodeid} uses {', '.join(missing)} but is not marked so "
                    "(add it to tests/engines.py)", pytrace=False)  # fmt: skip


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--engine-report", default=None, metavar="FILE",
                     help="append what engines each test used to FILE (JSON lines) "
                          "instead of failing a test that is not marked for one")  # fmt: skip


# -- pytest-xdist: modules that share fixtures stay on one worker ----------------

_SHARED_SCOPE = re.compile(r"scope=[\"'](module|class|package)[\"']")


@cache
def _group_of(path: str) -> str | None:
    """The tests of a module that runs `helios cleanup` (which takes the machine's
    orphaned sandboxes, another test's included) run one at a time, on one worker;
    those of a module with a module/class-scoped fixture (built once for its tests)
    run on one worker."""
    try:
        text = (REPO / path).read_text(encoding="utf-8")
    except OSError:
        return None
    if 'helios_cmd("cleanup"' in text or "run_chaos" in text:  # chaos ends with a cleanup
        return "helios cleanup"
    return path if _SHARED_SCOPE.search(text) else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None  # --dist loadfile, loadscope, ... as asked
    from xdist.scheduler import LoadScopeScheduling

    class _GroupedScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """Each test on its own, except the groups of _group_of, which go to one worker
        each (and, as the largest units, first)."""

        def _split_scope(self, nodeid: str) -> str:
            return _group_of(nodeid.split("::", 1)[0]) or nodeid

    return _GroupedScheduling(config, log)


# -- HELIOS_TEST_TIMELINE=FILE: each test phase's worker, start and stop, to find
# the run's critical path (scripts/timeline.py reads it) -----------------------


#: bound now: a test may monkeypatch json.dumps while its own reports are written
_dumps = json.dumps

#: cgroup v1's CPU accounting: each worker and everything it starts (sandboxes,
#: Ray's processes, CLI subprocesses) in a group of its own; docker's containers
#: are dockerd's children, so they are counted apart, machine-wide
_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_own_group: list[Path | None] = []


def _usage(group: Path | None) -> float | None:
    try:
        return int((group / "cpuacct.usage").read_text()) / 1e9 if group else None
    except (OSError, ValueError):
        return None


def _worker_group(worker: str) -> Path | None:
    if not _own_group:
        group: Path | None = _CPUACCT / f"helios-tests-{os.getppid()}-{worker}"
        try:
            assert group is not None
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            group = None  # not root, or no cgroup v1 cpuacct: the worker's own CPU only
        _own_group.append(group)
    return _own_group[0] if _own_group else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("HELIOS_TEST_TIMELINE")
    if not path or getattr(report, "node", None) is not None:
        return  # not asked, or the xdist controller's copy of a worker's report
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    t = os.times()  # the worker's CPU so far, and its waited-for children's
    with open(path, "a", encoding="utf-8") as out:
        out.write(_dumps({"test": report.nodeid, "when": report.when, "worker": worker,
                              "start": report.start, "stop": report.stop,
                              "outcome": report.outcome, "cpu": t.user + t.system,
                              "children_cpu": t.children_user + t.children_system,
                              "pid": os.getpid(),
                              "group_cpu": _usage(_own_group[0] if _own_group else None),
                              "docker_cpu": _usage(_CPUACCT / "docker")}) + "\n")  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    """One headless Chromium per module for the view tests (test_view_browser,
    test_view_numbers): each test opens a tab of its own (`open_page`), with no
    cookies; a new Chromium costs about 1.6 s of CPU, a tab about 0.6."""
    from .headless_browser import VIEW_SIZE, Chromium, chromium

    if chromium() is None:  # as test_watch: the browser is part of the test system
        pytest.fail("chromium is not installed (scripts/setup-system.sh installs it)")
    running = Chromium(VIEW_SIZE)
    try:
        yield running
    finally:
        running.close()
