"""Throughput of `helios generate`: prompts/s and harness CPU per model turn.

A scripted model server in its own process answers with 100 ms latency; every
prompt takes 5 model turns, 4 of them calling Hermes's `terminal` tool, in a real
local (bubblewrap) sandbox per prompt. The run goes through `BatchRunner` exactly
as the CLI does (store, batch files, merge, statistics).

    .venv/bin/python benchmarks/generate.py [--prompts 1500] [--concurrency 128]

Prints prompts/s, harness CPU per model turn (the Helios process; sandbox
processes are reported apart), and two ratios: against the 25 prompts/s target
on 2 cores, and against Hermes's ceiling for the same workload (its workers run
each batch's prompts one after another: at most num_workers prompts in flight).
"""

from __future__ import annotations

import argparse
import json
import resource
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
        finally:
            server.stop()
    turns = result.statistics["reasoning_statistics"]["total_assistant_turns"]
    rate = result.rows / wall
    hermes_ceiling = 4 / (TURNS * args.latency_ms / 1000)
    print(f"prompts             {result.rows} rows of {args.prompts} ({result.failed} failed), "
          f"{TURNS} turns each, {args.latency_ms:g} ms latency, {args.provider} sandbox")
    print(f"concurrency         {args.concurrency}")
    print(f"wall                {wall:.1f} s")
    print(f"prompts/s           {rate:.1f}")
    print(f"harness CPU/turn    {cpu / max(turns, 1) * 1000:.2f} ms  (Helios process, "
          f"{turns} model turns)")
    print(f"sandbox CPU/prompt  {children / max(result.rows, 1) * 1000:.1f} ms  (bwrap and the "
          "tools' commands)")
    print(f"ratio vs target     {rate / TARGET:.2f}x  (target {TARGET:g} prompts/s on 2 cores)")
    print(f"ratio vs Hermes     {rate / hermes_ceiling:.1f}x  (Hermes ceiling with "
          f"--num_workers=4: {hermes_ceiling:.0f} prompts/s)")  # fmt: skip


if __name__ == "__main__":
    main()
