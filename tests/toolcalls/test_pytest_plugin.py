"""The pytest plugin, driven through pytester: marker, options, fixtures, summary, reports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

CONFTEST = """
import pytest
from helios import toolcalls as russo

SPOKEN = []

class FakeSynthesizer:
    async def synthesize(self, text):
        SPOKEN.append(text)
        return russo.Audio(data=b"\\x00" * 4800, format="pcm", transcript=text)

@russo.agent
async def fake_agent(audio):
    if "cancel" in (audio.transcript or ""):
        return russo.AgentResponse(tool_calls=[russo.tool_call("cancel_flight")])
    return russo.AgentResponse(
        tool_calls=[russo.tool_call("book_flight", from_city="NYC", to_city="LA")])

@pytest.fixture
def {prefix}_synthesizer():
    return FakeSynthesizer()

@pytest.fixture
def {prefix}_agent():
    return fake_agent
"""

TESTS = """
import pytest
from helios import toolcalls as russo

BOOK = russo.tool_call("book_flight", from_city="NYC", to_city="LA")

@pytest.mark.toolcalls(prompt="Book a flight from NYC to LA", expect=[BOOK])
def test_single(toolcalls_result):
    assert isinstance(toolcalls_result, russo.EvalResult)
    assert toolcalls_result.passed

@pytest.mark.toolcalls(prompts=["Book NYC to LA", "Fly NYC to LA"], expect=[BOOK], runs=2)
def test_matrix(toolcalls_result):
    assert isinstance(toolcalls_result, russo.BatchResult)
    assert toolcalls_result.total == 4

@pytest.mark.toolcalls(prompt="please cancel my flight", expect=[{"name": "book_flight"}])
def test_wrong_call(toolcalls_result):
    assert not toolcalls_result.passed

@pytest.mark.toolcalls(prompt="Book it", expect=[BOOK])
def test_cli_runs(toolcalls_result):
    assert toolcalls_result.passed

def test_unmarked(toolcalls_result):
    assert toolcalls_result is None
"""


def _write(pytester: pytest.Pytester, prefix: str = "toolcalls", tests: str = TESTS,
           auto: bool = False) -> None:  # fmt: skip
    pytester.makeconftest(CONFTEST.replace("{prefix}", prefix))
    pytester.makepyfile(test_tc=tests)
    _ini(pytester, auto)


def _ini(pytester: pytest.Pytester, auto: bool = False) -> None:
    mode = "asyncio_mode = auto\n" if auto else ""
    pytester.makeini(f"[pytest]\n{mode}asyncio_default_fixture_loop_scope = function\n")


def _has_lines(output: str, *lines: str) -> None:
    """Each line occurs in the output, in this order (literal text, no patterns)."""
    rest = output.splitlines()
    for line in lines:
        found = [i for i, seen in enumerate(rest) if line in seen]
        assert found, f"{line!r} not in the output after the previous lines:\n{output}"
        rest = rest[found[0] + 1 :]


def test_marker_fixtures_summary_and_json_report(pytester: pytest.Pytester) -> None:
    _write(pytester)
    report = pytester.path / "out" / "report.json"
    result = pytester.runpytest("--toolcalls-report", str(report))
    result.assert_outcomes(passed=5)
    _has_lines(result.stdout.str(), *[
        "TOOL-CALL TESTS",
        "  PASS  test_tc.py::test_single      (100% match)  [1/1 runs]",
        "  PASS  test_tc.py::test_matrix      (100% match)  [4/4 runs]",
        "  FAIL  test_tc.py::test_wrong_call  (0% match)  [0/1 runs]",
        "  PASS  test_tc.py::test_cli_runs    (100% match)  [1/1 runs]",
        "  Total: 4  Passed: 3  Failed: 1",
        "FAILURES:",
        "  test_tc.py::test_wrong_call:",
        "  FAILED (0% match rate)",
        "    [-] book_flight() -> cancel_flight()",
        "        name: expected 'book_flight', got 'cancel_flight'",
        f"tool-call report written to {report}",
    ])  # fmt: skip
    document = json.loads(report.read_text())
    assert (document["total"], document["passed"], document["failed"]) == (4, 3, 1)
    matrix = next(t for t in document["tests"] if t["id"].endswith("test_matrix"))
    assert (matrix["status"], matrix["passed_runs"], matrix["total"]) == ("PASS", 4, 4)
    assert [r["prompt"] for r in matrix["runs"]] == ["Book NYC to LA"] * 2 + ["Fly NYC to LA"] * 2
    wrong = next(t for t in document["tests"] if t["id"].endswith("test_wrong_call"))
    assert wrong["runs"][0]["actual"] == [{"name": "cancel_flight", "arguments": {}}]


def test_runs_precedence_marker_then_cli_then_one(pytester: pytest.Pytester) -> None:
    tests = (
        TESTS
        + """
@pytest.mark.toolcalls(prompt="Book", expect=[BOOK], runs=2)
def test_marker_wins(toolcalls_result):
    assert toolcalls_result.total == 2
"""
    )
    _write(pytester, tests=tests.replace("runs=2)\ndef test_matrix", "runs=2)\ndef test_matrix"))
    result = pytester.runpytest("--toolcalls-runs", "3", "--toolcalls-max-concurrency", "2")
    # test_single becomes a batch of 3 with the CLI's runs: its isinstance check fails.
    result.assert_outcomes(passed=5, failed=1)
    out = result.stdout.str()
    assert re.search(r"PASS  test_tc.py::test_cli_runs +\(100% match\)  \[3/3 runs\]", out)
    assert re.search(r"PASS  test_tc.py::test_marker_wins +\(100% match\)  \[2/2 runs\]", out)


def test_russo_spellings_run_the_docs_examples(pytester: pytest.Pytester) -> None:
    docs = """
