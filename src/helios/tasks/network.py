"""A task's networks as the sandbox providers take them: `network_mode` and
`allowed_hosts` of `[environment]` (the baseline) and of each phase, as
public (True), none (False) or an `AllowList`."""

from __future__ import annotations

from helios.environments.egress import AllowList, Network
from helios.tasks.schema_env import EnvironmentConfig, NetworkMode


def phase_network(mode: NetworkMode | None, hosts: list[str] | None) -> Network | None:
    """A table's own network (None: it names none). `allowed_hosts` without a
    `network_mode` is an allowlist too."""
    if mode == "allowlist" or (mode is None and hosts is not None):
        return AllowList(tuple(hosts or ()))
    if mode is None:
        return None
    return mode == "public"


def sandbox_network(env: EnvironmentConfig, default: bool = True) -> Network:
    """An `[environment]` table's network from the start (`default`: the run's for
    a table that names none)."""
    own = phase_network(env.network_mode, env.allowed_hosts)
    return own if isinstance(own, AllowList) else env.network_public(default)
