"""`--workers N` (issue 13): units run in worker processes, the parent alone keeps
the store. A batch's outputs are the same with one worker and with two, apart
from timings and ids; interrupts, resume and a dead worker lose nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helios import ParallelRunner
from helios.engine.batch import BatchService
from helios.engine.config import ConcurrencyConfig
from helios.engine.store import RunStore
from helios.errors import ConfigError
from helios.events import Event, TrialStarted
from helios.testing.mock_llm import MockLLMServer

from .conftest import TaskMaker, helios_cmd
from .sandbox_helpers import until
from .test_tool_agent import FAST_RETRIES, KEY, SCRIPT
from .thin_door import PromptDoor, PromptUnit

#: what differs between two runs of the same batch by design
VOLATILE = {
    "started_at", "finished_at", "duration", "duration_seconds", "timings", "model_seconds",
    "created_at", "run_id", "timestamp", "task_paths", "output_dir",
    "seconds",  # run.json's time across resumes
    "workers",  # run.json records the processes asked for
    "processes",  # and so does its saved config (`config.concurrency`)
    "invocation",  # a record's spend names the invocation that wrote it (spend.jsonl's)
}  # fmt: skip


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _outputs(run_dir: Path) -> dict[str, Any]:
    """Every file of a run folder, JSON normalized; results.jsonl in id order."""
    found: dict[str, Any] = {}
    for path in sorted(run_dir.rglob("*")):
        # spend.jsonl: the running totals of the model calls, as their timing made them
        if not path.is_file() or path.name in (".lock", "spend.jsonl"):
            continue
        rel = str(path.relative_to(run_dir))
        text = path.read_text("utf-8", errors="replace")
        if path.suffix == ".jsonl":
            records = [_normal(json.loads(line)) for line in text.splitlines()]
            found[rel] = sorted(records, key=lambda r: json.dumps(r, sort_keys=True))
        elif path.suffix == ".json":
            found[rel] = _normal(json.loads(text))
        else:
            found[rel] = text
    return found


def _batch(server: MockLLMServer, tasks: Path, out: Path, workers: int) -> Path:
    runner = ParallelRunner(
        tasks, model="openai-compatible/scripted", base_url=server.openai_base_url,
        api_key=KEY, output_dir=out, show_progress=False, provider="local",
        n_concurrent=4, n_attempts=2, retry_policy=FAST_RETRIES, workers=workers,
    )  # fmt: skip
    batch = asyncio.run(runner.run())
    assert batch.output_dir is not None and batch.passed == batch.total_tasks
    return batch.output_dir


@pytest.mark.usefixtures("need_bwrap")
def test_outputs_are_the_same_with_one_and_two_workers(examples_copy: Path, tmp_path: Path) -> None:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        one = _outputs(_batch(server, examples_copy, tmp_path / "one", workers=1))
        two = _outputs(_batch(server, examples_copy, tmp_path / "two", workers=2))
    assert len(one) > 50  # result, config, trajectory, verifier files of 16 trials
    assert one.keys() == two.keys()
    for name in one:
        assert one[name] == two[name], name


def _prompt_service(tmp_path: Path, workers: int, n: int = 3) -> BatchService[Any, Any]:
    store = RunStore.create(tmp_path / f"run{workers}", {"run_id": "w"})
    return BatchService(door=PromptDoor(delay=0.05), store=store,
                        concurrency=ConcurrencyConfig(in_flight=n, processes=workers))  # fmt: skip


def test_sharded_batch_records_every_unit_once_and_emits_events(tmp_path: Path) -> None:
    units = [PromptUnit(f"prompt {i} {'good' if i % 2 else 'bad'}", i) for i in range(40)]
    events: list[Any] = []
    service = _prompt_service(tmp_path, workers=2, n=6)
    service.emit = events.append
    assert service.store is not None
    try:
        asyncio.run(service.run(service.plan(units)))
        records = service.store.load_records()
    finally:
        service.store.close()
    assert sorted(records) == sorted(u.trial_id for u in units)
    assert service.counts.total == 40 and service.counts.passed == 20
    assert len(service.recorded) == 40
    started = [e for e in events if type(e).__name__ == "TrialStarted"]
    assert len(started) == 40  # the workers' events reach the parent's display
    lines = (service.store.run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 40


def test_keep_results_false_keeps_counts_only(tmp_path: Path) -> None:
    units = [PromptUnit(f"p{i} good", i) for i in range(10)]
    service = _prompt_service(tmp_path, workers=1)
    service.keep_results = False
    assert service.store is not None
    try:
        asyncio.run(service.run(service.plan(units)))
    finally:
        service.store.close()
    assert service.recorded == [] and service.counts.total == 10 == service.counts.passed


@pytest.mark.usefixtures("need_bwrap")
def test_interrupted_sharded_batch_resumes_without_loss_or_duplicates(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    for i in range(24):
        make_task(f"t{i:02d}", solve=f"sleep 0.{3 + i % 5}\n")
    out = tmp_path / "out"
    base = ["batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
            "-n", "4", "--workers", "2", "-q", "-o", str(out)]  # fmt: skip
    proc = subprocess.Popen(helios_cmd(*base), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(out.glob("batch_*/0*/result.json"))) < 4:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-500:]
    (run_dir,) = out.glob("batch_*")
    done_before = len((run_dir / "results.jsonl").read_text().splitlines())
    assert 0 < done_before < 24
    resumed = subprocess.run(helios_cmd(*base, "--resume", str(run_dir)), capture_output=True,
                             text=True, timeout=180)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-500:]
    ids = [json.loads(line)["trial_id"] for line in (run_dir / "results.jsonl").open()]
    assert len(ids) == len(set(ids)) == 24
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["total_tasks"] == 24 and summary["passed"] == 24


def test_a_killed_worker_s_units_are_recorded_as_errors(tmp_path: Path) -> None:
    units = [PromptUnit(f"slow {i} good", i) for i in range(12)]
    service = _prompt_service(tmp_path, workers=2, n=4)
    service.door = PromptDoor(delay=0.4)
    assert service.store is not None
    started: set[str] = set()  # the trials the workers said they started

    def seen(event: Event) -> None:
        if isinstance(event, TrialStarted):
            started.add(event.trial_id)

    service.emit = seen

    async def go() -> None:
        task = asyncio.create_task(service.run(service.plan(units)))

        async def both_busy() -> bool:  # n=4 over two workers: two units in each
            return len(started) >= 4

        await until(both_busy, "the two workers started four units")
        children = _own_children()
        assert len(children) == 2
        os.kill(children[0], signal.SIGKILL)
        await task

    try:
        asyncio.run(go())
        records = service.store.load_records()
    finally:
        service.store.close()
    statuses = [r["status"] for r in records.values()]
    assert len(records) == 12  # every unit recorded once: run, or lost with its worker
    assert 0 < statuses.count("error") <= 4 and statuses.count("passed") >= 8


def _children(pid: int) -> list[int]:
    """`pid`'s children, whichever of its threads started them."""
    found: list[int] = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:  # a thread that ended meanwhile
            continue
    return found


