"""The hostile catalogue (`hostile.py`) as task folders, run through the real task
door (`ParallelRunner`) with a canary key in the environment and a listener that
counts who reached the host."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.tasks.runner import ParallelRunner
from helios.tasks.summary import BatchResult

from .hostile import HOST_REWARD, KEY_CANARY, Context, Hostile, catalogue


def write_task(base: Path, hostile: Hostile, ctx: Context) -> Path:
    task = base / hostile.name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "environment" / "Dockerfile").write_text(
        f"FROM debian:bookworm-slim\nWORKDIR /app\n{hostile.dockerfile_extra}"
    )
    (task / "task.toml").write_text(
        'version = "1.0"\n[verifier]\ntimeout_sec = 60\n'
        f"[agent]\ntimeout_sec = {hostile.agent_timeout}\n"
        f"[environment]\ncpus = 1\nmemory_mb = {hostile.memory_mb}\n{hostile.toml_extra}"
    )
    (task / "instruction.md").write_text("Do the thing.\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + hostile.test)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + hostile.solve)
    for rel, text in hostile.files.items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(text)
    if hostile.prepare is not None:
        hostile.prepare(task, ctx)
    return task


def make_context(root: Path) -> Context:
    host_dir = root / "host"
    host_dir.mkdir(parents=True)
    (host_dir / "secret.txt").write_text("host-only secret\n")
    (host_dir / "reward.txt").write_text(HOST_REWARD + "\n")
    traversal = Path("/tmp") / f"helios-traversal-{uuid.uuid4().hex}"
    return Context(root=root, host_dir=host_dir, traversal_dir=traversal, port=0)


class Listener:
    """A TCP listener on 127.0.0.1 that counts who reached it."""

    def __init__(self, ctx: Context) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        ctx.port = self.sock.getsockname()[1]
        self.ctx = ctx
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.ctx.connections.append(1)
            conn.close()

    def close(self) -> None:
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()


def available(hostile: Hostile, provider: str) -> bool:
    return provider in hostile.providers and all(shutil.which(t) for t in hostile.needs)


@dataclass
class BatchOutcome:
    runner: ParallelRunner
    batch: BatchResult
    run_dir: Path
    records: dict[str, dict[str, Any]]
    ctx: Context
    hostiles: dict[str, Hostile]
    #: daytona: the sandboxes the loopback Daytona still had once the batch ended
    sandboxes_left: list[str] = field(default_factory=list)


def run_hostile_batch(root: Path, provider: str) -> BatchOutcome:
    ctx = make_context(root)
    listener = Listener(ctx)
    hostiles = {h.name: h for h in catalogue(ctx) if available(h, provider)}
    tasks = root / "tasks"
    for hostile in hostiles.values():
        write_task(tasks, hostile, ctx)
    runner = ParallelRunner(
        tasks, n_concurrent=4, agent="oracle", provider=provider, output_dir=root / "out",
        quiet=True, show_progress=False,
    )  # fmt: skip
    # the key must never reach a sandbox; apt in a docker build needs the host network
    variables = {"OPENAI_API_KEY": KEY_CANARY, "HELIOS_DOCKER_BUILD_NETWORK": "host"}
    saved = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        batch = asyncio.run(runner.run())
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        listener.close()
    assert runner.run_dir is not None
    lines = (runner.run_dir / "results.jsonl").read_text().splitlines()
    records = {r["task_name"]: r for r in map(json.loads, lines)}
    return BatchOutcome(runner, batch, runner.run_dir, records, ctx, hostiles)
