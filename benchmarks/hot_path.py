"""Where Helios's own CPU goes in one workload: a cProfile of the hot path.

    .venv/bin/python benchmarks/hot_path.py                      # local bash, N=300 C=256 T=5
    .venv/bin/python benchmarks/hot_path.py --workload trivial -N 500
    .venv/bin/python benchmarks/hot_path.py --workload docker -N 64 -C 64
    .venv/bin/python benchmarks/hot_path.py --top 40 --match helios/

The workload runs in this one process (`--workers 1`), so everything Helios does is
here. The event loop's thread is profiled with a CPU clock (`time.thread_time`),
not the wall clock: on a busy machine a wall-clock profile charges the time a
thread waits for a core to whatever it was doing (a pipe write that wakes a
sandbox looks like 1 ms). Work sent to threads (`asyncio.to_thread`) is timed per
function with the same clock. Figures are per episode. cProfile itself slows the
loop's thread by about 2×, so read its rows as shares, and the first line (no
profiler) for the absolute cost.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import pstats
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import mockserver
import workloads
from run import WORKLOAD_TOOLS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workloads_here = ["local", "docker", "trivial", "datagen"]
    parser.add_argument("--workload", default="local", choices=workloads_here)
    parser.add_argument("-N", "--episodes", type=int, default=300)
    parser.add_argument("-C", "--concurrency", type=int, default=256)
    parser.add_argument("-T", "--turns", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=100)
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    parser.add_argument("--match", default="", help="only functions whose file holds this")
    parser.add_argument("--save", metavar="FILE", help="also write the loop's profile (pstats)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helios-hot-path-"))
    try:
        plain = _run(args, work / "plain", profile=None)
        print(f"{args.workload}: N={args.episodes} C={args.concurrency} T={args.turns}, "
              f"no profiler: {plain['self']:.1f} ms of Helios's CPU per episode "
              f"(+ {plain['children']:.1f} ms in its children), {plain['wall']:.1f} s")  # fmt: skip
        profile = cProfile.Profile(time.thread_time)
        jobs: dict[str, float] = collections.defaultdict(float)  # thread CPU, seconds
        counts: collections.Counter[str] = collections.Counter()
        with _timed_threads(jobs, counts):
            profiled = _run(args, work / "profiled", profile=profile)
        _report(args, profile, profiled, jobs, counts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(
    args: argparse.Namespace, work: Path, profile: cProfile.Profile | None
) -> dict[str, float]:
    tool, arguments, end = WORKLOAD_TOOLS[args.workload]
    script = mockserver.tool_script(args.turns, tool, arguments, end=end)
    work.mkdir(parents=True)
    server = mockserver.start(work / "server", script, args.latency_ms)
    out = work / "out"
    out.mkdir()
    params = workloads.Params(episodes=args.episodes, concurrency=args.concurrency,
                              turns=args.turns, latency_ms=args.latency_ms,
                              url=server.base_url, workers=1)  # fmt: skip
    try:
        cpu0, kids0, loop0, wall0 = (
            time.process_time(),
            _kids(),
            time.thread_time(),
            time.monotonic(),
        )
        if profile is not None:
            profile.enable()
        try:
            workloads.WORKLOADS[args.workload](params, out)
        finally:
            if profile is not None:
                profile.disable()
        per = 1000 / args.episodes
        return {
            "self": (time.process_time() - cpu0) * per,
            "children": (_kids() - kids0) * per,
            "loop": (time.thread_time() - loop0) * per,
            "wall": time.monotonic() - wall0,
        }
    finally:
        server.stop()


def _kids() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _timed_threads:
    """asyncio.to_thread with each call's thread CPU added up by function."""

    def __init__(self, jobs: dict[str, float], counts: collections.Counter[str]) -> None:
        self.jobs, self.counts = jobs, counts
        self.original = asyncio.to_thread

    def __enter__(self) -> None:
        original, jobs, counts = self.original, self.jobs, self.counts

        async def to_thread(func: Callable[..., Any], /, *a: Any, **k: Any) -> Any:
            name = getattr(func, "__qualname__", None) or repr(func)

            def timed() -> Any:
                start = time.thread_time()
                try:
                    return func(*a, **k)
                finally:
                    jobs[name] += time.thread_time() - start
                    counts[name] += 1

            return await original(timed)

        asyncio.to_thread = to_thread

    def __exit__(self, *exc: object) -> None:
        asyncio.to_thread = self.original


def _largest(values: dict[str, float], top: int) -> list[tuple[str, float]]:
    return sorted(values.items(), key=lambda item: -item[1])[:top]


def _group(filename: str, function: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0]
    if "/helios/" in filename:
        return "helios/" + filename.split("/helios/")[1]
    if "python3." in filename and "/lib/" in filename:
        return "stdlib " + filename.rsplit("/lib/", 1)[1].split("/", 1)[1].split("/")[0]
    return "builtin " + function.split(" of ")[0][:48] if filename == "~" else filename


def _report(args: argparse.Namespace, profile: cProfile.Profile, run: dict[str, float],
            jobs: dict[str, float], counts: collections.Counter[str]) -> None:  # fmt: skip
    per = 1000 / args.episodes
    stats = pstats.Stats(profile)
    if args.save:
        stats.dump_stats(args.save)
    by_group: dict[str, float] = collections.defaultdict(float)
    for (filename, _line, function), (_cc, _nc, own, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        by_group[_group(filename, function)] += own
    total = sum(by_group.values())
    print(
        f"\nprofiled: event loop {run['loop']:.1f} ms per episode, threads "
        f"{sum(jobs.values()) * per:.1f} ms, process {run['self']:.1f} ms"
    )
    print("\nevent loop's own CPU by module (share of the loop; ms per episode, profiled):")
    for name, seconds in _largest(by_group, args.top):
        print(f"  {seconds / total * 100:5.1f}%  {seconds * per:6.2f}  {name}")
    print("\nwork in threads (ms of thread CPU per episode, calls per episode):")
    for name, seconds in _largest(jobs, args.top):
        print(f"  {seconds * per:6.2f}  {counts[name] / args.episodes:4.1f}  {name}")
    print("\nevent loop's functions by cumulative CPU:")
    stats.sort_stats("cumulative").print_stats(args.match or "helios/", args.top)


if __name__ == "__main__":
    main()
