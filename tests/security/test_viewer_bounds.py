"""What a served folder can make `helios view` do: a 500 MB trajectory (held in 3.9 GB
and 46 s before), 90,000 empty folders (walked on every /api/runs), and one slow
comparison (which held every other page)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helios.view import api
from helios.view.server import make_app

from ..view_helpers import add_gui_trial, record, view_cmd, write_run

#: helios.view.runs.MAX_FOLDERS, the bound checked here
MAX_FOLDERS = 10_000


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_500_mb_trajectory_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    root = tmp_path / "out"
    item = record(0)
    run = write_run(root / "batch_a", [item])
    agent = add_gui_trial(run, item)
    huge = agent / "trajectory.json"
    with huge.open("r+b") as handle:  # the real document, then 500 MB of padding (sparse)
        handle.seek(0, os.SEEK_END)
        handle.truncate(500 * 2**20)
    key = f"0/batch_a/{huge.relative_to(run).as_posix()}"
    proc = subprocess.Popen(view_cmd(str(root), "--port", "0"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), url
        base = url.split("?")[0].rstrip("/")
        started = time.monotonic()
        try:
            urllib.request.urlopen(f"{base}/api/steps?path={key}", timeout=60)
            raise AssertionError("a 500 MB trajectory was served")
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read())
        took = time.monotonic() - started
        assert "up to 64 MB" in body["error"], body
        assert took < 10, took  # generous: the refusal reads nothing (measured: ms)
        assert _peak_rss_mb(proc.pid) < 300
    finally:
        proc.terminate()
        proc.wait(10)


def _get(app_folders: list[Path], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def go() -> list[Any]:
        async with TestClient(TestServer(make_app(app_folders, token=""))) as client:
            answers = []
            for route, params in calls:
                response = await client.get(route, params=params)
                answers.append((response.status, await response.json()))
            return answers

    return asyncio.run(go())


def test_the_runs_list_walks_a_bounded_number_of_folders(tmp_path: Path) -> None:
    root = tmp_path / "out"
    write_run(root / "batch_a", [record(0)])
    empty = root / "empty"
    for number in range(MAX_FOLDERS + 500):
        (empty / f"{number // 100:03d}" / f"{number:05d}").mkdir(parents=True)
    (status, body), (again_status, again) = _get([root], [("/api/runs", {})] * 2)
    assert status == again_status == 200, body
    assert "more than 10,000 folders" in body["truncated"], body
    assert again == body


def test_a_slow_comparison_never_holds_the_other_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "out"
    write_run(root / "a", [record(0)])
    write_run(root / "b", [record(0)])
    release = threading.Event()
    comparing = threading.Event()
    real = api.compare_runs

    def slow(*args: Any, **kwargs: Any) -> Any:
        comparing.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "compare_runs", slow)

    async def go() -> tuple[int, float, int]:
        async with TestClient(TestServer(make_app([root], token=""))) as client:
            pair = [("run", "0/a"), ("run", "0/b")]
            compare = asyncio.ensure_future(client.get("/api/compare", params=pair))
            await asyncio.get_running_loop().run_in_executor(None, comparing.wait, 30)
            started = time.monotonic()
            try:
                runs = await asyncio.wait_for(client.get("/api/runs"), 20)
            finally:
                release.set()
            took = time.monotonic() - started
            return runs.status, took, (await compare).status

    runs_status, took, compare_status = asyncio.run(go())
    assert runs_status == 200 and compare_status == 200
    assert took < 20
