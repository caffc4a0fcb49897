"""Loading tasks: discovering and parsing a corpus of Harbor-format tasks (3,566 by
default, `task_corpus.py`), in ms per task.

    .venv/bin/python benchmarks/loading.py                   # 5 runs of each row
    .venv/bin/python benchmarks/loading.py --against /tmp/old/src   # interleaved pairs
    .venv/bin/python benchmarks/loading.py -n 20 -R 1 --no-harbor

Rows, each the median of R runs, each run a fresh process (the corpus is in the page
cache: one run of each is made first and not counted):
- **helios load**: what `load_batch` does, in the process after its imports, as `helios
  tasks list` calls it: the tasks found (discover), read and checked (parse), no file
  hashed;
- **helios load + ids**: as `helios batch` calls it: the same, and each task's content
  hash, which its trial ids need (`Task.checksum`);
- **helios tasks list**: `helios tasks list CORPUS --json` end to end, process start
  and output included; and without `--json` (its table, to a pipe);
- **harbor**: Harbor 0.25's own loader on the same corpus, in its venv
  (`tests/harbor_venv.py`, Python >= 3.12), with an empty HOME: what its local dataset
  does (`Task.is_valid_dir` on each folder) and then `Task(folder)` for each one.

`--against SRC`: the Helios rows also run with Helios imported from SRC (another
checkout's `src`), in interleaved pairs, with the ratio.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import task_corpus  # noqa: E402

SRC = HERE.parent / "src"

_HARBOR = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from harbor.models.task.task import Task
t1, c1 = time.perf_counter(), time.process_time()
root = Path(sys.argv[1])
found = [p for p in sorted(root.iterdir()) if Task.is_valid_dir(p)]
t2 = time.perf_counter()
tasks = [Task(p) for p in found]
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"n": len(tasks), "import": t1 - t0, "discover": t2 - t1, "parse": t3 - t2,
                  "cpu": c3 - c1}))
"""


def child(corpus: str, ids: bool) -> None:
    """One run in this process: the load (and the ids), timed after the imports."""
    t0 = time.perf_counter()
    from helios.tasks.plan import load_tasks, resolve_task_dirs

    t1, c1 = time.perf_counter(), time.process_time()
    found = resolve_task_dirs([corpus], "**/task.toml")  # as load_batch, apart
    td, cd = time.perf_counter(), time.process_time()
    # A listing hashes nothing, a batch every task (a checkout before that knob hashed
    # at load, for both)
    knob = {"digests": ids} if "digests" in inspect.signature(load_tasks).parameters else {}
    loaded = load_tasks(found, None, **knob)
    for task in loaded.tasks if ids else ():
        task.checksum  # noqa: B018  (what a batch's trial ids read)
    t2, c2 = time.perf_counter(), time.process_time()
    print(json.dumps({"n": len(loaded.tasks), "invalid": len(loaded.invalid), "import": t1 - t0,
                      "seconds": t2 - t1, "cpu": c2 - c1, "discover": td - t1, "parse": t2 - td,
                      "discover_cpu": cd - c1, "parse_cpu": c2 - cd}))  # fmt: skip


