"""Helios's performance targets, measured row by row: `run.py --targets`.

Each row runs its workloads in fresh processes (see run.py) and prints the
figure, the target and whether it is met, with the machine's load when it ran.
`--quick` shrinks the long rows (RSS at N=100,000; resume of 1,000,000 records)
for a smoke run; the README's figures come from the full table.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Runner = Callable[[str, argparse.Namespace, Path], dict[str, Any]]


def _with(args: argparse.Namespace, **changes: Any) -> argparse.Namespace:
    new = copy.copy(args)
    for key, value in changes.items():
        setattr(new, key, value)
    return new


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _per_turn(row: dict[str, Any]) -> float:
    """The larger of getrusage's CPU and the machine's (minus the model server's) per
    turn: getrusage misses the shell servers that die with their bwrap unreaped."""
    cpu = max(float(row["cpu"]), float(row.get("cpu_machine", 0.0)))
    return cpu / max(int(row["model_turns"]), 1) * 1000


def _cpu_text(row: dict[str, Any]) -> str:
    turns = max(int(row["model_turns"]), 1)
    by_rusage = float(row["cpu"]) / turns * 1000
    return f"{_per_turn(row):.2f} ms ({by_rusage:.2f} ms by getrusage)"


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []

    def add(self, metric: str, target: str, measured: str, met: bool | None, load: str) -> None:
        verdict = "n/a" if met is None else ("MET" if met else "MISSED")
        self.rows.append((metric, target, measured, verdict, load))
        print(f"  {metric:<44} {measured:<52} {verdict:<7} (target {target}; load {load})",
              flush=True)  # fmt: skip

    def print(self) -> None:
        print("\n| metric | target | measured | | load |\n|---|---|---|---|---|")
        for row in self.rows:
            print("| " + " | ".join(row) + " |")


def _bash_row(args: argparse.Namespace, run: Runner, work: Path, table: Table) -> None:
    base = _with(args, episodes=500, concurrency=256, turns=5, latency_ms=100.0)
    load = _load()
    local = run("local", base, work)
    if "error" in local:
        table.add("bash in local sandbox", "≥ 60 ep/s, ≥ 20× Inspect", str(local["error"]),
                  False, load)  # fmt: skip
        return
    rate = local["done"] / local["wall"]
    try:
        inspect = run("inspect", base, work)
        inspect_rate = inspect["done"] / inspect["wall"]
        ratio = f"{rate / inspect_rate:.1f}× Inspect ({inspect_rate:.2f} ep/s)"
        met: bool | None = rate >= 60 and rate / inspect_rate >= 20
    except Exception as exc:  # Inspect not installed, or it failed: say why
        ratio, met = f"Inspect not run: {exc}", None
    met = met if met is not None else rate >= 60
    table.add("bash in local sandbox, N=500 C=256 T=5 100 ms", "≥ 60 ep/s, ≥ 20× Inspect",
              f"{rate:.1f} ep/s, {ratio}", met, load)  # fmt: skip
    table.add("  harness CPU per turn (sandbox execs included)", "≤ 3 ms",
              _cpu_text(local), _per_turn(local) <= 3.0, load)  # fmt: skip


def _trivial_rows(args: argparse.Namespace, run: Runner, work: Path, table: Table) -> None:
    load = _load()
    trivial = run("trivial", _with(args, episodes=500, concurrency=256, turns=5,
                                   latency_ms=100.0), work)  # fmt: skip
    table.add(
        "trivial tool, CPU per model turn",
        "≤ 1.5 ms",
        f"{_cpu_text(trivial)}, {trivial['done'] / trivial['wall']:.0f} ep/s",
        _per_turn(trivial) <= 1.5,
        load,
    )
    load = _load()
    slow = run("trivial", _with(args, episodes=2560, concurrency=256, turns=3,
                                latency_ms=1000.0), work)  # fmt: skip
    ideal = math.ceil(2560 / 256) * 3 * 1.0
    ratio = slow["wall"] / ideal
    table.add("not CPU-bound: N=2,560 C=256 T=3 1 s", "wall ≤ 1.05 × 30 s",
              f"{slow['wall']:.1f} s = {ratio:.3f} × ideal", ratio <= 1.05, load)  # fmt: skip


def _rss_row(args: argparse.Namespace, run: Runner, work: Path, table: Table) -> None:
    big_n = 10_000 if args.quick else 100_000
    turns = args.rss_turns
    load = _load()
    sizes = (big_n // 10, big_n)
    rows = [run("trivial", _with(args, episodes=n, concurrency=1000, turns=turns,
                                 latency_ms=500.0), work) for n in sizes]  # fmt: skip
    peaks = [max(r["rss_mb"], r["rss_children_mb"]) for r in rows]
    growth = peaks[1] / peaks[0] - 1
    met = peaks[1] <= 400 and growth <= 0.10
    table.add(f"peak RSS, C=1,000, T={turns}, 0.5 s: N={big_n // 10:,} → {big_n:,}",
              "≤ 400 MB, within 10%",
              f"{peaks[0]:.0f} → {peaks[1]:.0f} MB ({growth:+.1%}), largest process",
              met, load)  # fmt: skip


def _resume_row(args: argparse.Namespace, run: Runner, work: Path, table: Table) -> None:
    n = 100_000 if args.quick else 1_000_000
    load = _load()
    row = run("resume", _with(args, episodes=n, concurrency=1, turns=1, latency_ms=0.0), work)
    table.add(
        f"resume with {n:,} completed records ({row['file_mb']:.0f} MB)",
        "start ≤ 3 s",
        f"{row['start_seconds']:.2f} s to the plan",
        row["start_seconds"] <= 3.0,
        load,
    )


def _docker_row(args: argparse.Namespace, run: Runner, work: Path, table: Table) -> None:
    load = _load()
    row = run("dockerstart", _with(args, episodes=64, concurrency=64, turns=1,
                                   latency_ms=0.0), work)  # fmt: skip
    if "error" in row:
        table.add("docker trial vs bare docker run, 64 at once", "≤ 1.2×, 0 errors",
                  str(row["error"]), False, load)  # fmt: skip
        return
    ratio = row["trial_wall"] / row["bare_wall"]
    errors = row["failed"] + row["bare_errors"]
    table.add("docker trial (nop + verifier) vs bare `docker run --rm`, 64 at once",
              "≤ 1.2×, 0 errors",
              f"{row['trial_wall']:.1f} s vs {row['bare_wall']:.1f} s = {ratio:.2f}×, "
              f"{errors} errors", ratio <= 1.2 and errors == 0, load)  # fmt: skip


def _local_start_row(args: argparse.Namespace, run: Runner, work: Path, table: Table) -> None:
    load = _load()
    row = run("localstart", _with(args, episodes=50, concurrency=1, turns=1, latency_ms=0.0),
              work)  # fmt: skip
    table.add("local sandbox start + stop (median of 50)", "≤ 30 ms",
              f"{row['start_stop_ms']:.1f} ms; with a first command {row['start_exec_stop_ms']:.1f}"
              " ms", row["start_stop_ms"] <= 30, load)  # fmt: skip


ROWS = {"bash": _bash_row, "trivial": _trivial_rows, "rss": _rss_row, "resume": _resume_row,
        "docker": _docker_row, "localstart": _local_start_row}  # fmt: skip


def main(args: argparse.Namespace, run: Runner, work: Path) -> None:
    chosen = [n for n in args.rows.split(",") if n] or list(ROWS)
    print(f"targets on {os.cpu_count()} cores, workers {args.workers}, load {_load()}")
    table = Table()
    for name in chosen:
        try:
            ROWS[name](args, run, work, table)
        except Exception as exc:
            table.add(name, "", f"failed: {type(exc).__name__}: {exc}"[:200], False, _load())
    table.print()
