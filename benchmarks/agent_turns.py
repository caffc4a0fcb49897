"""CPU per model turn of the tool agent, against a loopback scripted model server.

The model server runs in its own process (its CPU is not counted) with a fixed
latency; the sandbox is an in-memory stand-in that answers at once, so what is
measured is Helios's own work per turn: building the request, the SDK and
transport, parsing, the limiter, tool dispatch and the trajectory.

    .venv/bin/python benchmarks/agent_turns.py [--episodes 256] [--turns 10] [--latency-ms 100]

Prints turns/s, episodes/s, harness CPU per turn, the raw SDK's CPU per call as
a floor, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import openai

sys.path.insert(0, str(Path(__file__).parent))
import mockserver  # a sibling script, not a package

from helios.agents.base import AgentContext
from helios.agents.tool_agent import ToolAgent
from helios.environments.base import Environment, ExecResult
from helios.models.routing import resolve_model
from helios.models.services import ModelServices
from helios.tasks.task import load_task

PEER_CPU_MS_PER_TURN = 37.0  # a measured peer harness (design notes)


class InstantEnv(Environment):
    name: ClassVar[str] = "instant"

    async def start(self) -> None: ...

    async def exec(self, command: str, **_: Any) -> ExecResult:
        return ExecResult("hello\n", "", 0)

    async def upload(self, src: Path, dst: str) -> None: ...

    async def download(self, src: str, dst: Path) -> None: ...

    async def stop(self) -> None: ...


def _task(workdir: Path) -> Any:
    task_dir = workdir / "task"
    (task_dir / "environment").mkdir(parents=True)
    (task_dir / "tests").mkdir()
    (task_dir / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\n"
    )
    (task_dir / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task_dir / "instruction.md").write_text("Say hello.\n")
    (task_dir / "task.toml").write_text('version = "1.0"\n')
    return load_task(task_dir)


async def _agents(url: str, workdir: Path, episodes: int) -> tuple[float, float, int]:
    spec = resolve_model("openai-compatible/bench", base_url=url, api_key="bench")
    services = ModelServices(spec=spec)
    services.limiter.limit = episodes  # measure the harness, not AIMD
    task = _task(workdir)
    agent = ToolAgent()

    async def episode(i: int) -> int:
        logs = workdir / "logs" / str(i)
        logs.mkdir(parents=True)
        env = InstantEnv(task.sandbox_spec(), trial_id=str(i), run_id="bench")
        ctx = AgentContext(logs_dir=logs, timeout=600, workdir=task.workdir, services=services,
                           trial_id=str(i))  # fmt: skip
        outcome = await agent.run(task.instruction, env, ctx)
        return outcome.n_turns

    await episode(-1)  # warm up the connection pool
    cpu, wall = time.process_time(), time.monotonic()
    turns = sum(await asyncio.gather(*(episode(i) for i in range(episodes))))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    await services.close()
    return cpu, wall, turns


async def _raw_sdk(url: str, calls: int, concurrency: int) -> float:
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0,
                                http_client=openai.DefaultAioHttpClient())  # fmt: skip
    gate = asyncio.Semaphore(concurrency)
    messages: Any = [{"role": "user", "content": "Say hello."}]

    async def one() -> None:
        async with gate:
            await client.chat.completions.create(model="bench", messages=messages)

    await one()
    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    cpu = time.process_time() - cpu
    await client.close()
    return cpu / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        server = mockserver.start(
            workdir,
            mockserver.tool_script(args.turns, "bash", {"command": "echo hello"}),
            args.latency_ms,
        )
        url = server.openai_url
        try:
            cpu, wall, turns = asyncio.run(_agents(url, workdir, args.episodes))
            raw = asyncio.run(_raw_sdk(url, turns, args.episodes))
        finally:
            server.stop()
    per_turn_ms = cpu / turns * 1000
    print(
        f"episodes            {args.episodes} x {args.turns} turns, {args.latency_ms:g} ms latency"
    )
    print(f"turns               {turns} in {wall:.2f} s wall ({turns / wall:.0f} turns/s, "
          f"{args.episodes / wall:.1f} episodes/s)")  # fmt: skip
    print(f"harness CPU/turn    {per_turn_ms:.2f} ms")
    print(f"raw SDK CPU/call    {raw * 1000:.2f} ms  (openai SDK + aiohttp, no harness)")
    print(f"ratio harness/raw   {per_turn_ms / (raw * 1000):.2f}x")
    print(f"ratio peer/harness  {PEER_CPU_MS_PER_TURN / per_turn_ms:.1f}x less CPU per turn than "
          f"the {PEER_CPU_MS_PER_TURN:g} ms/turn peer")  # fmt: skip


if __name__ == "__main__":
    main()