#: the children pytest itself had before each test: an earlier test's (under xdist, a
#: worker runs many modules) are not this test's
_before: set[int] = set()


@pytest.fixture(autouse=True)
def _children_before() -> None:
    _before.clear()
    _before.update(_children(os.getpid()))


def _own_children() -> list[int]:
    """The children this test started in pytest's own process."""
    return [pid for pid in _children(os.getpid()) if pid not in _before]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"  # a zombie has stopped: it waits to be reaped


@pytest.mark.usefixtures("need_bwrap")
def test_workers_of_a_killed_batch_stop_their_sandboxes_at_once(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    """kill -9 of the parent: nobody would record the workers' trials, so they stop
    them and their sandboxes now, not after the agents' 60 s."""
    for i in range(4):
        make_task(f"t{i}", solve="sleep 60\n")
    sandboxes = Path(tempfile.mkdtemp(prefix="helios-killed-parent-"))
    sandboxes.chmod(0o711)  # the sandbox user passes through, as through /tmp
    out = tmp_path / "out"
    proc = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                   "oracle", "-n", "4", "--workers", "2", "-q", "-o", str(out)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "HELIOS_SANDBOX_DIR": str(sandboxes)},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(sandboxes.iterdir())) < 4:
        time.sleep(0.05)
    assert len(list(sandboxes.iterdir())) == 4  # every trial has its sandbox
    workers = _children(proc.pid)
    assert len(workers) == 2
    # The second worker, frozen, must not hold the first one's link to the parent
    # open (it was started after it): the first one sees the death by itself.
    os.kill(workers[1], signal.SIGSTOP)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _alive(workers[0]):
        time.sleep(0.1)
    os.kill(workers[1], signal.SIGCONT)
    assert not _alive(workers[0])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (any(map(_alive, workers)) or list(sandboxes.iterdir())):
        time.sleep(0.1)
    assert not any(map(_alive, workers)) and list(sandboxes.iterdir()) == []
    sandboxes.rmdir()


