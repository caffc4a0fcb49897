"""A synthetic corpus of Harbor-format tasks, in the shape and size of the public one
(3,566 task folders), for the loading benchmark (`loading.py`).

Each task is a folder as Terminal-Bench 2 and Harbor's datasets write them:
`task.toml` ([metadata], [verifier], [agent], [environment]), an `instruction.md` of
1–3 KB, `environment/Dockerfile`, `tests/test.sh` and `tests/test_outputs.py`,
`solution/solve.sh`. One task in five brings CSV data files in `environment/`, one
in eight a binary fixture (64–256 KB; 1–4 MB for one in forty), one in twelve a
`docker-compose.yaml` with a sidecar, one in twenty-five is multi-step (`[[steps]]`,
with `steps/<name>/instruction.md` and `tests/test.sh`).

The corpus is a pure function of (n, seed): it is generated once into a cache folder
(XDG_CACHE_HOME, else ~/.cache, `helios-bench/harbor-corpus-<n>-<seed>`) and reused;
a marker file written last tells a whole corpus from a cut one.

    .venv/bin/python benchmarks/task_corpus.py            # make (or find) it; print where
    .venv/bin/python benchmarks/task_corpus.py -n 20 --out /tmp/c
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
from pathlib import Path

#: the size of the public corpus of Harbor-format tasks (Terminal-Bench 2 and others)
CORPUS_SIZE = 3566
COMPLETE = ".complete"
#: bump when the shape changes: a cached corpus of an older shape is made again
SHAPE = 2

_WORDS = (
    "file", "server", "process", "output", "input", "value", "config", "directory", "script",
    "test", "build", "binary", "package", "compile", "install", "parse", "record", "format",
    "stream", "buffer", "socket", "request", "response", "database", "table", "query", "index",
    "schema", "column", "row", "migrate", "backup", "restore", "archive", "log", "metric",
    "cache", "queue", "worker", "thread", "lock", "signal", "timeout", "retry", "error",
    "status", "report",
)
_CATEGORIES = ("software-engineering", "system-administration", "security", "data-science",
               "debugging", "scientific-computing", "machine-learning", "games")  # fmt: skip
_DIFFICULTIES = ("easy", "medium", "hard")
_TAGS = ("python", "bash", "c", "rust", "git", "networking", "sqlite", "docker", "compression",
         "cryptography", "file-operations", "performance", "web", "data-processing")  # fmt: skip


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def _paragraphs(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        paragraph = " ".join(_sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(2, 5)))
        parts.append(paragraph)
        total += len(paragraph) + 2
    return "\n\n".join(parts) + "\n"


def _task_toml(rng: random.Random, index: int, steps: list[str]) -> str:
    tags = rng.sample(_TAGS, rng.randint(1, 4))
    version = "1.4" if steps else rng.choice(("1.0", "1.1", "1.2"))
    key = "schema_version" if version != "1.0" else "version"
    lines = [
        f'{key} = "{version}"',
        "",
        "[metadata]",
        f'author_name = "Author {index % 97}"',
        f'author_email = "author{index % 97}@example.com"',
        f'difficulty = "{rng.choice(_DIFFICULTIES)}"',
        f'category = "{rng.choice(_CATEGORIES)}"',
        "tags = [" + ", ".join(f'"{t}"' for t in tags) + "]",
        f"expert_time_estimate_min = {rng.choice((15, 30, 45, 60, 120))}.0",
        f"junior_time_estimate_min = {rng.choice((60, 120, 240, 480))}.0",
        "",
        "[verifier]",
        f"timeout_sec = {rng.choice((180, 300, 600, 900, 1800))}.0",
        "",
        "[agent]",
        f"timeout_sec = {rng.choice((300, 600, 900, 1800, 3600))}.0",
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        f"cpus = {rng.choice((1, 1, 2, 4))}",
    ]
    if version == "1.0":
        lines += [f'memory = "{rng.choice((2, 4, 8))}G"', 'storage = "10G"']
    else:
        lines += [f"memory_mb = {rng.choice((2048, 4096, 8192))}", "storage_mb = 10240"]
    if rng.random() < 0.3:
        lines += ["", "[environment.env]", f'DATA_DIR = "/app/data{index % 5}"']
    for name in steps:
        lines += ["", "[[steps]]", f'name = "{name}"', "", "[steps.agent]",
                  f"timeout_sec = {rng.choice((300, 600))}.0"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _dockerfile(rng: random.Random) -> str:
    packages = " ".join(rng.sample(("curl", "git", "python3", "python3-pip", "build-essential",
                                    "sqlite3", "jq", "tmux", "vim", "gcc", "make"), 4))  # fmt: skip
    return (
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624\n\n"
        f"RUN apt-get update && apt-get install -y {packages} \\\n"
        "    && rm -rf /var/lib/apt/lists/*\n\n"
        "WORKDIR /app\n\n"
        "COPY . /app/\n"
        f"RUN pip install --no-cache-dir pytest=={rng.randint(6, 8)}.{rng.randint(0, 4)}.0\n"
    )


_TEST_SH = """#!/bin/bash
# Install the test's dependencies and run pytest; the reward is its outcome.
apt-get update > /dev/null 2>&1
apt-get install -y curl > /dev/null 2>&1
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh > /dev/null 2>&1
source $HOME/.local/bin/env
uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

