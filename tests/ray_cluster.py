"""A Ray cluster of three nodes on loopback, for tests/test_ray_executor.py.

Run in a network namespace that has only loopback (`unshare --net`, then `ip link set
lo up`): there Ray cannot turn 127.0.0.1 into the machine's own interface address,
as it does in the host's network. A head and two worker nodes, each declaring its own
`helios_slot` count; node death is detected within about a second. The cluster's
address and its nodes (id, raylet pid, slots) go to the file named by argv[1] as
JSON; the cluster lives until stdin closes.

Each node declares one CPU: Ray prestarts that many worker processes on every node
for each driver that connects (each imports Ray, about a second of CPU), and a run's
first task on each node (its sweep) takes that one. Declaring a node's slots instead
made the modules start about a third more worker processes. No log monitor: no
driver asks for the workers' logs.

    unshare --net sh -c 'ip link set lo up; exec python tests/ray_cluster.py STATE'
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ray.cluster_utils import Cluster

#: helios_slot of the head, then of each worker node
SLOTS = (1, 2, 2)
#: a node that stops answering is dead after about 3 × 300 ms
FAST_DEATH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 300,
    "health_check_timeout_ms": 300,
    "health_check_failure_threshold": 3,
}


def main(state: Path) -> None:
    head, *workers = SLOTS
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"helios_slot": head},
                        "include_dashboard": False, "include_log_monitor": False,
                        "_system_config": FAST_DEATH},
    )  # fmt: skip
    try:
        nodes = [cluster.head_node]
        for slots in workers:
            nodes.append(cluster.add_node(num_cpus=1, resources={"helios_slot": slots}))
        cluster.wait_for_nodes()
        described = [
            {"node_id": node.node_id, "raylet_pid": node.all_processes["raylet"][0].process.pid,
             "slots": slots}
            for node, slots in zip(nodes, SLOTS, strict=True)
        ]  # fmt: skip
        partial = state.with_suffix(".part")
        partial.write_text(json.dumps({"address": cluster.address, "pid": os.getpid(),
                                       "nodes": described}))  # fmt: skip
        partial.rename(state)
        sys.stdin.read()  # until the test closes it
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
