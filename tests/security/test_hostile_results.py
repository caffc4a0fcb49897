"""Round 4's hostile results: run folders written to break `helios compare` and the
viewer (a formula in a task name, 100,000 attempts of one task, rewards of ±1e308, a
results.jsonl line nested deeper than any decoder goes)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from helios.view.server import make_app

from ..conftest import helios_cmd
from ..view_helpers import record, write_run


def _compare(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(helios_cmd("compare", *args), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _lean_run(folder: Path, rows: list[tuple[str, bool, float]]) -> Path:
    """A batch run folder with one short line per (task, passed, reward)."""
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"kind": "batch", "model": "mock/m"}))
    attempts: dict[str, int] = {}
    with (folder / "results.jsonl").open("w") as handle:
        for number, (task, passed, reward) in enumerate(rows):
            attempts[task] = attempts.get(task, 0) + 1
            handle.write(json.dumps({
                "trial_id": f"t{number}", "task_name": task, "task_path": task,
                "attempt": attempts[task], "status": "passed" if passed else "failed",
                "reward": reward, "duration": 1.0,
            }) + "\n")  # fmt: skip
    return folder


def test_compare_csv_never_writes_a_formula(tmp_path: Path) -> None:
    """Task names are the task author's text; a spreadsheet runs `=HYPERLINK(...)`."""
    names = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "plain"]
    rows = [(name, True, 1.0) for name in names]
    a = _lean_run(tmp_path / "a", rows)
    b = _lean_run(tmp_path / "b", rows)
    result = _compare(str(a), str(b), "-f", "csv")
    assert result.returncode == 0, result.stderr
    cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "@", "\t", "\r")]
    assert not [cell for cell in cells if cell.startswith("-") and not _is_number(cell)]
    assert '\'=HYPERLINK("http://x")' in cells and "plain" in cells


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_pass_at_k_of_100000_attempts_is_linear(tmp_path: Path) -> None:
    """One task with 100,000 attempts: pass@k was quadratic (and worse) in the attempts,
    and `helios compare` was still running at 60 s. The bound here is generous (the
    figure is in benchmarks/hostile_results.py); the old code takes minutes."""
    rows = [("only", number % 97 == 0, 1.0 if number % 97 == 0 else 0.0)
            for number in range(100_000)]  # fmt: skip
    a = _lean_run(tmp_path / "a", rows)
    b = _lean_run(tmp_path / "b", rows)
    result = _compare(str(a), str(b), "-f", "json", timeout=45)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    table = report["runs"][0]["pass_at_k"]
    assert table["pass@1"] == 1031 / 100_000
    assert "pass@100000" in table and table["pass@100000"] == 1.0
    assert len(table) < 40  # 1 … 10, 20, 50, 100, … : log n values, not n


def test_rewards_of_1e308_stay_finite_in_every_format(tmp_path: Path) -> None:
    a = _lean_run(tmp_path / "a", [("x", True, 1e308), ("y", True, 1e308)])
    b = _lean_run(tmp_path / "b", [("x", False, -1e308), ("y", False, -1e308)])
    outputs = {fmt: _compare(str(a), str(b), "-f", fmt) for fmt in ("json", "csv", "text")}
    for fmt, result in outputs.items():
        assert result.returncode == 0, (fmt, result.stderr)
        assert "inf" not in result.stdout.lower().replace("info", ""), fmt
    report = json.loads(outputs["json"].stdout)
    pair = report["comparisons"][0]
    assert pair["reward_delta"] == -sys.float_info.max
    assert all(row["reward_delta"] == -sys.float_info.max for row in pair["tasks"])
    for row in csv.DictReader(io.StringIO(outputs["csv"].stdout)):
        assert math.isfinite(float(row["reward_delta"])) and float(row["reward_delta"]) < -1e307


def _get(folders: list[Path], route: str, **params: str) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        async with TestClient(TestServer(make_app(folders, token=""))) as client:
            response = await client.get(route, params=params)
            return response.status, await response.json()

    return asyncio.run(go())


def test_a_deeply_nested_line_is_one_damaged_row(tmp_path: Path) -> None:
    """One line nested 200,000 deep made /api/runs a 500 RecursionError for every run."""
    root = tmp_path / "out"
    write_run(root / "healthy", [record(0), record(1)])
    hostile = write_run(root / "hostile", [record(0)])
    depth = 200_000
    deep = '{"task_name": "deep", "error": ' + "[" * depth + "]" * depth + "}\n"
    with (hostile / "results.jsonl").open("a") as handle:
        handle.write(deep)
        handle.write(json.dumps(record(2)) + "\n")
    status, body = _get([root], "/api/runs")
    assert status == 200, body
    by_name = {run["name"]: run for run in body["runs"]}
    assert set(by_name) == {"healthy", "hostile"}
    key = by_name["hostile"]["key"]
    status, page = _get([root], "/api/trials", run=key)
    assert status == 200, page
    statuses = [row["status"] for row in page["rows"]]
    assert statuses.count("damaged") == 1 and len(statuses) == 3
    status, damaged = _get([root], "/api/record", run=key, index="1")
    assert status == 200 and "damaged" in damaged["record"], damaged
