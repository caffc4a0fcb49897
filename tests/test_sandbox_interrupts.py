"""Interrupts leave no sandbox behind (issue 9).

A cancel that lands while asyncio is still starting a process (CPython
gh-103847) used to orphan the bwrap sandbox's init. Here: hundreds of cancels
at random instants around the spawn, in process; then SIGINT/SIGTERM at random
instants into a real `helios batch --provider local`: exit 130, and no process
and no sandbox folder left, without running `helios cleanup`.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from helios.environments.local import LocalEnvironment
from helios.environments.local.cleanup import sandbox_processes
from helios.environments.spec import SandboxSpec

from .conftest import TaskMaker, helios_cmd
from .sandbox_helpers import until

pytestmark = pytest.mark.usefixtures("need_bwrap")
#: signal deliveries to a real batch; raise it to measure (e.g. 100)
ROUNDS = int(os.environ.get("HELIOS_INTERRUPT_ROUNDS", "6"))
#: cancels of a command at a random instant of its spawn; raise it to measure
CANCELS = int(os.environ.get("HELIOS_INTERRUPT_CANCELS", "40"))


def test_cancels_around_the_spawn_leave_no_sandbox_process() -> None:
    env = LocalEnvironment(SandboxSpec(), trial_id=uuid.uuid4().hex[:8], run_id="cancel")
    rng = random.Random(1)

    async def go() -> None:
        await env.start()
        holder = env._holder

        async def none_left() -> bool:
            return holder not in sandbox_processes().values()

        try:
            for _ in range(CANCELS):
                task = asyncio.create_task(env.exec("sleep 30"))
                await asyncio.sleep(rng.uniform(0, 0.01))
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            # (a kill may still be in flight: it lands)
            await until(none_left, "every cancelled command's bwrap has ended")
        finally:
            await env.stop()

    asyncio.run(go())


def _processes_with(marker: str) -> list[str]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(cmdline.decode(errors="replace")[:200])
    return found


def test_signals_at_random_instants_exit_130_and_leave_nothing(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    for i in range(40):
        make_task(f"t{i:02d}", solve=f"sleep 0.{i % 5}\n")
    tasks = tmp_path / "tasks"
    # Sandboxes of these batches live under their own TMPDIR: anything found there is theirs.
    sandbox_tmp = Path(tempfile.mkdtemp(prefix="helios-interrupts-"))
    sandbox_tmp.chmod(0o711)  # the sandbox user passes through, as through /tmp
    env = {**os.environ, "HELIOS_SANDBOX_DIR": str(sandbox_tmp)}
    rng = random.Random(20)
    failures: list[str] = []
    for round_ in range(ROUNDS):
        out = tmp_path / f"out{round_}"
        proc = subprocess.Popen(
            helios_cmd("batch", str(tasks), "--provider", "local", "--agent", "oracle",
                       "-n", "4", "-q", "-o", str(out)),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        _wait_for_trials(out, proc)
        time.sleep(rng.uniform(0.0, 1.5))
        chosen = signal.SIGINT if round_ % 2 == 0 else signal.SIGTERM
        proc.send_signal(chosen)
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            failures.append(f"round {round_}: hung after {chosen.name}")
            continue
        if proc.returncode != 130 or "Traceback" in stderr:
            tail = stderr[-300:]
            failures.append(f"round {round_}: {chosen.name} exit {proc.returncode}: {tail}")
        left = _processes_with(str(sandbox_tmp))
        folders = [p.name for p in sandbox_tmp.iterdir()]
        if left or folders:
            failures.append(f"round {round_}: left {left} {folders}")
    sandbox_tmp.rmdir()
    assert failures == [], failures


def _wait_for_trials(out: Path, proc: subprocess.Popen[str]) -> None:
    """Until the batch has started trials (interrupts before that are the CLI's, not
    the sandboxes')."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(out.glob("batch_*/0*/config.json")):
            return
        time.sleep(0.02)
