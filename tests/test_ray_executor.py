"""`--executor ray` (issue 23) on a real three-node Ray cluster on loopback.

The cluster (`tests/ray_cluster.py`: a head and two worker nodes with their own
`helios_slot` counts) runs in a network namespace that has only loopback, and so does
every driver (`helios batch` joins it with nsenter): Ray 2.60 turns 127.0.0.1 into
the machine's own interface address in the host's network, which tests must not use.
One cluster serves the whole module (a node takes seconds to start on 2 cores); the
test that kills a worker node runs after those that count on three nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from helios.cli.app import app
from helios.datagen.settings import GenerateSettings
from helios.environments.local.cleanup import remove_holder
from helios.tasks.settings import TaskBatchSettings

from .conftest import TaskMaker, helios_cmd, mock_llm_cmd
from .datagen.conftest import SCRIPT, cli_env, read_jsonl, write_dataset
from .test_resume_sweeps_sandboxes import _assert_gone, _mounted_sandboxes
from .test_workers import _outputs
from .waiting import wait_until

pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("need_bwrap")

HERE = Path(__file__).resolve().parent
KEY = "sk-ray-test-key"


@dataclass
class Cluster:
    address: str
    #: the pid of the process that holds the cluster, inside the namespace
    pid: int
    nodes: list[dict[str, Any]]
    #: HELIOS_SANDBOX_DIR of the nodes and the drivers
    sandboxes: Path
    env: dict[str, str]

    def cmd(self, *args: str) -> list[str]:
        """A command run inside the cluster's network namespace."""
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *args]

    @property
    def mounts(self) -> Path:
        """The nodes' mount table (their sandboxes' mounts are made there)."""
        return Path(f"/proc/{self.pid}/mountinfo")

    def on_nodes(self, *args: str) -> list[str]:
        """A command that sees the files the nodes see (the test's own are hidden)."""
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", f"--mount=/proc/{self.pid}/ns/mnt",
                "--", *args]  # fmt: skip

    def helios(self, *args: str) -> list[str]:
        return self.cmd(*helios_cmd(*args, "--executor", "ray", "--ray-address", self.address))

    def connections(self) -> list[str]:
        """The local and peer address of every TCP connection in the namespace."""
        shown = subprocess.run(self.cmd("ss", "-tnH"), capture_output=True, text=True,
                               check=True, timeout=30).stdout  # fmt: skip
        return [field for line in shown.splitlines() for field in line.split()[3:5]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from started_cluster(tmp_path_factory)


def started_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The three-node test cluster, for a module-scoped fixture (a module that uses it
    then runs whole on one xdist worker, with one cluster: tests/conftest.py).

    The nodes run in a mount namespace of their own, where the tests' folders (task
    folders, datasets, run folders) are hidden under an empty tmpfs: what a node needs
    must come through Ray, as on machines that share no file system."""
    if os.geteuid() != 0 or shutil.which("nsenter") is None:
        pytest.skip("a network namespace needs root and nsenter")
    sandboxes = Path(tempfile.mkdtemp(prefix="helios-ray-sandboxes-", dir="/tmp"))
    sandboxes.chmod(0o755)
    state = sandboxes.parent / f"{sandboxes.name}.json"
    path = os.pathsep.join(filter(None, [str(HERE.parent / "src"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "HELIOS_SANDBOX_DIR": str(sandboxes), "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": path}  # fmt: skip
    hidden = tmp_path_factory.getbasetemp()
    script = (f"ip link set lo up && mount -t tmpfs -o size=1m,mode=755 driver-only {hidden} "
              f"&& exec {sys.executable} {HERE / 'ray_cluster.py'} {state}")  # fmt: skip
    holder = subprocess.Popen(["unshare", "--net", "--mount", "sh", "-c", script], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)  # fmt: skip
    try:

        def ready() -> bool:
            assert holder.poll() is None, f"the cluster did not start: {_tail(holder)}"
            return state.exists()

        wait_until(ready, "the Ray cluster is up", within=180)
        found = json.loads(state.read_text())
        yield Cluster(found["address"], found["pid"], found["nodes"], sandboxes, env)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
        for leftover in sandboxes.iterdir():
            asyncio.run(remove_holder(leftover))
        shutil.rmtree(sandboxes, ignore_errors=True)
        state.unlink(missing_ok=True)


def _tail(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stderr is not None
    lines = proc.stderr.read().decode(errors="replace").splitlines()
    return "\n".join(line for line in lines if "network_util" not in line)[-2000:]


def _records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def _scratch(run_id: str) -> Path:
    """Where the nodes (this machine) keep the trial folders of a run while they run."""
    return Path(tempfile.gettempdir()) / "helios-ray" / run_id


def _no_scratch_left(run_dir: Path) -> None:
    """No node keeps the run's trial folders once it is done."""
    scratch = _scratch(json.loads((run_dir / "run.json").read_text())["run_id"])
    assert not scratch.exists(), sorted(str(p) for p in scratch.rglob("*"))