_COMPOSE = """services:
  main:
    build:
      context: .
    depends_on:
      db:
        condition: service_healthy
  db:
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: bench
    healthcheck:
      test: ["CMD", "pg_isready"]
      interval: 2s
      retries: 30
"""


def _test_outputs(rng: random.Random) -> str:
    tests = []
    for n in range(rng.randint(3, 8)):
        tests.append(
            f"def test_{rng.choice(_WORDS)}_{n}():\n"
            f'    """{_sentence(rng, 10)}"""\n'
            f'    path = Path("/app/{rng.choice(_WORDS)}.txt")\n'
            "    assert path.exists()\n"
            f'    assert "{rng.choice(_WORDS)}" in path.read_text()\n'
        )
    return "from pathlib import Path\n\n\n" + "\n\n".join(tests)


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def write_task(root: Path, index: int, seed: int) -> Path:
    """One task folder under `root`, the same for the same index and seed."""
    rng = random.Random(seed * 1_000_003 + index)
    folder = root / f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{index:04d}"
    steps = ["setup", "implement", "verify"][: rng.randint(2, 3)] if index % 25 == 7 else []
    _write(folder / "task.toml", _task_toml(rng, index, steps))
    _write(folder / "instruction.md", _paragraphs(rng, rng.randint(800, 3000)))
    _write(folder / "environment" / "Dockerfile", _dockerfile(rng))
    if index % 12 == 5:
        _write(folder / "environment" / "docker-compose.yaml", _COMPOSE)
    if index % 5 == 2:
        for n in range(rng.randint(1, 3)):
            _write(folder / "environment" / "data" / f"input{n}.csv",
                   "".join(f"{i},{rng.randint(0, 10**6)},{rng.choice(_WORDS)}\n"
                           for i in range(rng.randint(50, 400))))  # fmt: skip
    if index % 8 == 3:  # a fixture the task ships: an archive, an image, a model
        size = rng.randint(1, 4) << 20 if index % 40 == 3 else rng.randint(64, 256) << 10
        blob = folder / "environment" / "assets" / f"{rng.choice(_WORDS)}.bin"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(rng.randbytes(size))
    _write(folder / "tests" / "test.sh", _TEST_SH, 0o755)
    _write(folder / "tests" / "test_outputs.py", _test_outputs(rng))
    _write(folder / "solution" / "solve.sh",
           "#!/bin/bash\nset -euo pipefail\n" + "".join(
               f"echo '{_sentence(rng, 6)}' >> /app/{rng.choice(_WORDS)}.txt\n"
               for _ in range(rng.randint(5, 40))), 0o755)  # fmt: skip
    for name in steps:
        base = folder / "steps" / name
        _write(base / "instruction.md", _paragraphs(rng, rng.randint(300, 1200)))
        _write(base / "tests" / "test.sh", _TEST_SH, 0o755)
    return folder


def generate(root: Path, n: int = CORPUS_SIZE, seed: int = 0) -> Path:
    """Write `n` task folders into `root` (made empty first); return `root`."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for index in range(n):
        write_task(root, index, seed)
    (root / COMPLETE).write_text(f"{n} {seed} {SHAPE}\n")
    return root


def cached(n: int = CORPUS_SIZE, seed: int = 0, cache: Path | None = None) -> Path:
    """The corpus of `n` tasks, generated once into the cache folder."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = cache or home / "helios-bench"
    root = base / f"harbor-corpus-{n}-{seed}"
    marker = root / COMPLETE
    if marker.is_file() and marker.read_text().split() == [str(n), str(seed), str(SHAPE)]:
        return root
    return generate(root, n, seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=CORPUS_SIZE, help="task folders")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write here (default: the cache folder)")
    args = parser.parse_args()
    root = generate(args.out, args.n, args.seed) if args.out else cached(args.n, args.seed)
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
