"""Reports of tool-call tests: the terminal summary, JSON and HTML files.

Shared by the pytest plugin and `helios toolcalls`. HTML is escaped (prompts
and tool arguments are untrusted text).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from helios.engine import write_json_atomic
from helios.secrets import redact_value
from helios.text import visible
from helios.toolcalls.types import BatchResult, EvalResult, SingleRunResult, call_document

Result = EvalResult | BatchResult
Entry = tuple[str, Result]


def as_batch(result: Result, prompt: str = "") -> BatchResult:
    if isinstance(result, BatchResult):
        return result
    return BatchResult(runs=[SingleRunResult(prompt=prompt, run_index=0, eval_result=result)])


def counts(result: Result) -> tuple[int, int]:
    """(runs passed, runs)."""
    batch = as_batch(result)
    return batch.passed_count, batch.total


def _run_document(run: SingleRunResult) -> dict[str, Any]:
    evaluation = run.eval_result
    return {
        "prompt": run.prompt,
        "run_index": run.run_index,
        "passed": evaluation.passed,
        "match_rate": evaluation.match_rate,
        "duration": round(run.duration, 4),
        "retries": run.retries,
        "expected": [to_jsonable_python(call_document(c)) for c in evaluation.expected],
        "actual": [to_jsonable_python(call_document(c)) for c in evaluation.actual],
        "matches": [m.model_dump(mode="json") for m in evaluation.matches],
        "error": evaluation.error.model_dump(mode="json") if evaluation.error else None,
    }


def batch_document(batch: BatchResult, duration: float | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "passed": batch.passed,
        "total": batch.total,
        "passed_count": batch.passed_count,
        "failed_count": batch.failed_count,
        "error_count": batch.error_count,
        "pass_rate": batch.pass_rate,
        "match_rate": batch.match_rate,
        "runs": [_run_document(run) for run in batch.runs],
    }
    usage = batch.usage
    if usage is not None:  # the model's tokens and cost (null when unknown, with why)
        document["usage"] = usage.model_dump() | {"total_tokens": usage.total_tokens}
    if duration is not None:
        document["duration_seconds"] = round(duration, 3)
    if batch.budget is not None:  # the budgets, which one stopped the run, the spend
        document["budget"] = batch.budget
    return redact_value(document)  # type: ignore[no-any-return]


def report_document(entries: Sequence[Entry]) -> dict[str, Any]:
    tests = []
    for name, result in entries:
        document = batch_document(as_batch(result))
        tests.append({"id": name, "status": "PASS" if result.passed else "FAIL",
                      "passed_runs": document["passed_count"], **document})  # fmt: skip
    n_passed = sum(1 for _, result in entries if result.passed)
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "total": len(entries),
        "passed": n_passed,
        "failed": len(entries) - n_passed,
        "tests": tests,
    }


def terminal_summary(
    entries: Sequence[Entry], title: str = "tool-call tests", *, failures: bool = True
) -> str:
    """One line per test (PASS/FAIL, match rate, k/n runs), then the failures' details
    (not with `failures=False`: the caller has shown them). For a terminal: test ids,
    prompts and calls have their control characters shown."""
    entries = [(visible(name, one_line=True), result) for name, result in entries]
    width = max(len(name) for name, _ in entries)
    lines = ["", "=" * 60, title.upper(), "=" * 60]
    for name, result in entries:
        passed, total = counts(result)
        status = "PASS" if result.passed else "FAIL"
        lines.append(f"  {status}  {name:<{width}}  ({result.match_rate:.0%} match)  "
                     f"[{passed}/{total} runs]")  # fmt: skip
    n_passed = sum(1 for _, result in entries if result.passed)
    lines += ["-" * 60,
              f"  Total: {len(entries)}  Passed: {n_passed}  Failed: {len(entries) - n_passed}",
              "=" * 60]  # fmt: skip
    failed = [(name, result) for name, result in entries if not result.passed]
    if failed and failures:
        lines += ["", "FAILURES:"]
        for name, result in failed:
            lines += ["", f"  {name}:"]
            lines += [f"  {line}" for line in result.summary().splitlines()]
    return visible("\n".join(lines))


def write_report(path: str | Path, entries: Sequence[Entry]) -> Path:
    """Write `.json` or `.html` (by the suffix); anything else is a ValueError."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".json":
        write_json_atomic(target, report_document(entries))
    elif suffix in (".html", ".htm"):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_html(entries), encoding="utf-8")
    else:
        raise ValueError(f"{target}: a report must end in .json or .html")
    return target


def check_report_path(path: str | Path) -> None:
    if Path(path).suffix.lower() not in (".json", ".html", ".htm"):
        raise ValueError(f"{path}: a report must end in .json or .html")


_STYLE = """body{font-family:system-ui,sans-serif;margin:2rem}table{border-collapse:collapse;
width:100%}th,td{border:1px solid #ddd;padding:6px;text-align:left;vertical-align:top}
th{background:#f5f5f5}.pass{background:#e9fbe9}.fail{background:#fdeaea}
pre{margin:0;white-space:pre-wrap;font-size:.85em}"""


def render_html(entries: Sequence[Entry]) -> str:
    document = report_document(entries)
    rows = []
    for (name, result), test in zip(entries, document["tests"], strict=True):
        status = test["status"]
        rows.append(
            f'<tr class="{status.lower()}"><td>{html.escape(name)}</td><td>{status}</td>'
            f"<td>{result.match_rate:.0%}</td><td>{test['passed_runs']}/{test['total']}</td>"
            f"<td><pre>{html.escape(str(redact_value(result.summary())))}</pre></td></tr>"
        )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Tool-call tests</title>'
        f"<style>{_STYLE}</style></head><body><h1>Tool-call tests</h1>"
        f"<p>Total: {document['total']} | Passed: {document['passed']} | "
        f"Failed: {document['failed']}</p><table><thead><tr><th>Test</th><th>Status</th>"
        "<th>Match rate</th><th>Runs (pass/total)</th><th>Details</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></body></html>\n"
    )
