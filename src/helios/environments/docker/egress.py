"""A docker sandbox's allowlisted network: a network of the trial's own,
`--internal`, whose gateway is not the host but a network namespace of Helios's
own (`egress.netns`), where the one listening socket is the trial's egress proxy.

Helios makes the namespace with one end of a veth pair in it, holding the trial
network's gateway address, and plugs the other end into the network's bridge;
the bridge loses its own address, so the host is not on the trial network at
all. The container's default route leads into that namespace, which forwards
nothing (a new namespace's `ip_forward` is 0) and has no other interface: the
proxy is all there is. Forwarding is turned off on the bridge too, should the
engine give it an address again. Docker's own resolver (127.0.0.11) is given
an upstream no one holds (an unused address of the trial's subnet, which the
host no longer routes), so it forwards no lookup out: names are resolved by the
proxy, and only allowed ones. The namespace, and with it the veth pair, ends
when Helios closes it or dies. This needs Helios as root on the engine's host.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from helios._proc import decode, run_process
from helios.environments.docker.cli import LABEL_MANAGED, LABEL_OWNER, LABEL_RUN, docker
from helios.environments.egress import DENY_ALL, AllowList, Network, proxy_variables
from helios.environments.egress.netns import PROXY_PORT, Namespace, available, make_namespace
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
        #: the proxy's namespace, the trial network's gateway
        self._namespace: Namespace | None = None
        #: the proxy's variables (HTTP_PROXY and the like), once open
        self.variables: dict[str, str] = {}
        #: the resolver a container is given: an address no one holds (see the module)
        self.dns = ""

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
            gateway, unused = await self._gateway(out.strip())
            proxy = EgressProxy(policy)
            assert self._namespace is not None
            await proxy.serve(self._namespace.listener)
        except BaseException:
            await self.close()
            raise
        self._proxy, self._log = proxy, proxy.denials
        variables = self.variables = proxy_variables(f"http://{gateway}:{PROXY_PORT}")
        self.dns = unused
        self._args = [
            "--network", name, "--dns", unused,
            *(arg for key, value in variables.items() for arg in ("-e", f"{key}={value}")),
        ]  # fmt: skip

    async def _gateway(self, network_id: str) -> tuple[str, str]:
        """The proxy's namespace as the network's gateway, the host off the network;
        (gateway, an unused address of the subnet)."""
        code, out, err = await docker("network", "inspect", network_id)
        if code != 0:
            raise EnvironmentStartError(f"cannot inspect the trial's network: {err[:200]}")
        config = json.loads(out)[0]["IPAM"]["Config"][0]
        subnet = ipaddress.ip_network(config["Subnet"])
        gateway = config.get("Gateway") or str(next(subnet.hosts()))
        bridge, peer = f"br-{network_id[:12]}", f"hlx{secrets.token_hex(5)}"
        ip = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin")
        if ip is None or available() is not None:
            raise EnvironmentStartError(
                "allowlisted networks on docker need Helios as root on the engine's host, "
                "with iproute2 (`ip`)"
            )

        def inside() -> None:  # in the namespace: its end of the pair, with the gateway
            for argv in (
                [ip, "link", "add", "gw0", "type", "veth", "peer", "name", peer,
                 "netns", str(os.getpid())],
                [ip, "addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", "gw0"],
                [ip, "link", "set", "gw0", "up"],
            ):  # fmt: skip
                subprocess.run(argv, check=True, capture_output=True, timeout=30)

        try:
            self._namespace = await make_namespace((gateway, PROXY_PORT), inside)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EnvironmentStartError(f"cannot make the trial's gateway: {exc}") from None
        for argv in (["addr", "flush", "dev", bridge], ["link", "set", peer, "master", bridge],
                     ["link", "set", peer, "up"]):  # fmt: skip
            result = await run_process([ip, *argv], timeout=30)
            if result.returncode != 0:
                raise EnvironmentStartError(
                    f"cannot plug the trial's gateway in ({' '.join(argv)}): "
                    f"{decode(result.stderr).strip()[:200]}"
                )
        with contextlib.suppress(OSError):
            (_PROC_SYS / bridge / "forwarding").write_text("0\n")
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
        namespace, self._namespace = self._namespace, None
        if proxy is not None:
            await proxy.close()
        if namespace is not None:
            namespace.close()
        if name is not None:
            await _remove_network(name)


async def _remove_network(name: str, within: float = 10.0) -> None:
    """`docker network rm`, again while the container's endpoint lingers (an `--rm`
    removal may still be under way); what is left goes at `helios cleanup`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    delay = 0.05
    while True:
        try:
            code, _, err = await docker("network", "rm", name)
        except EnvironmentExecError:
            return
        if code == 0 or "active endpoints" not in err or loop.time() > deadline:
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


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