import pytest
from helios import toolcalls as russo

@pytest.mark.russo(
    prompt="Book a flight from NYC to LA",
    expect=[russo.tool_call("book_flight", from_city="NYC", to_city="LA")],
    runs=3,
)
async def test_reliability(russo_result):
    assert isinstance(russo_result, russo.BatchResult)
    assert russo_result.pass_rate >= 0.8

@pytest.mark.russo(
    prompts=[
        "Book a flight from NYC to LA",
        "I need to fly from NYC to LA",
    ],
    expect=[russo.tool_call("book_flight", from_city="NYC", to_city="LA")],
)
async def test_prompt_variants(russo_result):
    assert russo_result.total == 2
    assert russo_result.passed

@pytest.mark.russo(
    prompts=["Book from NYC to LA", "Fly NYC to LA"],
    expect=[russo.tool_call("book_flight", from_city="NYC", to_city="LA")],
    runs=3,
    max_concurrency=4,
)
async def test_full_matrix(russo_result):
    assert russo_result.total == 6  # 2 prompts × 3 runs

@pytest.mark.russo(prompt="Book", expect=[russo.tool_call("book_flight")])
async def test_cli_default(russo_result):
    assert russo_result.total == 5
"""
    _write(pytester, prefix="russo", tests=docs, auto=True)
    result = pytester.runpytest("-k", "not cli_default")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "PASS  test_tc.py::test_reliability      (100% match)  [3/3 runs]" in out
    assert "PASS  test_tc.py::test_prompt_variants  (100% match)  [2/2 runs]" in out
    assert "PASS  test_tc.py::test_full_matrix      (100% match)  [6/6 runs]" in out
    # russo's CLI options; the exact evaluator fails the bare expectation on every run
    result = pytester.runpytest("-k", "cli_default", "--russo-runs", "5",
                                "--russo-max-concurrency", "3")  # fmt: skip
    result.assert_outcomes(passed=1)
    assert "FAIL  test_tc.py::test_cli_default  (0% match)  [0/5 runs]" in result.stdout.str()


def test_html_report_is_escaped(pytester: pytest.Pytester) -> None:
    tests = """
import pytest
from helios import toolcalls as russo

@pytest.mark.toolcalls(prompts=["<script>alert(1)</script>"], expect=[{"name": "x<b>"}])
def test_hostile(toolcalls_result):
    pass
"""
    _write(pytester, tests=tests)
    report = pytester.path / "r.html"
    pytester.runpytest("--toolcalls-report", str(report)).assert_outcomes(passed=1)
    html = report.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)" in html
    assert "x<b>" not in html and "x&lt;b&gt;" in html
    assert '<tr class="fail">' in html


def test_bad_report_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _write(pytester)
    result = pytester.runpytest("--toolcalls-report", "out.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--toolcalls-report*must end in .json or .html*"])


def test_missing_agent_and_bad_marker_are_clear(pytester: pytest.Pytester) -> None:
    _ini(pytester)
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.toolcalls(prompt="Book", expect=[])
def test_no_agent(toolcalls_result):
    pass

@pytest.mark.toolcalls(prompt="Book", expected=[])
def test_typo(toolcalls_result):
    pass

@pytest.mark.toolcalls(expect=[])
def test_no_prompt(toolcalls_result):
    pass
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=3)
    _has_lines(result.stdout.str(),
               "a tool-call test needs an agent: define a `toolcalls_agent` fixture",
               "@pytest.mark.toolcalls: unknown argument(s) ['expected']",
               "@pytest.mark.toolcalls needs prompt=, prompts= or cases=")  # fmt: skip


def test_cache_options(pytester: pytest.Pytester) -> None:
    conftest = (
        CONFTEST.replace("{prefix}", "toolcalls")
        + """
import pathlib

def pytest_sessionfinish(session):
    pathlib.Path("spoken.txt").write_text(str(len(SPOKEN)))
"""
    )
    pytester.makeconftest(conftest)
    _ini(pytester)
    pytester.makepyfile(
        test_tc="""
import pytest
from helios import toolcalls as russo

@pytest.mark.toolcalls(prompt="Book a flight", expect=[{"name": "book_flight"}], runs=2)
def test_a(toolcalls_result):
    pass
"""
    )
    cache = pytester.path / "audio-cache"
    spoken = pytester.path / "spoken.txt"
    pytester.runpytest("--toolcalls-cache-dir", str(cache)).assert_outcomes(passed=1)
    assert spoken.read_text() == "1"  # once per prompt
    pytester.runpytest("--toolcalls-cache-dir", str(cache)).assert_outcomes(passed=1)
    assert spoken.read_text() == "0"  # from the cache
    pytester.runpytest("--toolcalls-cache-dir", str(cache), "--toolcalls-no-cache")
    assert spoken.read_text() == "1"
    result = pytester.runpytest("--toolcalls-cache-dir", str(cache),
                                           "--toolcalls-clear-cache")  # fmt: skip
    result.stdout.fnmatch_lines(["toolcalls: cleared 1 cached audio entries from *"])
    assert spoken.read_text() == "1"
    assert Path(cache).is_dir()