def _only_loopback(cluster: Cluster) -> None:
    addresses = cluster.connections()
    assert addresses  # the nodes are connected to the head
    loopback = ("127.0.0.1:", "[::ffff:127.0.0.1]:")  # the second: v4 on a v6 socket
    assert all(a.startswith(loopback) for a in addresses), addresses


def test_a_batch_on_three_nodes_writes_what_one_machine_writes(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    """The same files, and with a failed task under --fail-under the same exit code and
    the same line about it."""
    for i in range(6):
        make_task(f"t{i}", solve=f"echo {i} > /app/answer; ls /app\n",
                  test="cat /app/answer; echo 1 > /logs/verifier/reward.txt\n")  # fmt: skip
    make_task("bad", test="echo 0 > /logs/verifier/reward.txt\n")
    tasks = str(tmp_path / "tasks")
    common = ("--provider", "local", "--agent", "oracle", "-k", "2", "-n", "5", "-q",
              "--fail-under", "0.9")  # fmt: skip
    on_ray = subprocess.run(
        cluster.helios("batch", tasks, *common, "-o", str(tmp_path / "ray")),
        env=cluster.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    _only_loopback(cluster)
    # the nodes ran the trials without seeing the task folders: Ray brought them
    assert subprocess.run(cluster.on_nodes("ls", f"{tasks}/t0"), capture_output=True,
                          timeout=30).returncode != 0  # fmt: skip
    assert subprocess.run(cluster.cmd("ls", f"{tasks}/t0"), capture_output=True,
                          timeout=30).returncode == 0  # fmt: skip
    alone = subprocess.run(
        helios_cmd("batch", tasks, *common, "--workers", "1", "-o", str(tmp_path / "one")),
        env=cluster.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # --fail-under: 12 of 14 passed is under 90 %, on the cluster as on one machine
    assert alone.returncode not in (0, None), alone.stderr
    assert on_ray.returncode == alone.returncode, on_ray.stderr
    gate = [line for line in on_ray.stderr.splitlines() if "--fail-under" in line]
    assert gate == [line for line in alone.stderr.splitlines() if "--fail-under" in line]
    assert gate and "85.7%" in gate[0], on_ray.stderr
    (ray_dir,) = (tmp_path / "ray").iterdir()
    (one_dir,) = (tmp_path / "one").iterdir()
    ray_files, one_files = _outputs(ray_dir), _outputs(one_dir)
    # run.json says where the run ran, for `--resume RUN_DIR` alone; the rest is the same
    assert ray_files["run.json"].pop("executor") == "ray"
    assert ray_files["run.json"].pop("ray_address") == cluster.address
    # and so does its saved config (with the output folder each was given)
    on_ray, alone = ray_files["run.json"].pop("config"), one_files["run.json"].pop("config")
    assert on_ray["settings"]["executor"] == "ray" and alone["settings"]["executor"] == "local"
    assert on_ray["tasks"] == alone["tasks"] and on_ray["sandbox"] == alone["sandbox"]
    assert len(one_files) > 70  # config, result, oracle, verifier files of 14 trials
    assert ray_files.keys() == one_files.keys()
    for name in one_files:
        assert ray_files[name] == one_files[name], name
    statuses = {(r["task_name"], r["status"]) for r in _records(ray_dir)}
    assert statuses == {*((f"t{i}", "passed") for i in range(6)), ("bad", "failed")}


#: `ParallelRunner(..., executor="ray")` in a script (argv: tasks, output, address)
API_SCRIPT = """
import asyncio, sys
import ray
from helios import ParallelRunner

runner = ParallelRunner(sys.argv[1], provider="local", agent="oracle", n_concurrent=3,
                        output_dir=sys.argv[2], show_progress=False, executor="ray",
                        ray_address=sys.argv[3])
batch = asyncio.run(runner.run())
print(batch.passed, batch.total_tasks, ray.is_initialized())
"""


def test_parallel_runner_takes_the_ray_executor(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    for i in range(3):
        make_task(f"t{i}")
    done = subprocess.run(
        cluster.cmd(sys.executable, "-c", API_SCRIPT, str(tmp_path / "tasks"),
                    str(tmp_path / "out"), cluster.address),
        env=cluster.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # every trial passed, and the connection to the cluster is closed once it is done
    assert done.stdout.split() == ["3", "3", "False"]


#: a batch on the cluster with an event sink (argv: address): the events it saw
EVENTS_SCRIPT = """
import asyncio, sys
from collections import Counter
from helios.engine.batch import BatchService
from helios.engine.config import ConcurrencyConfig
from helios.testing.waiting_door import WaitingDoor, WaitingUnit

events = []
service = BatchService(door=WaitingDoor(1.0, 10), store=None, emit=events.append,
                       concurrency=ConcurrencyConfig(in_flight=5, executor="ray",
                                                     ray_address=sys.argv[1]))
asyncio.run(service.run(service.plan([WaitingUnit(i) for i in range(5)])))
print(sorted(Counter(type(e).__name__ for e in events).items()))
"""


def test_the_trials_events_reach_the_drivers_display(cluster: Cluster) -> None:
    done = subprocess.run(cluster.cmd(sys.executable, "-c", EVENTS_SCRIPT, cluster.address),
                          env=cluster.env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # each trial's phase, sent from its node, as well as the driver's own start and end
    expected = [("BatchPlanned", 1), ("PhaseChanged", 5), ("TrialFinished", 5),
                ("TrialStarted", 5)]  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == str(expected), done.stdout + done.stderr


def test_generate_on_three_nodes_writes_what_one_machine_writes(
    cluster: Cluster, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    port_file = tmp_path / "port"
    # The scripted model serves inside the cluster's namespace, on its 127.0.0.1.
    server = subprocess.Popen(cluster.cmd(*mock_llm_cmd(script, port_file, KEY)),
                              env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), "the model")
        url = f"http://127.0.0.1:{port_file.read_text().strip()}/v1"
        dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(6)])
        args = [f"--dataset_file={dataset}", "--batch_size=2", "--model=mock", f"--base_url={url}",
                f"--api_key={KEY}", "--num_workers=4", "--distribution=terminal_only",
                "--seed=7", "-q"]  # fmt: skip
        env = {**cli_env(), **{k: cluster.env[k] for k in ("HELIOS_SANDBOX_DIR", "PYTHONPATH")}}
        for name, where in (("ray", ("--executor", "ray", "--ray-address", cluster.address)),
                            ("one", ("--executor", "local"))):  # fmt: skip
            done = subprocess.run(
                cluster.cmd(*helios_cmd("generate", *args, "--run_name=r",
                                        f"--output_dir={tmp_path / name}", *where)),
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
    on_ray, alone = _generated(tmp_path / "ray" / "r"), _generated(tmp_path / "one" / "r")
    # run.json says where each ran (`--resume` continues there); the rest is the same
    where = {name: files[".helios/run.json"]["settings"] for name, files in
             (("ray", on_ray), ("one", alone))}  # fmt: skip
    for name, address in (("ray", cluster.address), ("one", None)):
        executor = "ray" if address else "local"
        assert (where[name].pop("executor"), where[name].pop("ray_address")) == (executor, address)
    # and so does each one's saved config (with the output folder each was given)
    saved = {name: files[".helios/run.json"].pop("config") for name, files in
             (("ray", on_ray), ("one", alone))}  # fmt: skip
    assert saved["ray"]["settings"]["executor"] == "ray"
    assert saved["one"]["settings"]["executor"] == "local"
    assert len(read_jsonl(tmp_path / "ray" / "r" / "trajectories.jsonl")) == 6
    assert on_ray.keys() == alone.keys()
    for name in alone:
        assert on_ray[name] == alone[name], name


def test_helios_run_runs_its_trial_on_a_node_of_the_cluster(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    task = make_task("one", solve="sleep 1.087\n")
    out = tmp_path / "out"
    driver = subprocess.Popen(cluster.helios("run", str(task), "--provider", "local", "--agent",
                                             "oracle", "-q", "-o", str(out)),
                              env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)  # fmt: skip
    raylets = [node["raylet_pid"] for node in cluster.nodes]
    try:

        def on_a_node() -> bool:
            assert driver.poll() is None, _tail(driver)
            return _runs_a_trial("1.087", *raylets)

        # its agent's command runs under one of the nodes' raylets, not under the driver
        # (each poll scans /proc: every 0.1 s, in a command of 1.087 s)
        wait_until(on_a_node, "the trial's command running on a node", within=180, every=0.1)
        assert not _runs_a_trial("1.087", driver.pid)
        assert driver.wait(timeout=300) == 0, _tail(driver)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    # the node ran it without seeing the task folder: Ray brought it
    assert subprocess.run(cluster.on_nodes("ls", str(task)), capture_output=True,
                          timeout=30).returncode != 0  # fmt: skip
    (run_dir,) = out.iterdir()
    assert run_dir.name.startswith("run_")
    assert [r["status"] for r in _records(run_dir)] == ["passed"]
    run = json.loads((run_dir / "run.json").read_text())
    assert (run["executor"], run["ray_address"]) == ("ray", cluster.address)
    assert run["config"]["settings"]["executor"] == "ray"
    _no_scratch_left(run_dir)


#: a tool-call config in text mode against the scripted model (format: its /v1 URL)
TOOLCALLS_CONFIG = """
synthesizer: null
agent:
  name: model
  params:
    model: openai-compatible/scripted
    base_url: {url}
    api_key: {key}
    tools:
      - name: book_flight
        parameters: {{type: object, properties: {{to_city: {{type: string}}}}}}
tests:
  - id: flight
    prompts: ["Book a flight to LA", "A flight to LA, please"]
    expect: [{{name: book_flight, arguments: {{to_city: LA}}}}]
  - id: wrong
    prompt: "Book a flight to Rome"
    expect: [{{name: book_flight, arguments: {{to_city: Rome}}}}]
"""
#: the scripted model's answer: a flight to LA, whatever is asked
FLIGHT = {"scenarios": [{"match": "flight", "turns": [{"tool_calls": [
    {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip


@contextlib.contextmanager
def _flights(cluster: Cluster, tmp_path: Path, latency_ms: int) -> Iterator[tuple[Path, int]]:
    """The scripted model in the cluster's namespace, and a config that calls it; (the
    config, the model's port)."""
    script, port_file = tmp_path / "script.json", tmp_path / "port"
    script.write_text(json.dumps(FLIGHT))
    server = subprocess.Popen(cluster.cmd(*mock_llm_cmd(script, port_file, KEY), "--latency-ms",
                                          str(latency_ms)),
                              env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), "the model")
        port = int(port_file.read_text())
        config = tmp_path / "c.yaml"
        config.write_text(TOOLCALLS_CONFIG.format(url=f"http://127.0.0.1:{port}/v1", key=KEY))
        yield config, port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _callers(cluster: Cluster, port: int) -> set[int]:
    """The processes with a connection open to `port`, in the cluster's namespace."""
    shown = subprocess.run(cluster.cmd("ss", "-tnpH"), capture_output=True, text=True,
                           check=True, timeout=30).stdout  # fmt: skip
    return {int(pid) for line in shown.splitlines() if len(line.split()) > 5
            and line.split()[4].endswith(f":{port}")
            for pid in re.findall(r"pid=(\d+)", line)}  # fmt: skip


def _nodes_of(cluster: Cluster, pids: set[int]) -> set[int]:
    """The nodes (by their index in `cluster.nodes`) whose raylet runs any of `pids`."""
    raylets = {node["raylet_pid"]: index for index, node in enumerate(cluster.nodes)}
    found = set()
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            while pid > 1 and pid not in raylets:  # up the process's ancestors
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if pid in raylets:
                found.add(raylets[pid])
    return found


#: what differs between two tool-call runs by design: clocks, and a run's reruns on the
#: cluster (a node lost), and the invocation a record's spend names (spend.jsonl)
TOOLCALLS_VOLATILE = re.compile(r"(_at|_seconds|^duration|^seconds|^node_retries|^invocation)$")


def _toolcall_results(run_dir: Path) -> tuple[dict[str, Any], Any]:
    """A tool-call run's records by run, and its summary, without the clocks."""

    def steady(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: steady(v) for k, v in value.items() if not TOOLCALLS_VOLATILE.search(k)}
        if isinstance(value, list):
            return [steady(v) for v in value]
        return value

    records = {r["trial_id"]: steady(r) for r in _records(run_dir)}
    return records, steady(json.loads((run_dir / "toolcalls_summary.json").read_text()))


#: what differs between two generate runs of the same prompts by design: clocks, and a
#: row's offset in its batch file (rows are appended as their prompts end)
GENERATE_VOLATILE = re.compile(r"(_at|_seconds|^last_updated|^offset)$")


def _generated(run_dir: Path) -> dict[str, Any]:
    """A generate run's files, without what differs by design."""

    def steady(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: steady(v) for k, v in value.items() if not GENERATE_VOLATILE.search(k)}
        if isinstance(value, list):
            return [steady(v) for v in value]
        return value

    return {name: steady(value) for name, value in _outputs(run_dir).items()}


def _descendants(*pids: int) -> list[int]:
    """The processes under any of `pids` (one scan of /proc for them all)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _processes_named(prefix: bytes) -> list[int]:
    """The processes whose command line starts with `prefix` (a Ray actor's: ray::Class)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "cmdline").read_bytes().startswith(prefix):
                    found.append(int(entry.name))
    return found


def _runs_a_trial(marker: str, *pids: int) -> bool:
    """Whether a process under any of `pids` runs a command line holding `marker`."""
    for child in _descendants(*pids):
        try:
            if marker in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"):
                return True
        except OSError:
            continue
    return False


def test_the_driver_killed_then_resumed_finishes_once_and_leaves_no_sandbox(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    tasks = [make_task(f"t{i}", solve="sleep 600\n") for i in range(4)]
    out = tmp_path / "out"
    command = cluster.helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                             "oracle", "-n", "4", "-q", "-o", str(out))  # fmt: skip
    driver = subprocess.Popen(command, env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)  # fmt: skip
    left: list[Path] = []
    try:

        def sandboxes_up() -> bool:
            if driver.poll() is not None:
                ran = [_records(run) for run in out.glob("batch_*")]
                raise AssertionError(f"the driver ended ({driver.returncode}): {ran}\n"
                                     f"{_tail(driver)}")  # fmt: skip
            run_file = next(out.glob("batch_*/run.json"), None)
            if run_file is None:
                return False
            run_id = json.loads(run_file.read_text())["run_id"]
            left[:] = _mounted_sandboxes(cluster.sandboxes, run_id, cluster.mounts)
            return len(left) == 4

        wait_until(sandboxes_up, "4 sandboxes up on the cluster", within=180)
    finally:
        driver.kill()  # kill -9: the driver cleans nothing up
        driver.wait(timeout=30)
    (run_dir,) = out.iterdir()
    # Ray then stops the dead driver's tasks, which may stop some of their sandboxes;
    # what they leave is the resume's to remove.
    for task in tasks:  # the resumed trials finish at once
        (task / "solution" / "solve.sh").write_text("#!/bin/sh\ntrue\n")
    # `--resume RUN_DIR` and the cluster named again (a run folder never chooses the
    # cluster its driver joins): the run says it ran with the Ray executor
    resumed = subprocess.run(cluster.cmd(*helios_cmd("batch", "--resume", str(run_dir),
                                                     "--ray-address", cluster.address)),
                             env=cluster.env, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    _assert_gone(left, cluster.sandboxes, cluster.mounts)
    _no_scratch_left(run_dir)
    records = _records(run_dir)
    assert sorted(r["task_name"] for r in records) == ["t0", "t1", "t2", "t3"]
    assert all(r["status"] == "passed" for r in records)
    assert json.loads((run_dir / "batch_summary.json").read_text())["passed"] == 4


def test_ctrl_c_stops_the_trials_on_the_nodes_and_their_sandboxes(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    for i in range(3):
        make_task(f"t{i}", solve="sleep 600\n")
    out = tmp_path / "out"
    command = cluster.helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                             "oracle", "-n", "3", "-q", "-o", str(out))  # fmt: skip
    driver = subprocess.Popen(command, env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)  # fmt: skip
    run_id = ""

    def sandboxes_up() -> bool:
        nonlocal run_id
        assert driver.poll() is None, _tail(driver)
        run_file = next(out.glob("batch_*/run.json"), None)
        if run_file is None:
            return False
        run_id = json.loads(run_file.read_text())["run_id"]
        return len(_mounted_sandboxes(cluster.sandboxes, run_id, cluster.mounts)) == 3

    try:
        wait_until(sandboxes_up, "3 sandboxes up on the cluster", within=180)
        left = _mounted_sandboxes(cluster.sandboxes, run_id, cluster.mounts)
        driver.send_signal(signal.SIGINT)
        asked = time.monotonic()
        assert driver.wait(timeout=60) == 130, _tail(driver)
        assert time.monotonic() - asked < 30  # the trials stopped, not waited for
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    _assert_gone(left, cluster.sandboxes, cluster.mounts)
    (run_dir,) = out.iterdir()
    assert _records(run_dir) == []  # stopped, not failed: they run again on resume


def test_a_worker_node_killed_mid_batch_loses_and_duplicates_nothing(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    # Runs last: the cluster has one worker node less afterwards.
    for i in range(10):
        make_task(f"t{i}", solve="sleep 3\n")
    out = tmp_path / "out"
    command = cluster.helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                             "oracle", "-n", "5", "-q", "-o", str(out))  # fmt: skip
    driver = subprocess.Popen(command, env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)  # fmt: skip
    victim = cluster.nodes[-1]["raylet_pid"]
    try:

        def busy() -> bool:
            assert driver.poll() is None, _tail(driver)
            return _runs_a_trial("sleep", victim)

        # each poll scans /proc: every 0.1 s, in trials of 3 s
        wait_until(busy, "a trial running on the last worker node", within=180, every=0.1)
        # The node goes as a machine would: its raylet and everything under it at once.
        doomed = [victim, *_descendants(victim)]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # the run's trial folders on the nodes, the killed trial's among them
        (run_file,) = out.glob("batch_*/run.json")
        scratch = _scratch(json.loads(run_file.read_text())["run_id"])
        assert any(scratch.iterdir())
        assert driver.wait(timeout=300) == 0, _tail(driver)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    (run_dir,) = out.iterdir()
    records = _records(run_dir)
    names = sorted(r["task_name"] for r in records)
    assert names == sorted(f"t{i}" for i in range(10))  # each once: none lost, none twice
    assert all(r["status"] == "passed" for r in records), records
    rerun = [r for r in records if r.get("node_retries")]
    assert rerun  # the trials of the dead node ran again elsewhere, and say so
    assert json.loads((run_dir / "batch_summary.json").read_text())["passed"] == 10
    _no_scratch_left(run_dir)  # not even the killed node's trial folders


def test_toolcalls_on_the_cluster_gives_the_local_results_through_a_node_lost_mid_run(
    cluster: Cluster, tmp_path: Path
) -> None:
    # After the batch's node test (this kills the other worker node: only the head is
    # left; the tests that need more slots run before).
    victim = 1
    with _flights(cluster, tmp_path, latency_ms=1000) as (config, port):
        args = ("--config", str(config), "--runs", "1", "--max-concurrency", "3", "-q")
        driver = subprocess.Popen(cluster.helios("toolcalls", *args, "-o", str(tmp_path / "ray")),
                                  env=cluster.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)  # fmt: skip
        callers: set[int] = set()
        nodes: set[int] = set()
        try:

            def calling_from_the_victim() -> bool:
                # first seen within a poll of its call's start: the reply is most of the
                # model's latency away when the node goes
                assert driver.poll() is None, _tail(driver)
                found = _callers(cluster, port) - callers
                callers.update(found)
                nodes.update(_nodes_of(cluster, found))  # now: the job's workers end with it
                return victim in nodes

            # each poll runs `ss`: every 0.1 s, in calls of 1 s
            wait_until(calling_from_the_victim, "a run calling the model from the victim node",
                       within=180, every=0.1)  # fmt: skip
            raylet = cluster.nodes[victim]["raylet_pid"]
            # The node goes, as a machine would; and the run's limits actor with it, wherever
            # it is (it is on the driver's node, which on this machine may be any node).
            # (with the events of the run's display, `RunBox`, when it has one)
            box = _processes_named(b"ray::LimitsBox") + _processes_named(b"ray::RunBox")
            assert box  # the actor that holds the model's limiter for the whole cluster
            for pid in [raylet, *_descendants(raylet), *box]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

            def done() -> bool:
                found = _callers(cluster, port) - callers
                callers.update(found)
                nodes.update(_nodes_of(cluster, found))
                return driver.poll() is not None

            wait_until(done, "the tool-call runs on the cluster", within=300, every=0.1)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        assert driver.returncode == 1, _tail(driver)  # "wrong" fails, as it does alone
        # the model was called from the nodes' worker processes, never from the driver
        assert driver.pid not in callers and len(nodes) >= 2, (callers, nodes)
        alone = subprocess.run(cluster.cmd(*helios_cmd("toolcalls", *args, "-o",
                                                       str(tmp_path / "one"))),
                               env=cluster.env, capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert alone.returncode == 1, alone.stderr
        (ray_dir,) = (tmp_path / "ray").iterdir()
        records = _records(ray_dir)
        assert any(r.get("node_retries") for r in records)  # the lost runs ran again elsewhere
    # the folder resumes (here, on this machine; the config again, for its key), and finds
    # nothing left to run: it calls no model
    resumed = CliRunner().invoke(app, ["toolcalls", "--resume", str(ray_dir), "--config",
                                       str(config), "--executor", "local", "-q"])  # fmt: skip
    assert resumed.exit_code == 1, resumed.output
    assert _records(ray_dir) == records
    (one_dir,) = (tmp_path / "one").iterdir()
    on_ray, local = _toolcall_results(ray_dir), _toolcall_results(one_dir)
    # each run once (none lost, none twice), with what it gives on one machine
    assert len(on_ray[0]) == len(records) == 3 and on_ray == local
    assert sorted(r["status"] for r in records) == ["failed", "passed", "passed"]
    # the usage the nodes counted came back with each run
    assert all(r["usage"]["calls"] == 1 for r in records)
    run = json.loads((ray_dir / "run.json").read_text())
    assert (run["executor"], run["ray_address"]) == ("ray", cluster.address)


def test_ray_address_without_the_ray_executor_is_one_clear_line(
    make_task: TaskMaker, tmp_path: Path
) -> None:
    make_task("t0")
    done = subprocess.run(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                   "--ray-address", "auto", "-o", str(tmp_path / "out")),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--ray-address needs --executor ray" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_an_address_nothing_answers_on_is_one_clear_line_at_once(
    make_task: TaskMaker, tmp_path: Path, closed_port: int
) -> None:
    make_task("t0")
    began = time.monotonic()
    done = subprocess.run(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent", "oracle",
                   "-q", "-o", str(tmp_path / "out"), "--executor", "ray", "--ray-address",
                   f"127.0.0.1:{closed_port}"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{closed_port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - began < 60  # not Ray's minutes of retries


def test_without_ray_installed_the_ray_executor_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from helios.engine import ray_executor
    from helios.errors import ConfigError

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    hint = r"pip install 'helios-harness\[ray\]'"
    with pytest.raises(ConfigError, match=hint):
        ray_executor._ray()
    # refused as the settings are made: before a run folder or anything else
    with pytest.raises(ConfigError, match=hint):
        TaskBatchSettings(executor="ray")
    with pytest.raises(ConfigError, match=hint):
        GenerateSettings(dataset_file=Path("p.jsonl"), batch_size=1, run_name="r",
                         executor="ray")  # fmt: skip


def test_without_an_address_a_local_ray_instance_runs_the_batch(
    cluster: Cluster, make_task: TaskMaker, tmp_path: Path
) -> None:
    # The module's cluster runs on this machine meanwhile (it is in /tmp/ray): a batch
    # without an address starts its own instance, it does not join that one (which Ray's
    # own default does, and which this namespace could not even reach).
    assert cluster.address
    for i in range(3):
        make_task(f"t{i}")
    out = tmp_path / "out"
    batch = helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                       "oracle", "-n", "2", "-q", "-o", str(out), "--executor", "ray")  # fmt: skip
    # In a namespace of its own, whose last process is this batch: once it exits, any Ray
    # process it left would be found by the `ps` that follows it there.
    script = 'ip link set lo up; "$@" >/dev/null; code=$?; ps -e -o comm=; exit $code'
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", "sh", "-c",
                           script, "sh", *batch],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = out.iterdir()
    assert [r["status"] for r in _records(run_dir)] == ["passed"] * 3
    left = [name for name in done.stdout.split() if name not in ("sh", "ps")]
    assert left == [], left  # the local instance was stopped with the batch


class _NoRay:
    """What `_RayBatch` asks of Ray before any task runs, for the driver's side alone."""

    cloudpickle = pickle

    @staticmethod
    def remote(**options: Any) -> Any:
        return lambda function: function


def _archive(members: list[tuple[str, bytes | str]]) -> bytes:
    """A tar: (name, bytes) is a file, (name, "->target") a symlink."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content.removeprefix("->")
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _arrive(tmp_path: Path, archive: bytes) -> tuple[Path, dict[str, Any]]:
    """One node's stream with `archive` reaches the driver; (its trial folder, record)."""
    from helios.engine.batch import BatchService
    from helios.engine.episode import EpisodeContext
    from helios.engine.ray_executor import _RayBatch
    from helios.engine.store import RunStore

    from .security.test_ray_archive_bounds import FakeRay, FakeStream, node_result, pieces_of
    from .thin_door import PromptDoor, PromptUnit

    store = RunStore.create(tmp_path / "run", {"run_id": "r"})
    service: BatchService[Any, Any] = BatchService(door=PromptDoor(), store=store)
    unit = PromptUnit("p good", 0, folder="t0")
    again = FakeStream(node_result(len(archive), "10.0.0.8"), pieces_of(archive))

    async def go() -> None:
        ctx = EpisodeContext(run_id="r", run_dir=store.run_dir, start_gate=asyncio.Semaphore(1))
        batch = _RayBatch(FakeRay([]), service, [unit], ctx)
        stream = FakeStream(node_result(len(archive)), pieces_of(archive))
        assert await batch._receive(unit, stream, 0) is None
        # the same trial again (a second run's stream): dropped, its task cancelled
        assert await batch._receive(unit, again, 1) is None

    try:
        asyncio.run(go())
    finally:
        store.close()
    (record,) = _records(store.run_dir)  # one line: the second result was dropped
    assert again.taken == 0 and again.cancelled
    return store.run_dir / "t0", record


def test_the_driver_unpacks_a_trial_folder_with_the_sandbox_downloads_checks(
    tmp_path: Path,
) -> None:
    archive = _archive([
        ("trial/agent/trajectory.json", b"{}"), ("trial/link", "->/etc/passwd"),
        ("trial/../../escaped.txt", b"out"), ("/absolute.txt", b"out"), ("trial/ok", b"1"),
    ])  # fmt: skip
    folder, record = _arrive(tmp_path, archive)
    assert record["status"] == "passed"
    assert (folder / "agent" / "trajectory.json").read_bytes() == b"{}"
    assert (folder / "ok").read_bytes() == b"1"
    assert not (folder / "link").exists() and not (folder / "link").is_symlink()
    written = {p.name for p in tmp_path.rglob("*")}
    assert "escaped.txt" not in written and "absolute.txt" not in written
    assert not Path("/absolute.txt").exists()


def test_an_archive_the_driver_refuses_records_the_trial_as_an_error(tmp_path: Path) -> None:
    folder, record = _arrive(tmp_path, b"not a tar archive" * 100)
    assert record["status"] == "error"  # recorded (re-run by --retry-errors), not lost
    assert not folder.exists() or not any(folder.iterdir())


def test_a_task_folder_reaches_a_node_as_the_same_files(tmp_path: Path) -> None:
    """What the driver sends of a folder, unpacked on a node, has the checksum the
    task was loaded with: files, modes, empty folders, links inside followed; a link
    out of the folder (made after the load checked it) is not sent."""
    from helios.engine.ray_executor import _unpack_input, pack_input
    from helios.tasks.task import tree_checksum

    task = tmp_path / "task"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "empty").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1\n")
    (task / "tests" / "test.sh").chmod(0o755)
    (task / "environment" / "data.bin").write_bytes(bytes(range(256)) * 64)
    (task / "tests" / "same-data").symlink_to("../environment/data.bin")
    loaded = tree_checksum(task)
    (tmp_path / "secret").write_text("host only")
    (task / "environment" / "leak").symlink_to(tmp_path / "secret")

    copy = tmp_path / "node" / "copy"
    copy.parent.mkdir()
    _unpack_input(pack_input(task), copy)
    assert tree_checksum(copy) == loaded
    assert (copy / "empty").is_dir()
    assert (copy / "tests" / "test.sh").stat().st_mode & 0o111
    assert not (copy / "tests" / "same-data").is_symlink()  # a file of its own there
    assert not (copy / "environment" / "leak").exists()
    assert "host only" not in {p.read_text(errors="replace") for p in copy.rglob("*")
                               if p.is_file()}  # fmt: skip


def test_a_task_folder_too_large_to_send_is_one_clear_error(tmp_path: Path) -> None:
    from helios.engine.ray_executor import InputTooLarge, pack_input

    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "big").write_bytes(b"x" * 4096)
    with pytest.raises(InputTooLarge, match=r"task holds over 0 MiB: too large to send"):
        pack_input(tmp_path / "task", max_bytes=1024)


class _FolderDoor:
    """The toy door, its units reading one folder (as a task's trials read theirs)."""

    def __init__(self, folder: Path) -> None:
        from .thin_door import PromptDoor

        self.folder, self.door = folder, PromptDoor()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.door, name)

    def inputs(self, unit: Any) -> dict[str, Path]:
        return {"folder": self.folder}

    def with_inputs(self, unit: Any, copies: dict[str, Path]) -> Any:
        return unit

    def crashed(self, unit: Any, error: Any) -> dict[str, Any]:
        return {**self.door.crashed(unit, error), "error": error.message}


class _Sent(_NoRay):
    """Counts what the driver puts in the object store."""

    put_calls = 0

    def put(self, value: Any) -> Any:
        _Sent.put_calls += 1


def test_a_task_folder_too_large_to_send_records_its_trial_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial is recorded (run again by --retry-errors), with one line saying why;
    the batch goes on, and nothing is sent to the cluster."""
    from helios.engine import ray_executor
    from helios.engine.batch import BatchService
    from helios.engine.episode import EpisodeContext
    from helios.engine.store import RunStore

    from .thin_door import PromptUnit

    big = tmp_path / "big"
    big.mkdir()
    (big / "data").write_bytes(b"x" * 4096)

    monkeypatch.setattr(ray_executor, "MAX_INPUT_BYTES", 1024)
    store = RunStore.create(tmp_path / "run", {"run_id": "r"})
    service: BatchService[Any, Any] = BatchService(door=_FolderDoor(big), store=store)
    unit = PromptUnit("p good", 0, folder="t0")

    async def go() -> None:
        ctx = EpisodeContext(run_id="r", run_dir=store.run_dir, start_gate=asyncio.Semaphore(1))
        await ray_executor._RayBatch(_Sent(), service, [unit], ctx)._run()

    try:
        asyncio.run(go())
    finally:
        store.close()
    (record,) = _records(store.run_dir)
    assert record["status"] == "error", record
    assert "too large to send to the Ray nodes" in json.dumps(record)
    assert _Sent.put_calls == 0


def test_processes_unpacking_one_task_on_a_node_at_once_all_get_one_copy(
    tmp_path: Path,
) -> None:
    """Worker processes of a node may all find no copy yet: each unpacks, the first
    rename wins, the others' copies are dropped, and none fails."""
    from helios.engine.ray_executor import pack_input
    from helios.tasks.task import tree_checksum

    task = tmp_path / "task"
    task.mkdir()
    for i in range(200):
        (task / f"f{i}").write_text(str(i) * 100)
    archive = tmp_path / "archive.tar"
    archive.write_bytes(pack_input(task))
    target = tmp_path / "inputs" / "copy"
    target.parent.mkdir()
    unpack = ("import sys; from pathlib import Path; "
              "from helios.engine.ray_executor import _unpack_input; "
              "_unpack_input(Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]))")  # fmt: skip
    procs = [subprocess.Popen([sys.executable, "-c", unpack, str(archive), str(target)],
                              stderr=subprocess.PIPE) for _ in range(6)]  # fmt: skip
    outcomes = [(proc.wait(timeout=120), proc.stderr.read() if proc.stderr else b"")
                for proc in procs]  # fmt: skip
    assert outcomes == [(0, b"")] * 6
    assert tree_checksum(target) == tree_checksum(task)
    assert [p.name for p in target.parent.iterdir()] == ["copy"]  # no staging left
