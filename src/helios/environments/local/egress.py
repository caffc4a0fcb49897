"""A local sandbox's allowlisted network: its egress proxy, serving a socket in a
network namespace of the sandbox's own (`egress.netns`), made when a phase first
needs it and kept to the sandbox's end; a later phase's allowlist is a new policy
for the same proxy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.environments.egress import AllowList, Network, proxy_variables
from helios.errors import EnvironmentStartError

# The namespace and the proxy are imported by a sandbox whose phase has an allowlist
# (`follow`): a batch of public or no-network tasks never does.
if TYPE_CHECKING:
    from helios.environments.egress.netns import Namespace
    from helios.environments.egress.proxy import EgressProxy


class LocalEgress:
    def __init__(self) -> None:
        self._namespace: Namespace | None = None
        self._proxy: EgressProxy | None = None
        #: the proxy's denials, kept past its end for the trial's folder
        self._log: list[str] = []

    async def follow(self, network: Network) -> None:
        """Ready for `network`: the proxy (made if need be) takes an allowlist's policy."""
        if not isinstance(network, AllowList):
            return
        if self._proxy is not None:
            self._proxy.policy = network
            return
        from helios.environments.egress.netns import available, make_namespace
        from helios.environments.egress.proxy import EgressProxy

        missing = available()
        if missing is not None:
            raise EnvironmentStartError(missing)
        namespace = await make_namespace()
        proxy = EgressProxy(network)
        try:
            await proxy.serve(namespace.listener)
        except BaseException:
            namespace.close()
            raise
        self._namespace, self._proxy, self._log = namespace, proxy, proxy.denials

    def netns(self, network: Network) -> str | None:
        """The namespace a command under `network` joins (None: bwrap's own or the host's)."""
        if isinstance(network, AllowList) and self._namespace is not None:
            return self._namespace.path
        return None

    def variables(self, network: Network) -> dict[str, str]:
        if isinstance(network, AllowList):
            from helios.environments.egress.netns import PROXY_PORT

            return proxy_variables(f"http://127.0.0.1:{PROXY_PORT}")
        return {}

    def denials(self) -> list[str]:
        return list(self._log)

    async def close(self) -> None:
        proxy, self._proxy = self._proxy, None
        namespace, self._namespace = self._namespace, None
        if proxy is not None:
            await proxy.close()
        if namespace is not None:
            namespace.close()
