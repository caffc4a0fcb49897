"""How long a command line takes to start: `helios --help` and `helios batch --help`,
beside `inspect --help` (Inspect AI) and `harbor --help` (Harbor) when installed.

Each command runs R times (default 10) in a fresh process, after one run not counted
(so every file is in the page cache); prints the median wall time, the median CPU
time (the process and its children) and the ratio to `helios --help`. The peers run
with an empty HOME, so no user configuration is read.

    .venv/bin/python benchmarks/startup.py
    .venv/bin/python benchmarks/startup.py --src /path/to/other/checkout/src   # another Helios
    .venv/bin/python benchmarks/startup.py --harbor ~/.pyenv/versions/3.13.0/bin/harbor

Harbor needs Python >= 3.12, so it is often in another interpreter: it is looked for
beside this Python, on PATH, then in pyenv's 3.12+ interpreters; `--harbor` and
`--inspect` name a binary.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def run_once(argv: list[str], env: dict[str, str]) -> Timing:
    """One run of `argv`: wall seconds, and CPU seconds of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=120, check=False)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu)


def measure(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, float]:
    """Median wall and median CPU seconds over `repeat` runs, after one not counted."""
    run_once(argv, env)
    runs = [run_once(argv, env) for _ in range(repeat)]
    return statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs)


def beside_python(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else None


def find_inspect() -> str | None:
    return beside_python("inspect") or shutil.which("inspect")


def find_harbor() -> str | None:
    found = beside_python("harbor") or shutil.which("harbor")
    if found is not None:
        return found
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for binary in sorted(versions.glob("3.1[2-9]*/bin/harbor"), reverse=True):
        return str(binary)
    return None


def helios_argv() -> list[str]:
    """The `helios` console script beside this Python, as a user runs it; else -m."""
    script = beside_python("helios")
    return [script] if script is not None else [sys.executable, "-m", "helios"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-R", "--repeat", type=int, default=10, help="runs per command")
    parser.add_argument("--src", type=Path, help="import Helios from this src folder instead")
    parser.add_argument("--inspect", help="the `inspect` binary (default: looked for)")
    parser.add_argument("--harbor", help="the `harbor` binary (default: looked for)")
    args = parser.parse_args()

    helios_env = dict(os.environ)
    if args.src is not None:
        helios_env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(args.src.resolve()), os.environ.get("PYTHONPATH")])
        )
    empty_home = tempfile.mkdtemp(prefix="startup-home-")
    peer_env = {**os.environ, "HOME": empty_home}
    peer_env.pop("PYTHONPATH", None)

    helios = helios_argv()
    rows: list[tuple[str, list[str] | None, dict[str, str], str]] = [
        ("helios --help", [*helios, "--help"], helios_env, ""),
        ("helios batch --help", [*helios, "batch", "--help"], helios_env, ""),
    ]
    inspect = args.inspect or find_inspect()
    harbor = args.harbor or find_harbor()
    rows.append(("inspect --help", [inspect, "--help"] if inspect else None, peer_env,
                 "not installed (pip install -e '.[bench]')"))  # fmt: skip
    rows.append(("harbor --help", [harbor, "--help"] if harbor else None, peer_env,
                 "not installed (pip install harbor, in a Python >= 3.12)"))  # fmt: skip

    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"median of {args.repeat} runs, each a fresh process")  # fmt: skip
    base: float | None = None
    try:
        for label, argv, env, missing in rows:
            if argv is None:
                print(f"{label:<22} skipped: {missing}")
                continue
            try:
                wall, cpu = measure(argv, env, args.repeat)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                if base is None:  # helios itself: no figure to compare with
                    raise
                print(f"{label:<22} skipped: {exc}")
                continue
            base = wall if base is None else base
            ratio = f"  {wall / base:5.1f}x helios --help" if label != "helios --help" else ""
            print(f"{label:<22} wall {wall * 1000:7.0f} ms  CPU {cpu * 1000:7.0f} ms{ratio}")
    finally:
        shutil.rmtree(empty_home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
