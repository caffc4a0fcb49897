"""Where a pytest-xdist run's wall time went, from HELIOS_TEST_TIMELINE's records.

    HELIOS_TEST_TIMELINE=/tmp/timeline.jsonl make test
    .venv/bin/python scripts/timeline.py /tmp/timeline.jsonl [--top 30]

Prints each worker's busy time and when it finished (the run ends with the last
one), the modules by their summed time (with the worker that ran each: a module
kept whole on one worker is one unit of scheduling), and the slowest tests.
"""

from __future__ import annotations

import argparse
import collections
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
    print("\ntests by time (setup + call + teardown)")
    for test, took in sorted(tests.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{took:7.1f}  {test}")


if __name__ == "__main__":
    main()
