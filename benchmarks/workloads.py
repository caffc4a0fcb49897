"""The benchmarks' workloads. Each runs in a fresh process (`run.py --child`), so
its CPU, its children's (sandboxes, workers) and its peak RSS are its own.

A workload gets the mock server's URL and the run's parameters, and returns
what it did: episodes done and failed. The child measures the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import tempfile
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, overload

from rich.console import Console

from helios.agents.tools import SubmitTool
from helios.agents.toolsets import Tool, Toolset, register_toolset
from helios.agents.toolsets.base import ToolContext, ToolOutcome
from helios.engine.batch import BatchService, Verdict
from helios.engine.config import ConcurrencyConfig
from helios.engine.episode import EpisodeContext, EpisodeSpec, run_episode
from helios.engine.scheduler import Slot
from helios.engine.store import RunStore
from helios.environments import NULL_SPEC
from helios.failures import ErrorInfo
from helios.models.services import ModelOptions
from helios.models.tools import ToolSpec

T = TypeVar("T")

TRIVIAL_TOOLSET = "bench-trivial"


@dataclass(frozen=True)
class Params:
    episodes: int
    concurrency: int
    turns: int
    latency_ms: float
    url: str
    workers: int
    api: str = "openai"

    @property
    def model(self) -> str:
        return "anthropic/claude-bench" if self.api == "anthropic" else "openai-compatible/bench"

    def model_options(self) -> ModelOptions:
        base = self.url if self.api == "anthropic" else self.url + "/v1"
        return ModelOptions(model=self.model, base_url=base, api_key="bench")


# -- trivial tool: the engine's own cost per turn, no sandbox -------------------------
class NoopTool(Tool):
    spec: ClassVar[ToolSpec] = ToolSpec(
        name="noop", description="Does nothing.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    )  # fmt: skip

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome("ok")


def register_trivial() -> None:
    register_toolset(Toolset(TRIVIAL_TOOLSET, "benchmarks", (NoopTool, SubmitTool)))


@dataclass(frozen=True)
class BenchUnit:
    index: int
    trial_id: str

    @classmethod
    def make(cls, index: int) -> BenchUnit:
        return cls(index, hashlib.sha256(f"bench:{index}".encode()).hexdigest()[:16])

    @property
    def folder(self) -> None:
        return None

    @property
    def label(self) -> str:
        return f"episode {self.index}"


class BenchUnits(Sequence[BenchUnit]):
    """N units made on demand: the door's input costs no memory, so what grows
    with N is Helios's own."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, index: int) -> BenchUnit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[BenchUnit]: ...
    def __getitem__(self, index: int | slice) -> BenchUnit | Sequence[BenchUnit]:
        if isinstance(index, slice):
            return [BenchUnit.make(i) for i in range(self.n)[index]]
        if not -self.n <= index < self.n:
            raise IndexError(index)
        return BenchUnit.make(index % self.n)


