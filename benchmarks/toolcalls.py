"""Throughput of the tool-call door: runs/s and CPU per run on the engine.

1,000 runs of a callable agent with 5 ms of latency at max_concurrency=200
(the target: under 3 s on 2 cores). The synthesizer is an in-memory
stand-in (synthesis is once per prompt anyway), so what is measured is
Helios's own work per run: scheduling, the door, retries' bookkeeping,
evaluation, recording and events.

    .venv/bin/python benchmarks/toolcalls.py [--runs 1000] [--latency-ms 5]
        [--max-concurrency 200] [--prompts 10] [--fail-every 0]

Prints wall time, runs/s, CPU seconds and CPU per run, and the ratio of the
wall time to the target.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

from helios import toolcalls
from helios.toolcalls.evaluators import ExactEvaluator

TARGET_SECONDS = 3.0


class MemorySynthesizer:
    async def synthesize(self, text: str) -> toolcalls.Audio:
        return toolcalls.Audio(data=b"\x00" * 4800, format="pcm", transcript=text)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def bench(runs: int, prompts: int, latency: float, limit: int, fail_every: int) -> None:
    calls = 0

    @toolcalls.agent
    async def agent(audio: toolcalls.Audio) -> toolcalls.AgentResponse:
        nonlocal calls
        calls += 1
        n = calls  # the counter moves on while this call sleeps
        await asyncio.sleep(latency)
        if fail_every and n % fail_every == 0:
            raise RuntimeError("injected failure")
        return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call("book_flight", to="LA")])

    texts = [f"Book flight number {i} to LA" for i in range(prompts)]
    per_prompt = max(1, runs // prompts)
    cpu, wall = _cpu(), time.perf_counter()
    result = await toolcalls.run_concurrent(
        prompts=texts, synthesizer=MemorySynthesizer(), agent=agent,
        evaluator=ExactEvaluator(ignore_extra_args=True),
        expect=[toolcalls.tool_call("book_flight")], runs=per_prompt, max_concurrency=limit,
        show_progress=False,
    )  # fmt: skip
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    print(f"runs             {result.total} ({prompts} prompts x {per_prompt})")
    print(f"agent latency    {latency * 1000:.0f} ms, max_concurrency {limit}")
    print(f"passed/failed    {result.passed_count}/{result.failed_count} "
          f"(errors {result.error_count})")  # fmt: skip
    print(f"wall time        {wall:.3f} s")
    print(f"runs/s           {result.total / wall:,.0f}")
    print(f"CPU              {cpu:.3f} s ({cpu / result.total * 1000:.3f} ms per run)")
    ideal = result.total / limit * latency
    print(f"ideal wall time  {ideal:.3f} s (latency-bound)")
    if (result.total, latency, limit) == (1000, 0.005, 200):  # the target's configuration
        print(f"target           < {TARGET_SECONDS:.1f} s: ratio {wall / TARGET_SECONDS:.2f} "
              f"({'met' if wall < TARGET_SECONDS else 'MISSED'})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--max-concurrency", type=int, default=200)
    parser.add_argument("--fail-every", type=int, default=0,
                        help="the agent raises on every Nth call (0: never)")  # fmt: skip
    args = parser.parse_args()
    asyncio.run(bench(args.runs, args.prompts, args.latency_ms / 1000, args.max_concurrency,
                      args.fail_every))  # fmt: skip


if __name__ == "__main__":
    main()
