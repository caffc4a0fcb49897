"""pytest plugin for tool-call tests (entry point `pytest11`).

- marker `@pytest.mark.toolcalls(prompt=… | prompts=[…] | cases=[(prompt, expect)],
  expect=[…], runs=1, max_concurrency=None)`;
- fixture `toolcalls_result`: an EvalResult for one prompt and one run, a
  BatchResult otherwise; `toolcalls_synthesizer`, `toolcalls_agent` and
  `toolcalls_evaluator`, which a conftest overrides;
- options `--toolcalls-runs`, `--toolcalls-max-concurrency`, `--toolcalls-no-cache`,
  `--toolcalls-clear-cache`, `--toolcalls-cache-dir`, `--toolcalls-report PATH`;
- a terminal summary: one line per test, then the failures' details.

russo's spellings (`@pytest.mark.russo`, `russo_result`, `russo_synthesizer`,
`russo_agent`, `russo_evaluator`, `--russo-runs`, `--russo-max-concurrency`) are
aliases, registered only when russo itself is not installed. A russo-named
fixture in a conftest is picked up by the toolcalls fixture of the same role.

This module imports Helios lazily: it is loaded by every pytest session.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from helios.toolcalls.cache import AudioCache
    from helios.toolcalls.report import Entry

T = TypeVar("T")

#: russo's names are ours only when russo is not there to own them
ALIASES = importlib.util.find_spec("russo") is None
ENTRIES: pytest.StashKey[list[Entry]] = pytest.StashKey()
MARKER_KEYS = frozenset({"prompt", "prompts", "cases", "expect", "runs", "max_concurrency"})
DEFAULT_CACHE = ".helios_cache/audio"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("toolcalls", "Helios tool-call tests")
    group.addoption(
        "--toolcalls-runs",
        type=int,
        default=None,
        metavar="N",
        help="run each tool-call test N times (a marker's runs= wins)",
    )
    group.addoption(
        "--toolcalls-max-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="at most N runs in flight per test (default: all, capped)",
    )
    group.addoption(
        "--toolcalls-no-cache",
        action="store_true",
        default=False,
        help="always call the synthesizer (no audio cache)",
    )
    group.addoption(
        "--toolcalls-clear-cache",
        action="store_true",
        default=False,
        help="empty the audio cache before the tests",
    )
    group.addoption(
        "--toolcalls-cache-dir",
        default=DEFAULT_CACHE,
        metavar="DIR",
        help=f"the audio cache (default: {DEFAULT_CACHE})",
    )
    group.addoption(
        "--toolcalls-report",
        default=None,
        metavar="PATH",
        help="write a report of the tool-call tests (.json or .html)",
    )
    if ALIASES:
        group.addoption(
            "--russo-runs", type=int, default=None, metavar="N", help="alias of --toolcalls-runs"
        )
        group.addoption("--russo-max-concurrency", type=int, default=None, metavar="N",
                        help="alias of --toolcalls-max-concurrency")  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    spec = "(prompt=… | prompts=[…], expect=[…], runs=1, max_concurrency=None)"
    config.addinivalue_line("markers", f"toolcalls{spec}: a Helios tool-call test")
    if ALIASES:
        config.addinivalue_line("markers", f"russo{spec}: alias of the toolcalls marker")
    config.stash[ENTRIES] = []
    report = config.getoption("toolcalls_report")
    if report:
        from helios.toolcalls.report import check_report_path

        try:
            check_report_path(report)
        except ValueError as exc:
            raise pytest.UsageError(f"--toolcalls-report: {exc}") from None


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("toolcalls_clear_cache"):
        return
    from helios.toolcalls.cache import AudioCache

    cache_dir = config.getoption("toolcalls_cache_dir")
    removed = AudioCache(cache_dir).clear()
    config.get_terminal_writer().line(f"toolcalls: cleared {removed} cached audio entries "
                                      f"from {cache_dir}")  # fmt: skip


def _option(config: pytest.Config, name: str) -> Any:
    value = config.getoption(f"toolcalls_{name}")
    if value is None and ALIASES:
        value = config.getoption(f"russo_{name}")
    return value


# -- fixtures -------------------------------------------------------------------
@pytest.fixture(scope="session")
def toolcalls_audio_cache(pytestconfig: pytest.Config) -> AudioCache:
    from helios.toolcalls.cache import AudioCache

    return AudioCache(pytestconfig.getoption("toolcalls_cache_dir"))


def _default_synthesizer() -> Any:
    from helios.toolcalls.synthesizers import EspeakSynthesizer

    return EspeakSynthesizer()


def _default_evaluator() -> Any:
    from helios.toolcalls.evaluators import ExactEvaluator

    return ExactEvaluator()


def _no_agent() -> Any:
    pytest.fail(
        "a tool-call test needs an agent: define a `toolcalls_agent` fixture in conftest.py",
        pytrace=False,
    )


@pytest.fixture
def toolcalls_synthesizer(request: pytest.FixtureRequest) -> Any:
    """The synthesizer (default: espeak-ng). Return None for text mode."""
    if ALIASES:
        return request.getfixturevalue("russo_synthesizer")
    return _default_synthesizer()


@pytest.fixture
def toolcalls_agent(request: pytest.FixtureRequest) -> Any:
    """The agent under test: override it in conftest.py."""
    if ALIASES:
        return request.getfixturevalue("russo_agent")
    return _no_agent()


@pytest.fixture
def toolcalls_evaluator(request: pytest.FixtureRequest) -> Any:
    """The evaluator (default: ExactEvaluator())."""
    if ALIASES:
        return request.getfixturevalue("russo_evaluator")
    return _default_evaluator()


@pytest.fixture
def toolcalls_result(request: pytest.FixtureRequest) -> Any:
    """Runs the marked test's prompts; None when the test has no marker."""
    marker = request.node.get_closest_marker("toolcalls")
    if marker is None and ALIASES:
        marker = request.node.get_closest_marker("russo")
    if marker is None:
        return None
    result = _run_marker(request, marker)
    request.config.stash[ENTRIES].append((request.node.nodeid, result))
    return result


