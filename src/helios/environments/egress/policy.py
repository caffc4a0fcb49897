"""An allowlist: which destinations a sandbox with `network_mode = "allowlist"`
may reach through its egress proxy (`egress.proxy`).

Entries are Harbor's `allowed_hosts`:
- a host name, `pypi.org`: that name only;
- a wildcard, `*.pythonhosted.org`: any name under it (not the bare suffix);
- an IP address, `10.1.2.3`, or a CIDR block, `10.0.0.0/8`: addresses a client
  names literally (CONNECT 10.1.2.3:443).

A name is matched as a name and an address as an address: a literal address that
an allowed name resolves to is denied unless an address rule allows it, and a
name that no name rule allows is denied without being resolved, so the proxy's
own lookups carry nothing but allowed names (DNS is no side channel; see
docs/tasks.md). Every port of an allowed destination is allowed.

`endpoints` are Helios's own, never a task's: `host:port` pairs allowed on that
port alone (an installed agent's model endpoint, `with_endpoint`), matched as the
client names the host, like the rest.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Block = ipaddress.IPv4Network | ipaddress.IPv6Network
#: a valid host name label (letters, digits, -, _)
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def _name(text: str) -> str | None:
    """`text` as a lower-case host name without its final dot; None if it is not one."""
    name = text.strip().lower().rstrip(".")
    labels = name.split(".")
    if not name or len(name) > 253 or any(
        not label or len(label) > 63 or not set(label) <= _LABEL_CHARS for label in labels
    ):
        return None
    return name


def _block(entry: str) -> Block | None:
    """An address or CIDR entry as a block (an address is a block of one)."""
    try:
        return ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return None


def _plain_name(entry: str) -> str | None:
    """A host-name entry's name (not a wildcard, address or block)."""
    if entry.strip().startswith("*.") or _block(entry) is not None:
        return None
    return _name(entry)


def _address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class AllowList:
    """The parsed `allowed_hosts` (in their order, for the record).

    It is falsy: code that asks "is the network public?" with a truth test (a
    `SandboxSpec.network` of True) gets no, the safe answer."""

    hosts: tuple[str, ...] = ()
    #: `(host, port)` pairs allowed on that port only (a model endpoint)
    endpoints: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        for entry in (*self.hosts, *(host for host, _ in self.endpoints)):
            error = entry_error(entry)
            if error is not None:
                raise ValueError(error)
        for _, port in self.endpoints:
            if not 0 < port < 65536:
                raise ValueError(f"bad endpoint port {port!r}")

    def with_endpoint(self, host: str, port: int) -> AllowList:
        """This allowlist and `host:port` besides (only that port of it)."""
        pair = (_canonical(host), port)
        if pair in self.endpoints:
            return self
        return AllowList(self.hosts, (*self.endpoints, pair))

    def __bool__(self) -> bool:
        return False

    @property
    def _names(self) -> frozenset[str]:
        return frozenset(n for e in self.hosts if (n := _plain_name(e)) is not None)

    @property
    def _suffixes(self) -> tuple[str, ...]:
        return tuple("." + n for e in self.hosts if e.strip().startswith("*.")
                     and (n := _name(e.strip()[2:])) is not None)  # fmt: skip

    @property
    def _blocks(self) -> tuple[Block, ...]:
        return tuple(b for e in self.hosts if (b := _block(e)) is not None)

    def verdict(self, host: str, port: int | None = None) -> str | None:
        """None when `host` (a name or a literal address) is allowed, on `port` if
        given (an endpoint allows its own port alone), else why not."""
        if port is not None and (_canonical(host), port) in self.endpoints:
            return None
        address = _address(host)
        if address is not None:
            if any(address in block for block in self._blocks):
                return None
            return "address not in allowed_hosts"
        name = _name(host)
        if name is None:
            return "not a host name"
        if name in self._names or name.endswith(self._suffixes):
            return None
        return "name not in allowed_hosts"

    def record(self) -> dict[str, object]:
        """What a trial's config and result say of it."""
        record: dict[str, object] = {"mode": "allowlist", "allowed_hosts": list(self.hosts)}
        if self.endpoints:
            record["endpoints"] = [f"{_bracketed(h)}:{p}" for h, p in self.endpoints]
        return record


def _canonical(host: str) -> str:
    """A host as endpoints compare it: an address in its short form, a name in
    lower case without its final dot."""
    address = _address(host)
    if address is not None:
        return str(address)
    return host.strip().lower().rstrip(".")


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def entry_error(entry: str) -> str | None:
    """Why `entry` is not an allowed_hosts entry (None: it is one)."""
    text = entry.strip()
    if text.startswith("*."):
        return None if _name(text[2:]) is not None else f"bad wildcard {entry!r}"
    if _block(text) is not None or _name(text) is not None:
        return None
    return f"{entry!r} is not a host name, '*.suffix' wildcard, IP address or CIDR block"


#: a phase's or a sandbox's network: True = public, False = none, an AllowList
Network = bool | AllowList
#: nothing gets through (a phase with no network in an allowlisted sandbox)
DENY_ALL = AllowList(())


def describe(network: Network) -> str | dict[str, object]:
    """The network as a trial's records say it."""
    if isinstance(network, AllowList):
        return network.record()
    return "public" if network else "no-network"
