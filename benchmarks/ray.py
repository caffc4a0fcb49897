"""The Ray executor's cost to its driver: CPU per trial over the local engine, on the
same workload, and the trials/s of one driver with a 3-node cluster (`--nodes`).

    sudo .venv/bin/python benchmarks/ray.py              # N=300 units, 4 slots per node
    sudo .venv/bin/python benchmarks/ray.py -N 600 --slots 8 --unit-ms 20 --file-kb 64

The workload (`helios.testing.waiting_door`): a door whose unit waits `--unit-ms` (a
trial's sandbox and model time, which the driver does not pay) and leaves a `--file-kb`
file in its trial folder, which comes back to the driver with the result. The local
engine runs it in this process with `-n` = 3 × slots; the Ray executor submits the same
units to a head and two worker nodes of `--slots` each (`ray.cluster_utils.Cluster` on
this machine), with the same `-n`.

Driver CPU = this process's user + system time over the batch (`getrusage`: Ray's own
threads in the driver included; the nodes' processes are not the driver's). The
connection to the cluster is made before the clock starts: it is paid once per batch,
not per trial.

Ray turns 127.0.0.1 into the machine's own interface address; as root the script runs
itself in a network namespace that has only loopback (`unshare --net`), so that the
cluster is all on 127.0.0.1 (`--no-netns` runs it in the host's network).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# This file's name is Ray's: its folder must not shadow the package.
sys.path[:] = [str(REPO / "src"), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

from helios.engine.batch import BatchService  # noqa: E402
from helios.engine.config import ConcurrencyConfig  # noqa: E402
from helios.engine.store import RunStore  # noqa: E402
from helios.testing.waiting_door import WaitingDoor, WaitingUnit  # noqa: E402

IN_NETNS = "HELIOS_BENCH_RAY_NETNS"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_batch(door: WaitingDoor, units: int, in_flight: int, folder: Path,
              executor: str, address: str | None) -> tuple[float, float, int]:  # fmt: skip
    """(driver CPU seconds, wall seconds, units recorded)."""
    store = RunStore.create(folder, {"run_id": folder.name})
    service: BatchService[WaitingUnit, dict[str, Any]] = BatchService(
        door=door, store=store,
        concurrency=ConcurrencyConfig(in_flight=in_flight, executor=executor,  # type: ignore[arg-type]
                                      ray_address=address),
        keep_results=False,
    )  # fmt: skip
    plan = service.plan([WaitingUnit(i) for i in range(units)])
    cpu, wall = _cpu(), time.perf_counter()
    try:
        asyncio.run(service.run(plan))
    finally:
        store.close()
    failed = service.counts.total - service.counts.passed
    if failed:
        raise SystemExit(f"{failed} of {service.counts.total} units failed ({executor})")
    return _cpu() - cpu, time.perf_counter() - wall, service.counts.total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-N", type=int, default=300, help="units per batch")
    parser.add_argument("--slots", type=int, default=4, help="helios_slot of each node")
    parser.add_argument("--unit-ms", type=float, default=50.0, help="what a unit waits")
    parser.add_argument("--file-kb", type=int, default=16, help="the file a unit leaves")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the driver's main thread over the Ray batch",
    )
    parser.add_argument("--nodes", type=int, default=3, help="the head and its worker nodes")
    parser.add_argument("--idle-s", type=float, default=5.0,
                        help="how long the connected driver's idle CPU is measured")  # fmt: skip
    parser.add_argument("--no-netns", action="store_true", help="run in the host's network")
    args = parser.parse_args()
    if not args.no_netns and os.environ.get(IN_NETNS) != "1":
        if os.geteuid() != 0:
            parser.error("a network namespace needs root (or pass --no-netns)")
        script = f'ip link set lo up; exec "{sys.executable}" "$0" "$@"'
        env = {**os.environ, IN_NETNS: "1", "RAY_USAGE_STATS_ENABLED": "0"}
        return subprocess.call(["unshare", "--net", "sh", "-c", script, __file__, *sys.argv[1:]],
                               env=env)  # fmt: skip
    # the nodes' processes import Helios from this tree, as this one does
    path = [str(REPO / "src"), os.environ.get("PYTHONPATH")]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    import ray
    from ray.cluster_utils import Cluster

    door = WaitingDoor(args.unit_ms / 1000, args.file_kb * 1024)
    in_flight = 3 * args.slots
    scratch = Path(tempfile.mkdtemp(prefix="helios-bench-ray-"))
    print(f"N={args.N} units of {args.unit_ms:g} ms leaving {args.file_kb} KiB each; "
          f"-n {in_flight}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    try:
        local = run_batch(door, args.N, in_flight, scratch / "local", "local", None)
        # no log monitor: no driver reads the nodes' logs (log_to_driver=False)
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "resources": {"helios_slot": args.slots}, "include_dashboard": False,
            "include_log_monitor": False,
        })  # fmt: skip
        try:
            for _ in range(args.nodes - 1):
                cluster.add_node(num_cpus=1, resources={"helios_slot": args.slots})
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
            # what a connected driver costs with nothing to do (Ray's own threads)
            idle, began = _cpu(), time.perf_counter()
            time.sleep(args.idle_s)
            idle_rate = (_cpu() - idle) / (time.perf_counter() - began)
            # one small batch first: the nodes' worker processes start and import Helios
            run_batch(door, 3 * in_flight, in_flight, scratch / "warm", "ray", cluster.address)
            profile = cProfile.Profile() if args.profile else None
            if profile is not None:
                profile.enable()
            on_ray = run_batch(door, args.N, in_flight, scratch / "ray", "ray", cluster.address)
            if profile is not None:
                profile.disable()
                pstats.Stats(profile).sort_stats("tottime").print_stats(20)
        finally:
            ray.shutdown()
            cluster.shutdown()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    nodes = f"{args.nodes} node{'s' * (args.nodes != 1)}"
    rows = (("local engine, this process", local), (f"Ray executor, {nodes}", on_ray))
    for name, (cpu, wall, done) in rows:
        back = done * args.file_kb / 1024 / wall
        print(f"{name:28s} {done} recorded  driver CPU {1000 * cpu / done:6.2f} ms/trial  "
              f"{done / wall:7.1f} trials/s  {back:6.2f} MB/s back")  # fmt: skip
    background = 1000 * idle_rate * on_ray[1] / on_ray[2]
    print(f"of which a connected driver's idle CPU ({100 * idle_rate:.1f}% of a core), spread "
          f"over this batch's trials: {background:.2f} ms/trial")  # fmt: skip
    overhead = 1000 * (on_ray[0] / on_ray[2] - local[0] / local[2])
    print(
        f"Ray executor's driver CPU over the local engine: {overhead:+.2f} ms/trial "
        "(goal: at most 5 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
