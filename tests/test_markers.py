"""The markers match the engines: tests/engines.py's rules name real fixtures, the
probe sees each engine start, and a test that starts one without its marker fails
(in pytest itself or in a Python subprocess), so `pytest -m "not docker"` starts
no container."""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import pytest

from .engine_probe.helios_engine_probe import classify
from .engines import ENGINES, FIXTURES, HELPERS, MARKERS, PARAMS, TESTS

TESTS_DIR = Path(__file__).resolve().parent
REPO = TESTS_DIR.parent


def _fixtures_and_functions() -> tuple[set[str], set[str]]:
    fixtures: set[str] = set()
    functions: set[str] = set()
    for path in TESTS_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                functions.add(node.name)
            if isinstance(node, ast.FunctionDef) and any(
                "fixture" in ast.unparse(d) for d in node.decorator_list
            ):
                fixtures.add(node.name)
    return fixtures, functions


def test_each_rule_names_a_fixture_helper_or_test_that_exists() -> None:
    fixtures, functions = _fixtures_and_functions()
    for key in FIXTURES:
        path, _, name = key.rpartition("::")
        assert name in fixtures, key
        assert not path or f"def {name}(" in (REPO / path).read_text(), key
    assert set(HELPERS) - functions <= {"DaytonaFake"}, set(HELPERS) - functions
    for key, markers in TESTS.items():
        path, _, name = key.partition("::")
        assert (REPO / path).is_file(), key
        assert not name or f"def {name}(" in (REPO / path).read_text(), key
        assert markers <= set(MARKERS), key
    assert set(PARAMS) <= fixtures | {"provider", "outcome", "local"}


def test_markers_are_declared_in_pyproject() -> None:
    declared = (REPO / "pyproject.toml").read_text()
    for marker in MARKERS:
        assert f'"{marker}:' in declared, marker


def test_the_collected_tests_carry_the_markers_of_their_fixtures(
    request: pytest.FixtureRequest,
) -> None:
    """Over this session's whole collection: a test using need_docker (or a provider
    parameter naming docker) is marked docker, and so on for each engine."""
    for item in request.session.items:
        names = set(getattr(item, "fixturenames", ()))
        path = item.nodeid.split("::", 1)[0]
        for fixture, engines in FIXTURES.items():
            where, _, name = fixture.rpartition("::")
            if name in names and where in ("", path):
                for engine in engines:
                    assert item.get_closest_marker(engine), (item.nodeid, engine)
        params = getattr(getattr(item, "callspec", None), "params", {})
        for name in PARAMS:
            value = params.get(name)
            if isinstance(value, str) and value.startswith(("docker", "daytona")):
                assert item.get_closest_marker("docker"), item.nodeid
            if isinstance(value, str) and value.startswith("local"):
                assert item.get_closest_marker("bwrap"), item.nodeid


@pytest.mark.parametrize(
    ("event", "args", "engine"),
    [
        ("subprocess.Popen", ("/usr/bin/bwrap", ["/usr/bin/bwrap", "--unshare-all"], None, None),
         "bwrap"),
        ("subprocess.Popen", ("prlimit", [b"prlimit", b"--nproc=5", b"/usr/bin/bwrap"], None,
                              None), "bwrap"),
        ("subprocess.Popen", ("docker", ["docker", "run", "--rm"], None, None), "docker"),
        ("socket.connect", (None, "/var/run/docker.sock"), "docker"),
        ("subprocess.Popen", ("Xvfb", ["/usr/bin/Xvfb", ":7"], None, None), "desktop"),
        ("subprocess.Popen", ("c", ["/usr/bin/chromium", "--headless"], None, None), "desktop"),
        ("subprocess.Popen", ("p", ["/usr/bin/python3", "tests/ray_cluster.py", "x"], None,
                              None), "ray"),
        ("os.posix_spawn", ("/x/ray/core/src/ray/gcs/gcs_server",
                            ["/x/ray/core/src/ray/gcs/gcs_server"], {}), "ray"),
        ("subprocess.Popen", ("grep", ["grep", "docker", "bwrap"], None, None), None),
        ("subprocess.Popen", ("p", ["python3", "-m", "helios", "--help"], None, None), None),
        ("subprocess.Popen", ("p", ["python3", "-c", "import sys; sys.path[:0] = "
                                    "['/v/site-packages/ray/_private/x']"], None, None), None),
        ("socket.connect", (None, ("127.0.0.1", 80)), None),
        ("open", ("/usr/bin/bwrap", "r", 0), None),
    ],
    ids=["bwrap", "bwrap-in-prlimit", "docker-cli", "docker-socket", "xvfb", "chromium",
         "ray-cluster", "ray-gcs", "an-argument-only", "helios", "python-code", "tcp",
         "not-a-start"],
)  # fmt: skip
def test_the_probe_sees_each_engine_start(event: str, args: tuple[object, ...],
                                          engine: str | None) -> None:  # fmt: skip
    assert classify(event, args) == engine
    assert engine is None or engine in ENGINES


UNMARKED = """
import subprocess
import sys

import pytest


def _start(program):
    try:  # the audit event comes before the exec: nothing runs
        subprocess.run([program, "--version"], capture_output=True)
    except OSError:
        pass


def test_starts_docker_unmarked():
    _start("/nonexistent/docker")


@pytest.mark.docker
def test_starts_docker_marked():
    _start("/nonexistent/docker")


def test_a_subprocess_starts_bwrap_unmarked():
    code = "import subprocess\\ntry: subprocess.run(['/nonexistent/bwrap'])\\nexcept OSError: pass"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_starts_nothing():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def test_a_test_that_starts_an_engine_unmarked_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run through this suite's conftest (as tests/test_unmarked.py would be)."""
    pytester.makeconftest("from tests.conftest import *  # noqa: F403\n")
    pytester.makepyfile(test_unmarked=textwrap.dedent(UNMARKED))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), path])))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=4, errors=2)
    out = result.stdout.str()
    assert "test_starts_docker_unmarked uses docker but is not marked so" in out
    assert "test_a_subprocess_starts_bwrap_unmarked uses bwrap but is not marked so" in out
