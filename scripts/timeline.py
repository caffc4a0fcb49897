"""Where a pytest-xdist run's wall time went, from HELIOS_TEST_TIMELINE's records.

    HELIOS_TEST_TIMELINE=/tmp/timeline.jsonl make test
    .venv/bin/python scripts/timeline.py /tmp/timeline.jsonl [--top 30]

Prints each worker's busy time and when it finished (the run ends with the last
one), the modules by their summed time (with the worker that ran each: a module
kept whole on one worker is one unit of scheduling), and the slowest tests.
Where the records carry CPU figures, it also prints the modules by the CPU their
phases used: as root on cgroup v1, the worker and every process it started
(sandboxes, Ray's processes, CLI subprocesses), else the worker and the
subprocesses it waited for. Docker's containers are dockerd's children: their CPU
during each phase is shared out among the phases running then.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    records = [json.loads(line) for line in args.timeline.open() if line.strip()]
    if not records:
        raise SystemExit(f"{args.timeline}: no records")
    t0 = min(r["start"] for r in records)
    busy: dict[str, float] = collections.Counter()
    end: dict[str, float] = {}
    modules: dict[str, float] = collections.Counter()
    workers_of: dict[str, set[str]] = collections.defaultdict(set)
    tests: dict[str, float] = collections.Counter()
    cpu_of: dict[str, float] = collections.Counter()
    docker_of: dict[str, float] = collections.Counter()
    last: dict[str, float] = {}
    ordered = sorted(records, key=lambda r: r["stop"])
    for r in ordered:
        if "cpu" in r:
            total = r.get("group_cpu") or r["cpu"] + r["children_cpu"]
            who = (r["worker"], r.get("pid"))  # a pytest a test runs reports as its worker
            cpu_of[r["test"].split("::", 1)[0]] += total - last.get(who, total)
            last[who] = total
    docker = [(r["stop"], r["docker_cpu"]) for r in ordered if r.get("docker_cpu") is not None]
    for (t0_, d0), (t1, d1) in itertools.pairwise(docker):
        running = [r for r in records if r["start"] < t1 and r["stop"] > t0_]
        for r in running:  # the interval's docker CPU, shared by the phases running then
            docker_of[r["test"].split("::", 1)[0]] += (d1 - d0) / len(running)
    for r in records:
        took = r["stop"] - r["start"]
        busy[r["worker"]] += took
        end[r["worker"]] = max(end.get(r["worker"], 0.0), r["stop"] - t0)
        module = r["test"].split("::", 1)[0]
        modules[module] += took
        workers_of[module].add(r["worker"])
        tests[r["test"]] += took
    print("worker  busy s  ends at s")
    for worker in sorted(busy):
        print(f"{worker:6} {busy[worker]:7.0f} {end[worker]:10.0f}")
    print(f"\nall workers: {sum(busy.values()):.0f} s of test time; the run: "
          f"{max(end.values()):.0f} s\n\nmodules by time")  # fmt: skip
    for module, took in sorted(modules.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{took:7.0f}  {module}  [{','.join(sorted(workers_of[module]))}]")
    if cpu_of:
        print(f"\nmodules by CPU in the workers and what they started "
              f"({sum(cpu_of.values()):.0f} s in all)")  # fmt: skip
        if docker_of:
            print(f"(and {sum(docker_of.values()):.0f} s in docker's containers, shared out "
                  "among the phases running then: the second column)")  # fmt: skip
        for module, used in sorted(cpu_of.items(), key=lambda kv: -kv[1])[: args.top]:
            shared = f"  {docker_of[module]:6.0f}" if docker_of else ""
            print(f"{used:7.0f}{shared}  {module}")
    print("\ntests by time (setup + call + teardown)")
    for test, took in sorted(tests.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{took:7.1f}  {test}")


if __name__ == "__main__":
    main()
