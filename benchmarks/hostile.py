"""What hostile inputs cost now that they are bounded.

Prints, each on its own line:
- pass@k's table (k = 1 … 10, 20, 50, … n) and its bootstrap intervals for one task of
  n attempts, and the former table (every k from 1 to n, binomials of n) where it ends
  in reasonable time;
- `helios compare -f json` of two runs of one task with 100,000 attempts (wall time);
- the viewer's /api/runs over many empty folders: the first call, and the next (the
  walk is reused for a few seconds);
- the viewer's answer to a 500 MB trajectory (refused by its size) and to a 60 MB one
  (parsed), and the viewer process's peak RSS;
- the streamed header check of a download (`HeaderScan`) in MB/s.

    .venv/bin/python benchmarks/hostile.py
    .venv/bin/python benchmarks/hostile.py --attempts 20000 --folders 20000
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from math import comb
from pathlib import Path

from helios.engine.metrics import pass_at_k_ci_table, pass_at_k_table
from helios.environments.shell.safe_copy import Bounds, HeaderScan

MiB = 1 << 20


def _old_table(n: int, c: int) -> dict[str, float]:
    """The table before: every k from 1 to n, each a ratio of two binomials of n."""
    return {f"pass@{k}": 1.0 if n - c < k else 1 - comb(n - c, k) / comb(n, k)
            for k in range(1, n + 1)}  # fmt: skip


def bench_pass_at_k(attempts: list[int]) -> None:
    for n in attempts:
        passes = {"only": [i % 97 == 0 for i in range(n)]}
        started = time.perf_counter()
        table = pass_at_k_table(passes)
        pass_at_k_ci_table(passes)
        took = time.perf_counter() - started
        line = f"pass@k  n={n:>7,}: table and intervals {took * 1000:8.1f} ms ({len(table)} k)"
        if n <= 3000:
            started = time.perf_counter()
            _old_table(n, sum(passes["only"]))
            line += f"; the former table {time.perf_counter() - started:8.2f} s ({n} k)"
        print(line, flush=True)


def _lean_run(folder: Path, n: int) -> None:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"kind": "batch", "model": "m"}))
    with (folder / "results.jsonl").open("w") as handle:
        for i in range(n):
            passed = i % 97 == 0
            handle.write(json.dumps({
                "trial_id": f"t{i}", "task_name": "only", "task_path": "only", "attempt": i + 1,
                "status": "passed" if passed else "failed", "reward": float(passed),
                "duration": 1.0,
            }) + "\n")  # fmt: skip


def bench_compare(root: Path, n: int) -> None:
    for name in ("a", "b"):
        _lean_run(root / name, n)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "helios", "compare", str(root / "a"),
                           str(root / "b"), "-f", "json"], capture_output=True,
                          timeout=600)  # fmt: skip
    took = time.perf_counter() - started
    print(f"compare n={n:,} attempts of one task: {took:6.2f} s (exit {done.returncode})",
          flush=True)  # fmt: skip


def bench_runs_list(root: Path, folders: int) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from helios.view.server import make_app

    for i in range(folders):
        (root / f"{i // 1000:03d}" / f"{i:06d}").mkdir(parents=True)

    async def go() -> list[float]:
        times = []
        async with TestClient(TestServer(make_app([root], token=""))) as client:
            for _ in range(2):
                started = time.perf_counter()
                response = await client.get("/api/runs")
                await response.read()
                times.append(time.perf_counter() - started)
        return times

    first, second = asyncio.run(go())
    print(f"/api/runs over {folders:,} empty folders: first {first * 1000:7.1f} ms, "
          f"next {second * 1000:6.1f} ms", flush=True)  # fmt: skip


def _trajectory(path: Path, megabytes: int) -> None:
    step = {"step_id": 0, "source": "agent", "message": "x" * 2000,
            "tool_calls": [{"tool_call_id": "c", "function_name": "bash",
                            "arguments": {"command": "ls " * 100}}]}  # fmt: skip
    one = len(json.dumps(step)) + 2
    steps = [dict(step, step_id=i) for i in range(megabytes * MiB // one)]
    document = {"schema_version": "ATIF-v1.6", "session_id": "s",
                "agent": {"name": "a", "version": "1"}, "steps": steps}  # fmt: skip
    path.write_text(json.dumps(document))


def _peak_rss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_trajectories(root: Path) -> None:
    run = root / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"kind": "batch"}))
    (run / "results.jsonl").write_text("")
    _trajectory(run / "big.json", 60)
    huge = run / "huge.json"
    huge.write_text('{"schema_version": "ATIF-v1.6", "steps": []}')
    os.truncate(huge, 500 * MiB)
    command = [sys.executable, "-m", "helios", "view", str(root), "--port", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().strip().split("?")[0].rstrip("/")
        for name in ("huge.json", "big.json", "big.json"):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(f"{base}/api/steps?path=0/run/{name}&limit=50",
                                            timeout=300) as answer:  # fmt: skip
                    status = answer.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            took = time.perf_counter() - started
            size = (run / name).stat().st_size / MiB
            print(f"trajectory of {size:5.0f} MB: a page in {took * 1000:8.1f} ms "
                  f"(HTTP {status})", flush=True)  # fmt: skip
        print(f"viewer peak RSS: {_peak_rss(proc.pid):.0f} MB", flush=True)
    finally:
        proc.terminate()
        proc.wait(10)


def bench_header_scan(megabytes: int) -> None:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for i in range(megabytes):
            info = tarfile.TarInfo(f"logs/file-{i:05d}")
            info.size = MiB - 600
            tar.addfile(info, io.BytesIO(bytes(info.size)))
    data = archive.getvalue()
    scan = HeaderScan(Bounds(), "bench")
    started = time.perf_counter()
    for start in range(0, len(data), 64 * 1024):
        scan.feed(data[start : start + 64 * 1024])
    took = time.perf_counter() - started
    print(f"streamed header check: {len(data) / MiB / took:8.0f} MB/s over {megabytes} MB "
          f"in 64 KiB chunks ({scan.entries} members)", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--folders", type=int, default=90_000)
    args = parser.parse_args()
    bench_pass_at_k(sorted({1000, 3000, 10_000, args.attempts}))
    with tempfile.TemporaryDirectory() as tmp:
        bench_compare(Path(tmp) / "compare", args.attempts)
    with tempfile.TemporaryDirectory() as tmp:
        bench_runs_list(Path(tmp), args.folders)
    with tempfile.TemporaryDirectory() as tmp:
        bench_trajectories(Path(tmp))
    bench_header_scan(256)


if __name__ == "__main__":
    main()
