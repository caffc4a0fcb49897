"""A docker sandbox's allowlisted network: a network of the trial's own,
`--internal`, whose one reachable host is the trial's egress proxy, listening on
the network's gateway address on the host.

On an engine without iptables (`dockerd --iptables=false`, as here) an internal
network still gives its containers a default route through the host, which
forwards; so Helios turns forwarding off on the network's bridge
(`net.ipv4.conf.<bridge>.forwarding = 0`): nothing the sandbox sends is routed
on, whatever its address, and the container has no NET_ADMIN to change its own
routes. Docker's own resolver (127.0.0.11) is given an upstream no one holds (an
unused address of the trial's subnet), so it forwards no lookup out: names are
resolved by the proxy, and only allowed ones. What the sandbox can still reach
is the host itself at the gateway address: a host service listening on every
address (0.0.0.0) is in reach (docs/tasks.md says so). This needs Helios on the
engine's host, as root (it writes /proc/sys and listens on the bridge).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
from pathlib import Path

from helios.environments.docker.cli import LABEL_MANAGED, LABEL_OWNER, LABEL_RUN, docker
from helios.environments.egress import DENY_ALL, AllowList, Network, proxy_variables
from helios.environments.egress.proxy import EgressProxy
from helios.environments.shell.owner import Owner, current_owner
from helios.errors import EnvironmentExecError, EnvironmentStartError

#: marks the trial networks Helios makes (`helios cleanup` removes them by it)
LABEL_EGRESS = "helios.egress"
_PROC_SYS = Path("/proc/sys/net/ipv4/conf")


class DockerEgress:
    def __init__(self) -> None:
        self.network: str | None = None
        self._proxy: EgressProxy | None = None
        self._args: list[str] = []
        self._log: list[str] = []

    @property
    def active(self) -> bool:
        return self._proxy is not None

    async def open(self, name: str, run_id: str, policy: AllowList) -> None:
        """The trial's network and proxy; raises `EnvironmentStartError` (and leaves
        nothing) when this engine or host cannot have them."""
        code, out, err = await docker(
            "network", "create", "--internal",
            "--label", f"{LABEL_MANAGED}=true", "--label", f"{LABEL_EGRESS}=true",
            "--label", f"{LABEL_RUN}={run_id}",
            "--label", f"{LABEL_OWNER}={current_owner().label()}", name,
        )  # fmt: skip
        if code != 0:
            raise EnvironmentStartError(f"cannot make the trial's network: {err.strip()[:200]}")
        self.network = name
        try:
            gateway, unused = await self._seal(out.strip())
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind((gateway, 0))
            listener.listen(128)
            proxy = EgressProxy(policy)
            await proxy.serve(listener)
        except BaseException:
            await self.close()
            raise
        self._proxy, self._log = proxy, proxy.denials
        port = listener.getsockname()[1]
        variables = proxy_variables(f"http://{gateway}:{port}")
        self._args = [
            "--network", name, "--dns", unused,
            *(arg for key, value in variables.items() for arg in ("-e", f"{key}={value}")),
        ]  # fmt: skip

    async def _seal(self, network_id: str) -> tuple[str, str]:
        """Forwarding off on the bridge; (gateway, an unused address of the subnet)."""
        code, out, err = await docker("network", "inspect", network_id)
        if code != 0:
            raise EnvironmentStartError(f"cannot inspect the trial's network: {err[:200]}")
        config = json.loads(out)[0]["IPAM"]["Config"][0]
        subnet = ipaddress.ip_network(config["Subnet"])
        gateway = config.get("Gateway") or str(next(subnet.hosts()))
        bridge = f"br-{network_id[:12]}"
        try:
            (_PROC_SYS / bridge / "forwarding").write_text("0\n")
        except OSError as exc:
            raise EnvironmentStartError(
                f"cannot seal the trial's network (forwarding off on {bridge}: {exc.strerror}):"
                " allowlisted networks on docker need Helios as root on the engine's host"
            ) from None
        return gateway, str(subnet.broadcast_address - 1)

    def run_args(self) -> list[str]:
        """`docker run`'s network arguments and the proxy's variables."""
        return list(self._args)

    def follow(self, network: Network) -> bool:
        """Take a phase's network as the proxy's policy: True if it could (an
        allowlist, or none: nothing gets through), False for a public one."""
        if self._proxy is None or network is True:
            return False
        self._proxy.policy = network if isinstance(network, AllowList) else DENY_ALL
        return True

    def denials(self) -> list[str]:
        return list(self._log)

    async def close(self) -> None:
        """The proxy, then the network (after the container: docker refuses before)."""
        proxy, self._proxy = self._proxy, None
        name, self.network = self.network, None
        if proxy is not None:
            await proxy.close()
        if name is not None:
            with contextlib.suppress(EnvironmentExecError):
                await docker("network", "rm", name)


async def remove_networks(run: str | None, *, force: bool = False) -> list[str]:
    """The trial networks of a run (None: those whose owner is gone; `force`: all)
    that no container uses any more."""
    code, out, _ = await docker(
        "network", "ls", "--filter", f"label={LABEL_EGRESS}=true", "--format",
        '{{.Name}}\t{{.Label "' + LABEL_RUN + '"}}\t{{.Label "' + LABEL_OWNER + '"}}',
    )  # fmt: skip
    if code != 0:
        return []
    removed: list[str] = []
    for line in out.splitlines():
        name, owner_run, owner = [*line.split("\t"), "", ""][:3]
        parsed = Owner.parse(owner) if owner else None
        if run is not None and owner_run != run:
            continue
        if run is None and not force and parsed is not None and parsed.alive():
            continue
        if name and (await docker("network", "rm", name))[0] == 0:
            removed.append(name)
    return removed
