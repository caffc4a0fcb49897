"""Chaos for the task door: random SIGINT / SIGTERM / kill -9, each followed by
`--resume`, then a check that nothing was lost, nothing duplicated, the summary
agrees with the records and no process is left.

Used by a bounded test and by `benchmarks/chaos.py` (more than 50 signals).
Everything runs locally: the oracle agent in the bwrap sandbox.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
PASS_IF_OK = "if test -e /app/ok; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


@dataclass
class ChaosReport:
    signals: Counter[str] = field(default_factory=Counter)
    exit_codes: Counter[int] = field(default_factory=Counter)
    tasks: int = 0
    recorded: int = 0
    lost: int = 0
    duplicated: int = 0
    summary_consistent: bool = False
    processes_left: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.duplicated == 0
            and self.summary_consistent
            and not self.processes_left
            and set(self.exit_codes) <= {0, 130, -9}
        )


def make_tasks(root: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(n):
        task = root / f"t{i:03d}"
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "solution").mkdir()
        dockerfile = "FROM debian:bookworm-slim\nWORKDIR /app\n"
        (task / "environment" / "Dockerfile").write_text(dockerfile)
        (task / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = 60\n')
        (task / "instruction.md").write_text(f"Task {i}.\n")
        (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + PASS_IF_OK)
        pause = rng.uniform(0.05, 0.6)
        solve = f"#!/bin/sh\nsleep {pause:.2f}; touch /app/ok\n"
        (task / "solution" / "solve.sh").write_text(solve)


def _command(tasks: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "helios", "batch", str(tasks), "--provider", "local",
            "--agent", "oracle", "-n", "4", "-q", "-o", str(out), *extra]  # fmt: skip


def _helios_processes(marker: str) -> list[str]:
    """Helios processes of this run, and sandboxes orphaned to init (ppid 1)."""
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    left = [line for line in found.stdout.splitlines() if "pgrep" not in line]
    orphans = subprocess.run(["pgrep", "-P", "1", "-af", "helios-sandbox-"],
                             capture_output=True, text=True)  # fmt: skip
    return left + [line for line in orphans.stdout.splitlines() if "pgrep" not in line]


def _wait_for_the_signal_watch(proc: subprocess.Popen[bytes], within: float = 60.0) -> None:
    """Until the batch catches SIGTERM: Helios's signal watch is installed (its first
    act, `helios.cli.entry`). Before that the interpreter is still starting, and a
    signal is Python's to handle (a KeyboardInterrupt, exit -2), not Helios's; on a
    loaded machine that start can outlast the shortest random delay."""
    deadline = time.monotonic() + within
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return
        caught = next((line.split()[1] for line in status.splitlines()
                       if line.startswith("SigCgt:")), "0")  # fmt: skip
        if int(caught, 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.005)


def run_chaos(workdir: Path, *, tasks: int, signals: int, seed: int = 0) -> ChaosReport:
    """Interrupt a batch `signals` times at random instants, resuming after each."""
    rng = random.Random(seed)
    report = ChaosReport(tasks=tasks)
    task_root, out = workdir / "tasks", workdir / "out"
    make_tasks(task_root, tasks, seed)
    started = time.monotonic()
    run_dir: Path | None = None
    for _ in range(signals):
        extra = ("--resume", str(run_dir)) if run_dir is not None else ()
        proc = subprocess.Popen(_command(task_root, out, *extra), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        _wait_for_the_signal_watch(proc)
        time.sleep(rng.uniform(0.15, 2.0))
        chosen = rng.choice(SIGNALS)
        if proc.poll() is None:
            proc.send_signal(chosen)
            report.signals[chosen.name] += 1
        report.exit_codes[proc.wait(timeout=120)] += 1
        run_dir = run_dir or next(iter(out.glob("batch_*")), None)
    extra = ("--resume", str(run_dir)) if run_dir is not None else ()
    final = subprocess.run(_command(task_root, out, *extra), capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    report.exit_codes[final.returncode] += 1
    run_dir = run_dir or next(iter(out.glob("batch_*")))
    _check(run_dir, report)
    subprocess.run([sys.executable, "-m", "helios", "cleanup"], capture_output=True, timeout=120)
    report.processes_left = _helios_processes(str(task_root))
    report.seconds = time.monotonic() - started
    return report


def _check(run_dir: Path, report: ChaosReport) -> None:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    ids = Counter(json.loads(line)["task_name"] for line in lines)
    report.recorded = len(ids)
    report.lost = report.tasks - len(ids)
    report.duplicated = sum(n - 1 for n in ids.values())
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    report.summary_consistent = (
        summary["total_trials"] == len(lines)
        and summary["passed"] == sum(json.loads(x)["status"] == "passed" for x in lines)
        and summary["not_run"] == 0
        and not summary["interrupted"]
    )