@pytest.mark.usefixtures("need_bwrap")
@pytest.mark.parametrize("after", [0.0, 0.05, 0.3])
def test_workers_forked_before_the_loop_go_when_the_batch_is_killed_early(
    make_task: TaskMaker, tmp_path: Path, after: float
) -> None:
    """kill -9 of `helios batch` while its forked workers wait for their setup (or
    have just had it): each reads the end of its link and exits; none is left."""
    for i in range(4):
        make_task(f"t{i}", solve="sleep 60\n")
    proc = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                   "oracle", "-n", "4", "--workers", "2", "-q", "-o", str(tmp_path / "out")),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_children(proc.pid)) < 2:
        time.sleep(0.002)
    workers = _children(proc.pid)
    assert len(workers) == 2
    time.sleep(after)  # the instant of the kill, not a wait for a condition
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(map(_alive, workers)):
        time.sleep(0.05)
    assert not any(map(_alive, workers))


def _containers_of(pids: list[int]) -> list[str]:
    """The containers whose recorded owner is one of `pids` (host:pid:start)."""
    listed = subprocess.run(
        ["docker", "ps", "-a", "--filter", "label=helios.managed=true",
         "--format", '{{.ID}} {{.Label "helios.owner"}}'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [line.split()[0] for line in listed.stdout.splitlines()
            if len(line.split()) == 2 and int(line.split()[1].split(":")[-2]) in pids]  # fmt: skip


@pytest.mark.usefixtures("need_docker")
def test_workers_of_a_killed_docker_batch_remove_their_containers_at_once(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    """The same through the Engine API: the workers' containers are removed within
    seconds of the parent's kill -9, not after the agents' 60 s."""
    for i in range(4):
        make_task(f"t{i}", solve="sleep 60\n")
    proc = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "docker", "--agent",
                   "oracle", "-n", "4", "--workers", "2", "-q", "-o", str(tmp_path / "out")),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    workers: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_containers_of(workers)) < 4:
        workers = _children(proc.pid) if proc.poll() is None else workers
        time.sleep(0.2)
    assert len(_containers_of(workers)) == 4  # every trial has its container
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _containers_of(workers):
        time.sleep(0.2)
    assert _containers_of(workers) == []


# -- how workers start (issue 20): fresh interpreters, no fork of a running loop -------

SRC = Path(__file__).resolve().parent.parent / "src" / "helios"


def test_no_private_asyncio_api_and_no_fork_in_src() -> None:
    """Workers once were forked from inside the running loop and reset it with
    `asyncio.events._set_running_loop(None)`; nothing in Helios may do either again.
    The one fork left is `preforked`'s, before any loop, behind `_can_fork`."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text("utf-8")
        for needle in ("asyncio.events._", "_set_running_loop", "os.fork("):
            if needle in text:
                found.append(f"{path.relative_to(SRC)}: {needle} x{text.count(needle)}")
    assert found == ["engine/workers.py: os.fork( x1"]
    text = (SRC / "engine" / "workers.py").read_text("utf-8")
    fork_at = text.index("os.fork(")
    caller = text[text.rindex("\ndef ", 0, fork_at) :].split("(", 1)[0].strip()
    assert caller == "def _fork_worker"
    assert "if _can_fork():" in text and text.count("_fork_worker(") == 2


def test_preforked_forks_nothing_inside_a_loop_or_beside_a_thread() -> None:
    """A fork must find no loop running and no other thread: otherwise it forks nothing,
    and the batch spawns its workers."""
    import threading

    from helios.engine import workers

    async def in_loop() -> list[int]:
        with workers.preforked(2):
            spares = workers._spares.get()
            return [] if spares is None else [s.process.pid for s in spares]

    assert asyncio.run(in_loop()) == []
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        with workers.preforked(2):
            assert workers._spares.get() == []
    finally:
        release.set()
        other.join()
    assert _own_children() == []


_SPARES_SCRIPT = """
import json, os, threading
from pathlib import Path
from helios.engine import workers
from helios.engine.interrupts import SignalWatch

def children():
    me = os.getpid()
    return sorted(int(p) for p in Path(f"/proc/{me}/task/{me}/children").read_text().split())

def watches():
    return [t.name for t in threading.enumerate()].count("helios-signals")

seen = {}
with SignalWatch.installed():
    seen["watch_before"] = watches()
    with workers.preforked(2):
        spares = workers._spares.get()
        seen["pids"] = sorted(s.process.pid for s in spares)
        seen["children"] = children()
        seen["watch_during"] = watches()
    seen["children_after"] = children()
    seen["codes"] = [s.process.returncode for s in spares]
    seen["watch_after"] = watches()
print(json.dumps(seen))
"""


def test_preforked_workers_not_taken_are_reaped_and_the_signal_watch_goes_on() -> None:
    """Two workers forked and never given a setup exit when the block ends (they read
    the end of their link); the signal watch's thread, stopped for the fork, runs again.
    In a fresh interpreter, as `helios` is: this one has threads of earlier tests."""
    done = subprocess.run([sys.executable, "-c", _SPARES_SCRIPT], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    seen = json.loads(done.stdout)
    assert len(seen["pids"]) == 2 and seen["children"] == seen["pids"]
    assert seen["watch_before"] == seen["watch_during"] == seen["watch_after"] == 1
    assert seen["children_after"] == [] and seen["codes"] == [0, 0]


def test_forked_workers_of_the_cli_hold_nothing_of_the_parent(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    """`helios batch --workers 2` forks its workers before its loop starts: they are
    the CLI's children, not `python -c`, and hold, besides the standard streams, only
    their own link and what they opened since: not the run's lock, not the other
    worker's link, not the signal watch's pipe, not a descriptor the CLI inherited."""
    for i in range(4):
        make_task(f"t{i}", solve="sleep 2; touch /app/ok\n")
    out = tmp_path / "out"
    inherited_read, inherited_write = os.pipe()
    proc = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                   "-n", "4", "--workers", "2", "-q", "-o", str(out)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(inherited_write,),
    )  # fmt: skip
    os.close(inherited_write)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(out.glob("batch_*/001_*")):
            time.sleep(0.02)
        workers = _children(proc.pid)
        assert len(workers) == 2
        parent = _open_files(proc.pid)
        ours = {t for fd, t in parent.items() if fd > 2 and not t.startswith("anon_inode:")}
        inherited = os.readlink(f"/proc/self/fd/{inherited_read}")
        cli_argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        for pid in workers:
            assert Path(f"/proc/{pid}/cmdline").read_bytes() == cli_argv  # forked
            files = _open_files(pid)
            assert inherited not in files.values()
            shared = {fd: t for fd, t in files.items() if fd > 2 and t in ours}
            assert shared == {}
            assert not [t for t in files.values() if ".lock" in t or "results.jsonl" in t]
        _, stderr = proc.communicate(timeout=120)
    finally:
        os.close(inherited_read)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    summary = json.loads(next(out.glob("batch_*/batch_summary.json")).read_text())
    assert summary["passed"] == 4


def _open_files(pid: int | str) -> dict[int, str]:
    """What a process has open, by descriptor (sockets and pipes by their inode)."""
    found = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            found[int(fd.name)] = os.readlink(fd)
    return found


def test_workers_are_fresh_interpreters_holding_nothing_of_the_parent(tmp_path: Path) -> None:
    """A worker is `python -c` holding, besides its standard streams, nothing the
    parent has open: not the run's lock or results, not the parent's ends of the
    workers' sockets (a fork would have had them all), only its own end of its link."""
    units = [PromptUnit(f"slow {i} good", i) for i in range(8)]
    service = _prompt_service(tmp_path, workers=2, n=4)
    service.door = PromptDoor(delay=0.4)
    assert service.store is not None
    started: set[str] = set()

    def on_event(event: Event) -> None:
        if isinstance(event, TrialStarted):
            started.add(event.trial_id)

    service.emit = on_event
    seen: dict[int, tuple[list[bytes], dict[int, str]]] = {}
    parent: dict[int, str] = {}

    async def go() -> None:
        task = asyncio.create_task(service.run(service.plan(units)))

        async def both_busy() -> bool:
            return len(started) >= 4

        await until(both_busy, "the two workers started four units")
        parent.update(_open_files("self"))
        for pid in _own_children():
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            seen[pid] = (argv[:2], _open_files(pid))
        await task

    try:
        asyncio.run(go())
    finally:
        service.store.close()
    assert len(seen) == 2
    ours = {target for target in parent.values() if not target.startswith("anon_inode:")}
    for argv, files in seen.values():
        assert argv == [sys.executable.encode(), b"-c"]
        shared = {fd: target for fd, target in files.items() if fd > 2 and target in ours}
        assert shared == {}
        assert not [t for t in files.values() if t.startswith(str(service.store.run_dir))]


@dataclass
class _ScriptDoor(PromptDoor):
    """A door as a script would define it: its class lives in `__main__`."""


_ScriptDoor.__module__ = "__main__"


def test_a_door_of_the_script_being_run_is_refused_before_any_worker_starts(
    tmp_path: Path,
) -> None:
    service = _prompt_service(tmp_path, workers=2)
    service.door = _ScriptDoor()
    assert service.store is not None
    try:
        with pytest.raises(ConfigError, match="_ScriptDoor is defined in __main__"):
            asyncio.run(service.run(service.plan([PromptUnit(f"p{i}", i) for i in range(4)])))
    finally:
        service.store.close()
    assert _own_children() == []


@pytest.mark.usefixtures("need_bwrap")
@pytest.mark.parametrize("after", [0.0, 0.1, 0.3])
def test_ctrl_c_while_the_workers_start_exits_promptly_and_quietly(
    make_task: TaskMaker, tmp_path: Path, after: float
) -> None:
    """A Ctrl-C at the terminal reaches the whole process group, workers still
    importing included (`after` seconds into their start, which takes about half a
    second): the batch exits 130 within seconds, with no traceback."""
    for i in range(4):
        make_task(f"t{i}", solve="sleep 30\n")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                   "-n", "4", "--workers", "2", "-q", "-o", str(out)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_children(proc.pid)) < 2:
        time.sleep(0.005)
    workers = _children(proc.pid)
    assert len(workers) >= 2  # the two workers (a short-lived probe child may be there too)
    time.sleep(after)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-500:]
    assert time.monotonic() - started < 15
    assert b"Traceback" not in stderr, stderr.decode()[-2000:]
    # Forked before the loop, they may still wait for their setup when a Ctrl-C during
    # planning ends the batch at once: each reads the end of its link and goes.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(map(_alive, workers)):
        time.sleep(0.02)
    assert not any(map(_alive, workers))


