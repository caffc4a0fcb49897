"""Helios's benchmark runner: every workload against the same scripted model
server (its own process), one row per workload; `--targets` measures Helios's
performance targets row by row.

    .venv/bin/python benchmarks/run.py                       # one row per workload
    .venv/bin/python benchmarks/run.py --only local,inspect  # some workloads
    .venv/bin/python benchmarks/run.py --only trivial -N 2560 -C 256 -T 3 --latency-ms 1000
    .venv/bin/python benchmarks/run.py --only floor,local    # local as a share of the floor

Per workload: episodes/s; harness CPU per model turn (the workload's process and
its children, which are the sandboxes and the workers; the model server's CPU
is not counted); peak RSS (the largest process); efficiency against the ideal
wall time ceil(N/C)·T·latency. Each workload runs in a fresh process.

The `floor` row is the machine's process floor: N bare `bwrap --unshare-all`
sandboxes, 16 at a time, each running 9 `/bin/true`, with no harness and no model.
After the rows, each sandboxed workload's episodes/s is printed as a share of it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import mockserver
import targets

WORKLOAD_TOOLS = {
    "trivial": ("noop", {}, "submit"),
    "local": ("bash", {"command": "echo hello"}, "submit"),
    "docker": ("bash", {"command": "echo hello"}, "submit"),
    "inspect": ("bash", {"cmd": "echo hello"}, "submit"),
    "datagen": ("terminal", {"command": "echo ok"}, "text"),
}


def child(name: str, raw: str) -> None:
    """Run one workload in this process and print what it measured as JSON."""
    if os.environ.get("HELIOS_BENCH_SRC"):
        # measure another checkout's Helios (e.g. the commit before a change)
        sys.path.insert(0, os.environ["HELIOS_BENCH_SRC"])
    import workloads

    params = workloads.Params(**json.loads(raw))
    out = workloads.scratch()
    try:
        cpu0, kids0 = time.process_time(), _children_cpu()
        wall0 = time.monotonic()
        profile_to = os.environ.get("HELIOS_BENCH_PROFILE")
        if profile_to:  # where the workload's own process spends its CPU (cProfile)
            import cProfile

            with cProfile.Profile() as profiler:
                done = workloads.WORKLOADS[name](params, out)
            profiler.dump_stats(profile_to)
        else:
            done = workloads.WORKLOADS[name](params, out)
        wall = time.monotonic() - wall0
        cpu, kids = time.process_time() - cpu0, _children_cpu() - kids0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps({
        **done, "wall": wall, "cpu": cpu + kids, "cpu_self": cpu, "cpu_children": kids,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }))  # fmt: skip


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_workload(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    if name == "floor":
        return run_floor(args)
    tool, arguments, end = WORKLOAD_TOOLS.get(name, ("book_flight", {"to_city": "LA"}, "text"))
    turns = 1 if name in ("toolcalls", "resume", "localstart", "dockerstart") else args.turns
    # Inspect's react agent ends on submit(answer=...); Helios's submit takes a summary.
    submit = {"answer": "hello"} if name == "inspect" else {}
    # A tool-call test is one model call that must hold the expected call: the
    # script's first turn is that call (its text-mode agent does not loop).
    script_turns = 2 if name == "toolcalls" else turns
    script = mockserver.tool_script(script_turns, tool, arguments, end=end, submit=submit)
    server = mockserver.start(workdir / name, script, args.latency_ms, args.jitter_ms)
    try:
        params = {"episodes": args.episodes, "concurrency": args.concurrency, "turns": turns,
                  "latency_ms": args.latency_ms, "url": server.base_url,
                  "workers": args.workers, "api": args.api}  # fmt: skip
        before = server.served()
        machine_before, server_before = machine_cpu_seconds(), server.cpu_seconds()
        if name == "inspect":
            import inspect_bench

            if inspect_bench.inspect_binary() is None:  # a row that says so; the rest go on
                return {"name": name, "error": ["inspect-ai is not installed: pip install "
                                                "-e '.[bench]'"]}  # fmt: skip
            measured = inspect_bench.run(params, workdir / "inspect")
        else:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", name, json.dumps(params)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                return {"name": name, "error": proc.stderr.strip().splitlines()[-3:]}
            measured = json.loads(proc.stdout.strip().splitlines()[-1])
        model_turns = server.served() - before
        # Everything the machine ran but the model server: getrusage misses the
        # processes a sandbox's init outlives (killed shells' servers), the kernel's
        # workers do namespace teardown; on a quiet machine this is the whole cost.
        measured["cpu_machine"] = (machine_cpu_seconds() - machine_before) - (
            server.cpu_seconds() - server_before
        )
    finally:
        server.stop()
    ideal = math.ceil(args.episodes / args.concurrency) * turns * args.latency_ms / 1000
    if name == "toolcalls":
        ideal = math.ceil(measured["done"] / args.concurrency) * args.latency_ms / 1000
    return {"name": name, "model_turns": model_turns, "ideal": ideal, "turns_per": turns,
            **params, **measured}  # fmt: skip


def run_floor(args: argparse.Namespace) -> dict[str, Any]:
    """The process floor's row: bare sandboxes, no model server, no harness."""
    from workloads import FLOOR_AT_ONCE

    params = {"episodes": args.episodes, "concurrency": FLOOR_AT_ONCE, "turns": 0,
              "latency_ms": 0, "url": "", "workers": 1, "api": args.api}  # fmt: skip
    machine_before = machine_cpu_seconds()
    proc = subprocess.run([sys.executable, __file__, "--child", "floor", json.dumps(params)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        return {"name": "floor", "error": proc.stderr.strip().splitlines()[-3:]}
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    measured["cpu_machine"] = machine_cpu_seconds() - machine_before
    return {"name": "floor", "model_turns": 0, "ideal": 0.0, "turns_per": 0,
            **params, **measured}  # fmt: skip


def machine_cpu_seconds() -> float:
    """CPU time of the whole machine so far (all but idle and iowait), from /proc/stat."""
    with open("/proc/stat") as stat:
        jiffies = [int(x) for x in stat.readline().split()[1:]]
    busy = sum(jiffies[:8]) - jiffies[3] - jiffies[4]  # minus idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def print_row(row: dict[str, Any]) -> None:
    if "error" in row:
        print(f"{row['name']:<10} failed: {row['error']}")
        return
    done, wall = row["done"], row["wall"]
    if row["name"] == "floor":
        from workloads import FLOOR_PROCESSES

        own, machine = row["cpu"] / done * 1000, row["cpu_machine"] / done * 1000
        print(f"{'floor':<10} N={row['episodes']:<7} C={row['concurrency']:<5} bare bwrap "
              f"--unshare-all, {FLOOR_PROCESSES} /bin/true each: {wall:7.1f}s "
              f"{done / wall:8.1f} sandboxes/s  cpu/sandbox {own:6.2f} ms "
              f"(machine {machine:5.2f})  failed {row['failed']}")  # fmt: skip
        return
    turns = max(row["model_turns"], 1)
    per_turn = row["cpu"] / turns * 1000
    machine = row.get("cpu_machine")
    on_machine = f" (machine {machine / turns * 1000:5.2f})" if machine is not None else ""
    print(
        f"{row['name']:<10} N={row['episodes']:<7} C={row['concurrency']:<5}"
        f" T={row['turns_per']:<2}"
        f" {wall:7.1f}s {done / wall:8.1f} ep/s  cpu/turn {per_turn:6.2f} ms{on_machine}"
        f"  rss {row['rss_mb']:6.0f} MB (child {row['rss_children_mb']:4.0f})"
        f"  eff {row['ideal'] / wall:5.2f}  failed {row['failed']}"
    )


def print_of_floor(rows: dict[str, dict[str, Any]]) -> None:
    """Each sandboxed workload's episodes/s as a share of the floor's sandboxes/s,
    measured in the same run (the target: local at 0.45 or more)."""
    floor = rows.get("floor")
    if floor is None or "error" in floor or not floor["wall"]:
        return
    per_second = floor["done"] / floor["wall"]
    for name in ("local", "docker", "inspect"):
        row = rows.get(name)
        if row is not None and "error" not in row and row["wall"]:
            rate = row["done"] / row["wall"]
            print(f"{name:<10} {rate / per_second:5.2f} of the floor "
                  f"({rate:.1f} ep/s against {per_second:.1f} sandboxes/s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "PARAMS"), help=argparse.SUPPRESS)
    parser.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    parser.add_argument("-N", "--episodes", type=int, default=500)
    parser.add_argument("-C", "--concurrency", type=int, default=256)
    parser.add_argument("-T", "--turns", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--api", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--targets",
        action="store_true",
        help="measure the performance targets, row by row (long: tens of minutes)",
    )
    parser.add_argument("--rows", default="", help="with --targets: some rows only "
                        "(bash,trivial,rss,resume,docker,localstart)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="with --targets: smaller N")
    parser.add_argument("--rss-turns", type=int, default=1, help="T of the RSS rows")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    workdir = Path(tempfile.mkdtemp(prefix="helios-bench-"))
    try:
        if args.targets:
            targets.main(args, run_workload, workdir)
            return
        names = [n for n in args.only.split(",") if n] or [
            "floor", "trivial", "local", "docker", "datagen", "toolcalls", "inspect"]  # fmt: skip
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; latency "
              f"{args.latency_ms:g} ms ± {args.jitter_ms:g}, api {args.api}, "
              f"workers {args.workers}")  # fmt: skip
        rows = {}
        for name in names:
            rows[name] = row = run_workload(name, args, workdir)
            print_row(row)
            print("  " + json.dumps({k: v for k, v in row.items() if k != "url"}), file=sys.stderr)
        print_of_floor(rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
