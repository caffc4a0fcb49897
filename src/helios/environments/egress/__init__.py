"""Allowlisted networks: a sandbox whose only way out is a filtering egress proxy.

`policy` says what an allowlist allows, `proxy` is the proxy Helios runs per
sandbox, `netns` is the local provider's network namespace for it (the docker
provider's internal network is `docker.egress`). See docs/tasks.md, "Networks".
"""

from helios.environments.egress.policy import DENY_ALL, AllowList, Network, describe, entry_error

__all__ = ["DENY_ALL", "NO_PROXY_HOSTS", "AllowList", "Network", "describe", "entry_error",
           "proxy_variables"]  # fmt: skip

#: what a sandbox's clients reach without the proxy: its own loopback services
NO_PROXY_HOSTS = ("localhost", "127.0.0.1", "::1")


def proxy_variables(url: str) -> dict[str, str]:
    """The variables that point a sandbox's HTTP clients at its proxy."""
    local = ",".join(NO_PROXY_HOSTS)
    return {
        "HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
        "ALL_PROXY": url, "all_proxy": url, "NO_PROXY": local, "no_proxy": local,
    }  # fmt: skip