#: registered in the parent only: a worker must redact it all the same
WORKER_SECRET = "sk-parent-only-secret-4242"


class _EchoingDoor(PromptDoor):
    """Each result carries a line that names the parent's secret, redacted where the
    unit ran (as a provider's error echoing a key is, in `ErrorInfo`)."""

    async def run_unit(self, unit: PromptUnit, ctx: Any, slot: Any) -> dict[str, Any]:
        from helios.secrets import redact

        result = await super().run_unit(unit, ctx, slot)
        return {**result, "echo": redact(f"key {WORKER_SECRET}"), "pid": os.getpid()}


def test_workers_redact_the_secrets_registered_in_the_parent(tmp_path: Path) -> None:
    from helios.secrets import register_secret

    register_secret(WORKER_SECRET)
    service = _prompt_service(tmp_path, workers=2, n=2)
    service.door = _EchoingDoor()
    assert service.store is not None
    try:
        asyncio.run(service.run(service.plan([PromptUnit(f"p{i} good", i) for i in range(4)])))
        records = service.store.load_records()
    finally:
        service.store.close()
    assert len(records) == 4
    assert {r["echo"] for r in records.values()} == {"key [REDACTED]"}
    assert os.getpid() not in {r["pid"] for r in records.values()}  # they ran in workers