if ALIASES:

    @pytest.fixture
    def russo_synthesizer() -> Any:
        return _default_synthesizer()

    @pytest.fixture
    def russo_agent() -> Any:
        return _no_agent()

    @pytest.fixture
    def russo_evaluator() -> Any:
        return _default_evaluator()

    @pytest.fixture
    def russo_result(toolcalls_result: Any) -> Any:
        return toolcalls_result


# -- running a marker -----------------------------------------------------------
def _marker_arguments(marker: pytest.Mark) -> dict[str, Any]:
    unknown = sorted(set(marker.kwargs) - MARKER_KEYS)
    if unknown:
        pytest.fail(f"@pytest.mark.{marker.name}: unknown argument(s) {unknown}; "
                    f"known: {sorted(MARKER_KEYS)}", pytrace=False)  # fmt: skip
    kwargs = dict(marker.kwargs)
    if marker.args:
        kwargs.setdefault("prompt", marker.args[0])
    if not any(kwargs.get(key) for key in ("prompt", "prompts", "cases")):
        pytest.fail(f"@pytest.mark.{marker.name} needs prompt=, prompts= or cases=",
                    pytrace=False)  # fmt: skip
    return kwargs


def _run_marker(request: pytest.FixtureRequest, marker: pytest.Mark) -> Any:
    from helios.toolcalls.cache import CachedSynthesizer
    from helios.toolcalls.runner import run_concurrent

    kwargs = _marker_arguments(marker)
    config = request.config
    runs = kwargs.get("runs")
    runs = int(runs if runs is not None else (_option(config, "runs") or 1))
    max_concurrency = kwargs.get("max_concurrency") or _option(config, "max_concurrency")
    synthesizer = request.getfixturevalue("toolcalls_synthesizer")
    agent = request.getfixturevalue("toolcalls_agent")
    evaluator = request.getfixturevalue("toolcalls_evaluator")
    if config.getoption("toolcalls_no_cache"):
        if isinstance(synthesizer, CachedSynthesizer):
            synthesizer = synthesizer.inner
        cache: Any = False
    else:
        cache = request.getfixturevalue("toolcalls_audio_cache")
    prompts = kwargs.get("prompts")
    cases = kwargs.get("cases")
    single = not prompts and not cases and runs == 1
    batch = _run_sync(run_concurrent(
        prompts=None if cases else (prompts or kwargs["prompt"]), cases=cases,
        synthesizer=synthesizer, agent=agent, evaluator=evaluator,
        expect=kwargs.get("expect"), runs=runs, max_concurrency=max_concurrency,
        cache=cache, show_progress=False,
    ))  # fmt: skip
    return batch.runs[0].eval_result if single else batch


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run the batch on a loop of its own in a worker thread, so it neither needs
    nor disturbs the test's loop (pytest-asyncio or none)."""
    with ThreadPoolExecutor(1, thread_name_prefix="helios-toolcalls") as pool:
        return pool.submit(asyncio.run, coro).result()


# -- the summary ----------------------------------------------------------------
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    entries = config.stash.get(ENTRIES, [])
    if not entries:
        return
    from helios.toolcalls.report import terminal_summary, write_report

    for line in terminal_summary(entries).splitlines():
        terminalreporter.write_line(line)
    report = config.getoption("toolcalls_report")
    if report:
        path = write_report(report, entries)
        terminalreporter.write_line(f"tool-call report written to {path}")
