"""Limits a run shares across a Ray cluster (issue 33), on the three-node test cluster
(tests/ray_cluster.py, through tests/test_ray_executor.py's fixture): a budget stops a
batch on the cluster as on one machine and its folder resumes; a server that answers
R requests per second sees about R from the whole cluster, with no more 429s than
from one machine; and a node's sandbox starts are bounded across its processes."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helios.engine.ray_limits import NodeStartGate

from .conftest import EXAMPLES, helios_cmd, mock_llm_cmd
from .datagen.conftest import cli_env, read_jsonl, write_dataset
from .test_ray_executor import KEY, Cluster, started_cluster
from .test_tool_agent import SCRIPT as TASK_SCRIPT
from .waiting import wait_until

pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("need_bwrap")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """This module's own cluster: module-scoped, so its tests run on one xdist worker
    and start one cluster, not one per worker."""
    yield from started_cluster(tmp_path_factory)


MODEL = "openai-compatible/scripted"
PRICES = {MODEL: {"input": 2.0, "output": 10.0}, "openai-compatible/mock": {"input": 2.0,
                                                                           "output": 10.0}}


@contextmanager
def _model(cluster: Cluster, tmp_path: Path, script: dict[str, Any],
           *flags: str) -> Iterator[str]:  # fmt: skip
    """The scripted model, served inside the cluster's namespace; its /v1 URL."""
    folder = Path(tmp_path / f"model-{time.monotonic_ns()}")
    folder.mkdir()
    (folder / "script.json").write_text(json.dumps(script))
    port_file = folder / "port"
    server = subprocess.Popen(cluster.cmd(*mock_llm_cmd(folder / "script.json", port_file, KEY),
                                          *flags),
                              env=cluster.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), "the model")
        yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _stats(cluster: Cluster, base: str) -> dict[str, Any]:
    code = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())"
    shown = subprocess.run(cluster.cmd(sys.executable, "-c", code, f"{base}/_stats"),
                           capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    stats: dict[str, Any] = json.loads(shown.stdout)
    return stats


def test_a_budget_stops_a_batch_on_the_cluster_and_its_folder_resumes(
    cluster: Cluster, tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    with _model(cluster, tmp_path, TASK_SCRIPT) as base:
        common = ("-m", MODEL, "--base-url", f"{base}/v1", "--api-key", KEY, "--prices",
                  str(prices), "--provider", "local", "-q")  # fmt: skip

        def helios(*args: str, ray: bool = True) -> subprocess.CompletedProcess[str]:
            command = cluster.helios(*args) if ray else cluster.cmd(*helios_cmd(*args))
            return subprocess.run(command, env=cluster.env, capture_output=True, text=True,
                                  timeout=300, cwd=tmp_path)  # fmt: skip

        probe = helios("batch", "tasks", "-o", str(tmp_path / "probe"), *common, "--workers", "1",
                       ray=False)  # fmt: skip
        assert probe.returncode == 0, probe.stderr
        (probe_dir,) = (tmp_path / "probe").iterdir()
        one = json.loads((probe_dir / "batch_summary.json").read_text())["usage"]["cost_usd"]
        first = helios("batch", "tasks", "-k", "8", "-n", "4", "-o", str(tmp_path / "out"),
                       *common, "--max-cost", str(3.5 * one))  # fmt: skip
        assert first.returncode == 3, first.stderr
        (run_dir,) = (tmp_path / "out").iterdir()
        summary = json.loads((run_dir / "batch_summary.json").read_text())
        assert summary["budget"]["stopped_by"] == "max_cost"
        assert abs(summary["budget"]["spent"]["cost_usd"] - 3.5 * one) <= 1.01 * one
        assert summary["total_trials"] < 8
        rest = helios("batch", "--resume", str(run_dir), "--base-url", f"{base}/v1",
                      "--api-key", KEY, "--max-cost", str(100 * one), "-q")  # fmt: skip
        assert rest.returncode == 0, rest.stderr
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["total_trials"] == summary["passed"] == 8
    ids = [json.loads(line)["trial_id"] for line in
           (run_dir / "results.jsonl").read_text().splitlines()]  # fmt: skip
    assert len(ids) == len(set(ids)) == 8
    assert summary["budget"]["spent"]["cost_usd"] == pytest.approx(8 * one, rel=0.05)


#: one reply per prompt: a prompt is one model call
ONE_CALL = {"scenarios": [{"match": "*", "turns": [{"reasoning": "easy", "text": "done"}]}]}
#: the server's rate limit (requests answered per second)
RATE = 4


def test_the_cluster_shares_one_rate_limit(cluster: Cluster, tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Question {i}?" for i in range(24)])
    env = {**cli_env(), **{k: cluster.env[k] for k in ("HELIOS_SANDBOX_DIR", "PYTHONPATH")}}
    seen: dict[str, dict[str, Any]] = {}
    for name, where in (("ray", ("--executor", "ray", "--ray-address", cluster.address)),
                        ("one", ("--executor", "local"))):  # fmt: skip
        with _model(cluster, tmp_path, ONE_CALL, "--rate-limit-rps", str(RATE),
                    "--latency-ms", "50") as base:  # fmt: skip
            args = [f"--dataset_file={dataset}", "--batch_size=8", "--model=mock",
                    f"--base_url={base}/v1", f"--api_key={KEY}", "--num_workers=6",
                    "--distribution=terminal_only", "--run_name=r", "-q",
                    f"--output_dir={tmp_path / name}", *where]  # fmt: skip
            started = time.monotonic()
            done = subprocess.run(cluster.cmd(*helios_cmd("generate", *args)), cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, done.stderr
            seen[name] = {**_stats(cluster, base), "seconds": time.monotonic() - started}
        seen[name]["rows"] = len(read_jsonl(tmp_path / name / "r" / "trajectories.jsonl"))
    ray, one = seen["ray"], seen["one"]
    # the shared limit loses no prompt; one machine's 429 storm may exhaust a prompt's
    # retries under load (CI saw 22 of 24): the baseline's figures are compared, not asserted
    assert ray["rows"] == ray["served_ok"] == 24, (ray, one)
    assert one["served_ok"] <= 24
    # the whole cluster stays about within the provider's rate, and hits its limit no
    # more than one machine does
    assert ray["peak_per_second"] <= RATE + 4, (ray, one)  # measured: 5, 7 under CI load
    assert ray["injected_429"] <= one["injected_429"], (ray, one)  # measured: 1 and 48


def test_a_nodes_sandbox_starts_are_bounded_across_its_processes(tmp_path: Path) -> None:
    async def main() -> list[str]:
        order: list[str] = []

        async def start(name: str, gate: NodeStartGate) -> None:
            async with gate:
                order.append(f"{name} in")
                await asyncio.sleep(0.2)
                order.append(f"{name} out")

        # two gates on one folder: two processes of one node (an flock is per open file)
        first, second = NodeStartGate(tmp_path, 1), NodeStartGate(tmp_path, 1)
        await asyncio.gather(start("a", first), start("b", second))
        return order

    order = asyncio.run(main())
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


def test_a_hard_budget_stops_the_trials_on_the_nodes(cluster: Cluster, tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Question {i}?" for i in range(6)])
    env = {**cli_env(), **{k: cluster.env[k] for k in ("HELIOS_SANDBOX_DIR", "PYTHONPATH")}}

    def generate(base: str, *more: str) -> subprocess.CompletedProcess[str]:
        args = [f"--dataset_file={dataset}", "--batch_size=3", "--model=mock",
                f"--base_url={base}/v1", f"--api_key={KEY}", "--num_workers=5",
                "--distribution=terminal_only", "--run_name=r", "-q",
                f"--output_dir={tmp_path / 'out'}", "--executor", "ray", "--ray-address",
                cluster.address, *more]  # fmt: skip
        return subprocess.run(cluster.cmd(*helios_cmd("generate", *args)), cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip

    # Calls of 5 minutes: a run that waited for them would take over 3 (a loaded machine
    # took 61 s for the stopped run, drivers and all). The budget leaves the drivers and
    # the nodes' workers time to start the trials (at 8 s, then at 15 s, under load none
    # had started: the run ended with no trial to stop).
    with _model(cluster, tmp_path, ONE_CALL, "--latency-ms", "300000") as base:
        started = time.monotonic()
        first = generate(base, "--max_duration=40s", "--budget_hard")
        assert first.returncode == 3, first.stderr
        assert time.monotonic() - started < 180  # the calls were not waited for
    records = read_jsonl(tmp_path / "out" / "r" / ".helios" / "results.jsonl")
    assert records and all(r.get("budget_stopped") for r in records)
    assert all("BudgetStopped" in json.dumps(r.get("error")) for r in records)
    with _model(cluster, tmp_path, ONE_CALL) as base:
        rest = generate(base, "--resume", "--max_duration=10m")
        assert rest.returncode == 0, rest.stderr
    assert len(read_jsonl(tmp_path / "out" / "r" / "trajectories.jsonl")) == 6