class _CountingDoor(PromptDoor):
    """Each result names the tools a toolset registered in the parent gives, as seen
    where the unit ran."""

    async def run_unit(self, unit: PromptUnit, ctx: Any, slot: Any) -> dict[str, Any]:
        from helios.agents.toolsets.registry import get_toolset

        result = await super().run_unit(unit, ctx, slot)
        tools = get_toolset("parent-only").tool_names()
        return {**result, "tools": tools, "pid": os.getpid()}


def _parent_only_toolset(*factories: Any) -> Any:
    from helios.agents.toolsets.base import Toolset

    return Toolset("parent-only", "registered by code in the parent", factories)


def test_workers_have_the_toolsets_registered_in_the_parent(tmp_path: Path) -> None:
    """`register_toolset` in the caller's process reaches every worker (the benchmarks'
    trivial workload registers its no-op tool so)."""
    from helios.agents.tools import SubmitTool
    from helios.agents.toolsets.registry import _registered, register_toolset

    register_toolset(_parent_only_toolset(SubmitTool))
    service = _prompt_service(tmp_path, workers=2, n=2)
    service.door = _CountingDoor()
    assert service.store is not None
    try:
        asyncio.run(service.run(service.plan([PromptUnit(f"p{i} good", i) for i in range(4)])))
        records = service.store.load_records()
    finally:
        service.store.close()
        _registered.pop("parent-only", None)
    assert len(records) == 4
    assert [r["tools"] for r in records.values()] == [["submit"]] * 4
    assert os.getpid() not in {r["pid"] for r in records.values()}


