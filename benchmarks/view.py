"""`helios view` on a big run: a synthetic batch of 100,000 trials and a trajectory of
2,000 steps, served by the real `helios view` process.

Prints the time to the first table page on a cold server (the byte-offset index
built from results.jsonl, then one page of 50), a sorted and a filtered page, the
runs list, the first and the last page of the trajectory's steps, a page of
records appended while the server runs, and the server's peak RSS (VmHWM).

    .venv/bin/python benchmarks/view.py                  # 100,000 trials, 2,000 steps
    .venv/bin/python benchmarks/view.py --trials 20000 --steps 500
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

STATUSES = ("passed", "failed", "error")


def write_run(folder: Path, trials: int, steps: int) -> None:
    folder.mkdir(parents=True)
    meta = {"run_id": "bench", "created_at": "2026-11-26T04:00:00+00:00", "kind": "batch",
            "agent": "tool", "model": "mock/m-1", "provider": "openai",
            "n_attempts": 1}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(meta))
    rng = random.Random(7)
    with (folder / "results.jsonl").open("w") as handle:
        for index in range(trials):
            status = STATUSES[rng.randrange(3)]
            record = {
                "trial_id": f"{index:016x}", "task_name": f"task-{index % 5000:05d}",
                "task_path": f"/tasks/task-{index % 5000:05d}", "attempt": 1 + index // 5000,
                "agent": "tool", "model": "mock/m-1", "provider": "openai", "status": status,
                "reward": 1.0 if status == "passed" else 0.0, "rewards": {"reward": 1.0},
                "error": "TimeoutError: agent timed out" if status == "error" else None,
                "agent_error": None, "teardown_error": None, "turns": rng.randrange(1, 30),
                "duration": rng.uniform(1, 300),
                "timings": {"environment": 0.5, "agent": 10.0, "verifier": 1.0, "teardown": 0.1},
                "usage": {"input_tokens": rng.randrange(10**5),
                          "output_tokens": rng.randrange(10**4),
                          "cost_usd": rng.uniform(0, 0.2), "calls": 5},
                "started_at": "2026-11-26T04:00:00+00:00",
                "finished_at": "2026-11-26T04:01:00+00:00",
                "folder": f"{index + 1:06d}_task/attempt_001", "verifier_note": "1 passed",
            }  # fmt: skip
            handle.write(json.dumps(record) + "\n")
    # a finished batch's summary holds a row per trial: parsed once, not per request
    summary = {"total_tasks": trials, "interrupted": False, "pass_at_k": {"pass@1": 0.33},
               "tasks": [{"name": f"task-{i % 5000:05d}", "status": "passed", "reward": 1.0,
                          "duration": 1.0, "error": None, "attempt": 1,
                          "trial_id": f"{i:016x}", "folder": f"{i + 1:06d}_task/attempt_001"}
                         for i in range(trials)]}  # fmt: skip
    (folder / "batch_summary.json").write_text(json.dumps(summary))
    trial = folder / "000001_task" / "attempt_001" / "agent"
    trial.mkdir(parents=True)
    trajectory = {"schema_version": "ATIF-v1.6", "session_id": "s",
                  "agent": {"name": "helios-tool", "version": "1", "model_name": "mock/m-1"},
                  "steps": [{"step_id": n + 1, "source": "agent", "message": "x" * 2000,
                             "reasoning_content": "thinking " * 100,
                             "tool_calls": [{"tool_call_id": f"c{n}", "function_name": "bash",
                                             "arguments": {"command": "ls -la " * 20}}],
                             "observation": {"results": [{"source_call_id": f"c{n}",
                                                          "content": "file\n" * 2000}]},
                             "metrics": {"prompt_tokens": 1000, "completion_tokens": 50}}
                            for n in range(steps)]}  # fmt: skip
    (trial / "trajectory.json").write_text(json.dumps(trajectory))


def timed(url: str) -> tuple[float, Any]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = json.load(response)
    return time.perf_counter() - start, body


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helios-view-bench-") as tmp:
        root = Path(tmp) / "output"
        started = time.perf_counter()
        write_run(root / "batch_big", args.trials, args.steps)
        size = (root / "batch_big" / "results.jsonl").stat().st_size
        trajectory = root / "batch_big" / "000001_task" / "attempt_001" / "agent"
        print(f"wrote {args.trials:,} records ({size / 1e6:.0f} MB) and a {args.steps:,}-step "
              f"trajectory ({(trajectory / 'trajectory.json').stat().st_size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - started:.1f}s")  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "helios", "view", str(root)],
                                stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
        try:
            assert proc.stdout is not None
            first: list[str] = []
            reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()))  # type: ignore[union-attr]
            reader.start()
            reader.join(60)
            url = first[0].strip()
            base = f"{url}api/trials?run=0/batch_big&limit=50"
            rows = [
                ("first table page (cold: index built)", base),
                ("the same page again", base),
                ("sorted by cost, descending", base + "&sort=cost&desc=1"),
                ("filtered: failed, task contains 12", base + "&status=failed&task=12"),
                ("last page", base + f"&offset={args.trials - 50}"),
                ("runs list", f"{url}api/runs"),
                ("steps 1-50", f"{url}api/steps?path=0/batch_big/000001_task/attempt_001/agent/"
                               "trajectory.json&limit=50"),
                ("steps, last 50 (parsed once, cached)",
                 f"{url}api/steps?path=0/batch_big/000001_task/attempt_001/agent/"
                 f"trajectory.json&limit=50&offset={max(0, args.steps - 50)}"),
            ]  # fmt: skip
            for name, target in rows:
                seconds, body = timed(target)
                extra = f" ({body['matched']:,} match)" if "matched" in body else ""
                print(f"{name:45s} {seconds * 1000:8.0f} ms{extra}")
            with (root / "batch_big" / "results.jsonl").open("a") as handle:
                for index in range(1000):
                    record = {"trial_id": f"new{index}", "task_name": "new",
                              "status": "passed", "reward": 1.0}  # fmt: skip
                    handle.write(json.dumps(record) + "\n")
            seconds, body = timed(base)
            print(f"{'after 1,000 appended records':45s} {seconds * 1000:8.0f} ms "
                  f"({body['total']:,} trials)")  # fmt: skip
            print(f"server peak RSS (VmHWM): {peak_rss_mb(proc.pid):.0f} MB; "
                  f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