class TrivialDoor:
    """A door that keeps one record per episode and no files."""

    writes_files = False

    async def run_unit(self, unit: BenchUnit, ctx: EpisodeContext, slot: Slot) -> dict[str, Any]:
        spec = EpisodeSpec(
            trial_id=unit.trial_id, label=unit.label, folder=None, sandbox=NULL_SPEC,
            provider="null", agent="tool", agent_settings={"toolsets": [TRIVIAL_TOOLSET]},
            instruction=f"Episode {unit.index}: call noop, then submit.", agent_timeout=600,
        )  # fmt: skip
        episode = await run_episode(spec, ctx, slot)
        status = "error" if episode.error or episode.agent_error else "passed"
        return {"trial_id": unit.trial_id, "status": status, "turns": episode.turns}

    def write_files(self, unit: BenchUnit, result: dict[str, Any]) -> None:
        return None

    def to_record(self, unit: BenchUnit, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def crashed(self, unit: BenchUnit, error: ErrorInfo) -> dict[str, Any]:
        return {"trial_id": unit.trial_id, "status": "error", "turns": 0}

    def verdict(self, result: dict[str, Any]) -> Verdict:
        return Verdict(passed=result["status"] == "passed", detail=result["status"])


async def _trivial(params: Params, out: Path) -> dict[str, Any]:
    register_trivial()
    services = params.model_options().open()
    services.limiter.limit = services.limiter.maximum = max(512.0, params.concurrency)
    store = RunStore.create(out / "run", {"run_id": "bench", "kind": "bench"})
    service: BatchService[BenchUnit, dict[str, Any]] = BatchService(
        door=TrivialDoor(), store=store, services=services,
        concurrency=ConcurrencyConfig(in_flight=params.concurrency, processes=params.workers),
        keep_results=False,
    )  # fmt: skip
    try:
        plan = service.plan(BenchUnits(params.episodes))
        await service.run(plan)
    finally:
        store.close()
        await services.close()
    return {"done": service.counts.total, "failed": service.counts.total - service.counts.passed}


def _as_the_cli(main: Coroutine[Any, Any, T], workers: int) -> T:
    """`asyncio.run(main)` as `helios batch` runs it (`cli.common.run_coroutine`): the
    heap of its imports frozen (`frozen_heap`), then its workers forked before the
    loop starts (`preforked`); a checkout from before either does without it."""
    try:
        from helios.engine.workers import preforked
    except ImportError:
        return asyncio.run(main)
    try:
        from helios.cli.common import frozen_heap
    except ImportError:
        frozen_heap = contextlib.nullcontext
    with frozen_heap(), preforked(workers):
        return asyncio.run(main)


def trivial(params: Params, out: Path) -> dict[str, Any]:
    return _as_the_cli(_trivial(params, out), params.workers)


# -- bash through the task door, in a local or docker sandbox --------------------------
def _task(root: Path) -> Path:
    task = root / "task"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    (task / "instruction.md").write_text("Run `echo hello` a few times, then submit.\n")
    (task / "task.toml").write_text('version = "1.0"\n[environment]\ncpus = 1\nmemory_mb = 512\n')
    return task


def task_door(params: Params, out: Path, provider: str) -> dict[str, Any]:
    from helios.tasks.runner import ParallelRunner
    from helios.tasks.settings import TaskBatchSettings

    # (workers only when asked: a checkout from before --workers has no such setting)
    more = {"workers": params.workers} if params.workers != 1 else {}
    settings = TaskBatchSettings.from_kwargs(
        n_concurrent=params.concurrency, n_attempts=params.episodes, agent="tool",
        provider=provider, output_dir=out / "runs", quiet=True, show_progress=False, **more,
    )  # fmt: skip
    settings.models = params.model_options()
    console = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    runner = ParallelRunner([_task(out)], settings=settings, console=console)
    batch = _as_the_cli(runner.run(), params.workers)
    done = len(batch.results)
    return {"done": done, "failed": done - sum(1 for r in batch.results if r.status == "passed")}


def local(params: Params, out: Path) -> dict[str, Any]:
    return task_door(params, out, "local")


def docker(params: Params, out: Path) -> dict[str, Any]:
    return task_door(params, out, "docker")


# -- datagen: prompts through `helios generate`'s runner --------------------------------
def datagen(params: Params, out: Path) -> dict[str, Any]:
    from helios.datagen import BatchRunner

    dataset = out / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"Task {i}: run a command."}) + "\n"
                               for i in range(params.episodes)))  # fmt: skip
    runner = BatchRunner(
        dataset, batch_size=50, run_name="bench", model="mock", base_url=params.url + "/v1",
        num_workers=4, distribution="terminal_only", output_dir=out / "data",
        concurrency=params.concurrency, provider="local", quiet=True,
        console=Console(file=open("/dev/null", "w")),  # noqa: SIM115
    )  # fmt: skip
    result = runner.run()
    # a prompt discarded for having no reasoning (the script sends none) still ran
    return {"done": result.rows + result.discarded + result.failed, "failed": result.failed}


