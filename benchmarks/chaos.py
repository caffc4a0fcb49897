"""More than 50 random SIGINT / SIGTERM / kill -9 into a local batch, each followed by
`--resume`; prints what was lost, duplicated and left behind (all must be 0).

    .venv/bin/python benchmarks/chaos.py [--signals 60] [--tasks 300] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from helios.testing.chaos import run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--signals", type=int, default=60)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helios-chaos-") as tmp:
        report = run_chaos(Path(tmp), tasks=args.tasks, signals=args.signals, seed=args.seed)
    print(f"signals sent      {sum(report.signals.values())} {dict(report.signals)}")
    print(f"exit codes        {dict(report.exit_codes)}")
    print(f"tasks / recorded  {report.tasks} / {report.recorded}")
    print(f"lost              {report.lost}")
    print(f"duplicated        {report.duplicated}")
    print(f"summary agrees    {report.summary_consistent}")
    print(f"processes left    {len(report.processes_left)}")
    print(f"wall time         {report.seconds:.0f} s")
    print("OK" if report.ok else "FAILED")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