def _env(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    return env


def run_load(src: Path, corpus: Path, ids: bool) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", str(corpus)] + (["--ids"] if ids else [])
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(src), check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-2000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_list(src: Path, corpus: Path, *flags: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "helios", "tasks", "list", str(corpus), *flags]
    t0, c0 = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(src), check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-2000:])
    if flags:
        n = len(json.loads(done.stdout))
    else:  # the table's footer: "3,566 task(s)"
        footer = re.match(r"([\d,]+)", done.stdout.strip().splitlines()[-1])
        n = int(footer.group(1).replace(",", "")) if footer else 0
    return {"n": n, "seconds": wall, "cpu": cpu}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_harbor(python: str, corpus: Path, home: str) -> dict[str, Any]:
    env = {**os.environ, "HOME": home}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([python, "-c", _HARBOR, str(corpus)], capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-2000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = result["discover"] + result["parse"]
    return result


def harbor_python() -> str | None:
    import harbor_venv

    python = harbor_venv.find_python()
    return None if python is None else str(harbor_venv.harbor_python(python))


def _line(label: str, runs: list[dict[str, Any]], n: int, base: float | None = None) -> str:
    seconds = statistics.median(r["seconds"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    parts = [f"{label:<34} {seconds * 1000 / n:7.3f} ms/task  {seconds:7.2f} s"
             f"  CPU {cpu * 1000 / n:6.3f} ms/task"]  # fmt: skip
    if "discover" in runs[0]:
        discover = statistics.median(r["discover"] for r in runs) * 1000 / n
        parse = statistics.median(r["parse"] for r in runs) * 1000 / n
        parts.append(f"(discover {discover:.3f}, parse {parse:.3f}")
        if "discover_cpu" in runs[0]:
            cpu_d = statistics.median(r["discover_cpu"] for r in runs) * 1000 / n
            cpu_p = statistics.median(r["parse_cpu"] for r in runs) * 1000 / n
            parts[-1] += f"; CPU {cpu_d:.3f}, {cpu_p:.3f}"
        parts[-1] += ")"
    parts.append(f"[{runs[0]['n']:,} tasks, {len(runs)} runs]")
    if base is not None:
        parts.append(f"{seconds / base:5.2f}x the new's wall")
    return "  ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--ids", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-n", "--tasks", type=int, default=task_corpus.CORPUS_SIZE)
    parser.add_argument("-R", "--repeat", type=int, default=5, help="runs per row")
    parser.add_argument("--corpus", type=Path, help="a corpus folder (default: generated, cached)")
    parser.add_argument("--against", type=Path, help="also run Helios from this src folder")
    parser.add_argument("--no-harbor", action="store_true", help="leave Harbor's row out")
    parser.add_argument("--harbor-python", help="Harbor's venv Python (default: harbor_venv.py)")
    parser.add_argument("--no-warmup", action="store_true", help="count the first run too")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.ids)
        return 0

    corpus = args.corpus or task_corpus.cached(args.tasks)
    n = sum(1 for _ in corpus.glob("*/task.toml"))
    srcs = {"": SRC} | ({" (against)": args.against.resolve()} if args.against else {})
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; corpus {corpus} "
          f"({n:,} task folders); median of {args.repeat} runs, each a fresh process")  # fmt: skip
    rows: dict[str, list[dict[str, Any]]] = {}
    kinds = (("helios load", lambda s: run_load(s, corpus, False)),
             ("helios load + ids", lambda s: run_load(s, corpus, True)),
             ("helios tasks list --json", lambda s: run_list(s, corpus, "--json")),
             ("helios tasks list (its table)", lambda s: run_list(s, corpus)))  # fmt: skip
    for _, run in kinds if not args.no_warmup else ():  # the page cache, the bytecode
        for src in srcs.values():
            run(src)
    for _ in range(args.repeat):  # interleaved: each pair runs back to back
        for label, run in kinds:
            for suffix, src in srcs.items():
                rows.setdefault(label + suffix, []).append(run(src))
    for label, _ in kinds:
        new = statistics.median(r["seconds"] for r in rows[label])
        print(_line(label, rows[label], n), end="")
        if label == "helios load":
            imp = statistics.median(r["import"] for r in rows[label])
            print(f"  (imports {imp * 1000:.0f} ms, not counted)", end="")
        print()
        if args.against:
            print(_line(label + " (against)", rows[label + " (against)"], n, base=new))
    if not args.no_harbor:
        python = args.harbor_python or harbor_python()
        if python is None:
            print("harbor                             skipped: no Python >= 3.12 here")
        else:
            home = tempfile.mkdtemp(prefix="loading-home-")
            try:
                if not args.no_warmup:
                    run_harbor(python, corpus, home)
                runs = [run_harbor(python, corpus, home) for _ in range(args.repeat)]
            finally:
                shutil.rmtree(home, ignore_errors=True)
            print(_line("harbor 0.25 (is_valid_dir + Task)", runs, n))
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