# -- tool-call tests: text mode against the same server ---------------------------------
BOOK = {"type": "function", "function": {
    "name": "book_flight", "description": "Book a flight",
    "parameters": {"type": "object", "properties": {"to_city": {"type": "string"}}}}}  # fmt: skip


def toolcalls(params: Params, out: Path) -> dict[str, Any]:
    from helios import toolcalls as tc
    from helios.toolcalls.evaluators import ExactEvaluator

    agent = tc.ModelAgent(model="openai-compatible/bench", tools=[BOOK],
                          base_url=params.url + "/v1", api_key="bench")  # fmt: skip
    prompts = [f"Book a flight to LA, please ({i})" for i in range(10)]
    result = asyncio.run(tc.run_concurrent(
        prompts, synthesizer=None, agent=agent, evaluator=ExactEvaluator(),
        expect=[tc.tool_call("book_flight", to_city="LA")],
        runs=max(1, params.episodes // len(prompts)), max_concurrency=params.concurrency,
        show_progress=False,
    ))  # fmt: skip
    return {"done": result.total, "failed": result.failed_count}


# -- resume: the store's load path with many completed records ---------------------------
def _record_line(unit: BenchUnit) -> bytes:
    """A record the size and shape of a task trial's (about 1 KB)."""
    record = {
        "trial_id": unit.trial_id, "task_name": f"task-{unit.index % 1000}",
        "task_path": f"/data/tasks/task-{unit.index % 1000}", "attempt": 1 + unit.index // 1000,
        "agent": "tool", "model": "openai-compatible/bench", "provider": "local",
        "status": "passed", "reward": 1.0, "rewards": {"reward": 1.0}, "error": None,
        "agent_error": None, "teardown_error": None, "turns": 5, "duration": 1.234,
        "timings": {"environment": 0.01, "agent": 1.1, "verifier": 0.1, "teardown": 0.02},
        "usage": {"input_tokens": 1234, "output_tokens": 56, "cache_read_tokens": 0,
                  "cache_write_tokens": 0, "reasoning_tokens": 0, "calls": 5, "retries": 0,
                  "cost_usd": 0.0, "model_seconds": 0.5},
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "finished_at": "2026-01-01T00:00:01.234+00:00",
        "folder": f"{unit.index % 1000:03d}_task/attempt_{1 + unit.index // 1000:04d}",
        "steps": None, "reward_strategy": None,
    }  # fmt: skip
    return json.dumps(record).encode() + b"\n"


def resume(params: Params, out: Path) -> dict[str, Any]:
    """Time from opening a run with `episodes` completed records to its plan (the
    pending units known, leftovers moved aside): what a resume waits before its
    first new unit starts. The units are the door's input, made beforehand."""
    import time

    units = [BenchUnit.make(i) for i in range(params.episodes + 1000)]
    run = out / "run"
    RunStore.create(run, {"run_id": "bench", "kind": "bench"}).close()
    with (run / "results.jsonl").open("wb") as handle:
        for start in range(0, params.episodes, 10_000):
            handle.write(b"".join(_record_line(u) for u in units[start : start + 10_000]))
    size = (run / "results.jsonl").stat().st_size
    began = time.monotonic()
    store = RunStore.open_existing(run)
    try:
        service: BatchService[BenchUnit, dict[str, Any]] = BatchService(TrivialDoor(), store)
        plan = service.plan(units)
        seconds = time.monotonic() - began
    finally:
        store.close()
    return {"done": len(plan.finished_ids), "failed": 0, "pending": len(plan.pending),
            "start_seconds": seconds, "file_mb": size / 1e6}  # fmt: skip


# -- sandbox lifecycles -------------------------------------------------------------------
def localstart(params: Params, out: Path) -> dict[str, Any]:
    """Sequential local sandbox start + stop, and start + first command + stop."""
    import time

    from helios.environments.local import LocalEnvironment
    from helios.environments.spec import SandboxSpec

    async def cycle(first_exec: bool) -> float:
        env = LocalEnvironment(SandboxSpec(), trial_id="bench", run_id="bench")
        began = time.monotonic()
        await env.start()
        if first_exec:
            await env.exec("true")
        await env.stop()
        return time.monotonic() - began

    async def measure() -> tuple[float, float]:
        await cycle(True)  # warm caches
        bare = [await cycle(False) for _ in range(params.episodes)]
        with_exec = [await cycle(True) for _ in range(params.episodes)]
        return sorted(bare)[len(bare) // 2], sorted(with_exec)[len(with_exec) // 2]

    bare, with_exec = asyncio.run(measure())
    return {"done": 2 * params.episodes, "failed": 0, "start_stop_ms": bare * 1000,
            "start_exec_stop_ms": with_exec * 1000}  # fmt: skip


def dockerstart(params: Params, out: Path) -> dict[str, Any]:
    """`episodes` docker trials (nop agent, the task's verifier) at `concurrency`,
    against as many bare `docker run --rm IMAGE true` at once."""
    import subprocess
    import time

    from helios.tasks.runner import ParallelRunner
    from helios.tasks.settings import TaskBatchSettings

    def bare() -> tuple[float, int]:
        began = time.monotonic()
        procs = [subprocess.Popen(["docker", "run", "--rm", "--network", "none",
                                   "debian:bookworm-slim", "true"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(params.episodes)]  # fmt: skip
        errors = sum(1 for p in procs if p.wait() != 0)
        return time.monotonic() - began, errors

    bare_wall, bare_errors = bare()
    settings = TaskBatchSettings.from_kwargs(
        n_concurrent=params.concurrency, n_attempts=params.episodes, agent="nop",
        provider="docker", output_dir=out / "runs", quiet=True, show_progress=False,
        max_starts=params.concurrency, workers=params.workers,
    )  # fmt: skip
    console = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    runner = ParallelRunner([_task(out)], settings=settings, console=console)
    began = time.monotonic()
    batch = _as_the_cli(runner.run(), params.workers)
    wall = time.monotonic() - began
    errors = sum(1 for r in batch.results if r.status == "error")
    return {"done": len(batch.results), "failed": errors, "bare_wall": bare_wall,
            "bare_errors": bare_errors, "trial_wall": wall}  # fmt: skip


# -- the process floor: what the machine allows, with no harness ------------------------
#: how many bare sandboxes run at once, and the processes each starts
FLOOR_AT_ONCE = 16
FLOOR_PROCESSES = 9


def floor(params: Params, out: Path) -> dict[str, Any]:
    """`episodes` bare `bwrap --unshare-all` sandboxes, FLOOR_AT_ONCE at a time, each
    running FLOOR_PROCESSES `/bin/true` (about what a trial starts): the machine's
    process floor, which a sandboxed-bash episode cannot beat."""
    import shutil
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit("the floor needs bwrap (apt-get install bubblewrap)")
    script = "; ".join(["/bin/true"] * FLOOR_PROCESSES)
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "/bin/sh", "-c", script]  # fmt: skip

    def one(_: int) -> bool:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False)  # fmt: skip
        return done.returncode == 0

    with ThreadPoolExecutor(FLOOR_AT_ONCE) as pool:
        results = list(pool.map(one, range(params.episodes)))
    return {"done": len(results), "failed": results.count(False)}


WORKLOADS = {
    "floor": floor, "trivial": trivial, "local": local, "docker": docker, "datagen": datagen,
    "toolcalls": toolcalls, "resume": resume, "localstart": localstart,
    "dockerstart": dockerstart,
}  # fmt: skip


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="helios-bench-"))