def test_a_registered_toolset_a_worker_cannot_get_is_refused_before_any_worker_starts(
    tmp_path: Path,
) -> None:
    from helios.agents.tools import SubmitTool
    from helios.agents.toolsets.registry import _registered, register_toolset

    register_toolset(_parent_only_toolset(lambda: SubmitTool()))
    service = _prompt_service(tmp_path, workers=2)
    assert service.store is not None
    try:
        with pytest.raises(ConfigError, match="registered toolset 'parent-only' cannot be sent"):
            asyncio.run(service.run(service.plan([PromptUnit(f"p{i}", i) for i in range(4)])))
    finally:
        service.store.close()
        _registered.pop("parent-only", None)
    assert _own_children() == []


def test_a_worker_unsets_its_wakeup_fd_before_its_loop_closes() -> None:
    # Python 3.11's loop closes its self-pipe before it removes its signal handlers: a
    # Ctrl-C in between wrote to the closed pipe ("Exception ignored ... Bad file
    # descriptor", seen in CI). The worker puts its signals back before that.
    code = textwrap.dedent("""
        import asyncio, os, signal
        from helios.engine._worker_side import _quiet_signals

        def peek():
            fd = signal.set_wakeup_fd(-1)
            signal.set_wakeup_fd(fd)
            return fd

        async def body():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, lambda: None)
            assert peek() != -1
            _quiet_signals(loop)
            assert peek() == -1
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

        asyncio.run(body())
        os.kill(os.getpid(), signal.SIGINT)  # after the loop: ignored, nothing printed
        print("done")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert done.stderr == ""
