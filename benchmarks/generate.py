"""Throughput of `helios generate`: prompts/s and harness CPU per model turn.

A scripted model server in its own process answers with 100 ms latency; every
prompt takes 5 model turns, 4 of them calling Hermes's `terminal` tool, in a real
local (bubblewrap) sandbox per prompt. The run goes through `BatchRunner` exactly
as the CLI does (store, batch files, merge, statistics).

    .venv/bin/python benchmarks/generate.py [--prompts 1500] [--concurrency 128]
    .venv/bin/python benchmarks/generate.py --prompts 300 --concurrency 16 \
        --hermes /path/to/hermes-venv/bin/python      # Hermes's batch_runner alongside

Prints prompts/s, harness CPU per model turn (the Helios process; sandbox
processes are reported apart), and two ratios: against the 25 prompts/s target
on 2 cores, and against Hermes's ceiling for the same workload (its workers run
each batch's prompts one after another: at most num_workers prompts in flight).

With `--hermes PYTHON` (an interpreter with `pip install hermes-agent`), Hermes's own
`batch_runner` runs the same dataset against the same server with `--num_workers` set
to `--concurrency`, and the ratio is measured rather than bounded. Hermes runs in an
empty HOME: its local terminal runs a login shell per command, which would otherwise
read the user's profile (root's `pyenv init` and rehash here) on every command, a cost
Helios's sandboxes do not pay; `--hermes-home` keeps the real HOME, to show that cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))
import mockserver  # a sibling script, not a package

from helios.datagen import BatchRunner

TARGET = 25.0
TURNS = 5


def _script() -> dict[str, object]:
    call = {"name": "terminal", "arguments": {"command": "echo ok"}}
    turn = {"reasoning": "Let me think about the next step.", "text": "working",
            "tool_calls": [call]}  # fmt: skip
    final = {"reasoning": "Done.", "text": "done"}
    return {"scenarios": [{"match": "", "turns": [turn] * (TURNS - 1), "final": final}]}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--provider", default="local")
    parser.add_argument(
        "--hermes", metavar="PYTHON", help="also run Hermes's batch_runner with this interpreter"
    )
    parser.add_argument(
        "--hermes-home", action="store_true", help="run Hermes with the real HOME, not an empty one"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        dataset = workdir / "prompts.jsonl"
        dataset.write_text("".join(json.dumps({"prompt": f"Task {i}: run a command."}) + "\n"
                                   for i in range(args.prompts)))  # fmt: skip
        server = mockserver.start(workdir, _script(), args.latency_ms)
        url = server.openai_url
        try:
            runner = BatchRunner(
                dataset, batch_size=50, run_name="bench", model="mock", base_url=url,
                num_workers=4, distribution="terminal_only", output_dir=workdir / "data",
                concurrency=args.concurrency, provider=args.provider, quiet=True,
                console=Console(file=open("/dev/null", "w")),  # noqa: SIM115
            )  # fmt: skip
            cpu, children, wall = time.process_time(), _children_cpu(), time.monotonic()
            result = runner.run()
            cpu = time.process_time() - cpu
            children = _children_cpu() - children
            wall = time.monotonic() - wall
            hermes = _hermes(args, dataset, url, workdir) if args.hermes else None
        finally:
            server.stop()
    turns = result.statistics["reasoning_statistics"]["total_assistant_turns"]
    rate = result.rows / wall
    hermes_ceiling = 4 / (TURNS * args.latency_ms / 1000)
    print(
        f"prompts             {result.rows} rows of {args.prompts} ({result.failed} failed), "
        f"{TURNS} turns each, {args.latency_ms:g} ms latency, {args.provider} sandbox"
    )
    print(f"concurrency         {args.concurrency}")
    print(f"wall                {wall:.1f} s")
    print(f"prompts/s           {rate:.1f}")
    print(
        f"harness CPU/turn    {cpu / max(turns, 1) * 1000:.2f} ms  (Helios process, "
        f"{turns} model turns)"
    )
    print(
        f"sandbox CPU/prompt  {children / max(result.rows, 1) * 1000:.1f} ms  (bwrap and the "
        "tools' commands)"
    )
    print(f"ratio vs target     {rate / TARGET:.2f}x  (target {TARGET:g} prompts/s on 2 cores)")
    print(f"ratio vs Hermes     {rate / hermes_ceiling:.1f}x  (Hermes ceiling with "
          f"--num_workers=4: {hermes_ceiling:.0f} prompts/s)")  # fmt: skip
    if hermes is not None:
        rows, seconds = hermes
        home = "the real HOME" if args.hermes_home else "an empty HOME"
        print(
            f"Hermes batch_runner {rows} rows in {seconds:.1f} s = "
            f"{rows / seconds:.2f} prompts/s (--num_workers={args.concurrency}, {home})"
        )
        print(f"ratio vs Hermes run {rate / (rows / seconds):.1f}x")


def _hermes(args: argparse.Namespace, dataset: Path, url: str, workdir: Path) -> tuple[int, float]:
    """Hermes's batch_runner on the same dataset and server: (rows, wall seconds)."""
    env = dict(os.environ, OPENAI_API_KEY="bench", OPENROUTER_API_KEY="bench")
    if not args.hermes_home:
        home = workdir / "hermes-home"
        home.mkdir()
        env["HOME"] = str(home)
    out = workdir / "hermes"
    out.mkdir()
    # Hermes runs a batch's prompts one after another, one batch per worker: batches of
    # prompts/workers keep every worker busy (its best case for this many workers)
    batch = max(1, -(-args.prompts // args.concurrency))
    argv = [args.hermes, "-m", "batch_runner", f"--dataset_file={dataset}", f"--batch_size={batch}",
            "--run_name=bench", "--model=mock", f"--base_url={url}", "--api_key=bench",
            f"--num_workers={args.concurrency}", "--distribution=terminal_only"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=out, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"Hermes failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    found = list(out.rglob("trajectories.jsonl"))
    rows = sum(1 for path in found for line in path.read_text().splitlines() if line.strip())
    return rows, seconds


if __name__ == "__main__":
    main()
