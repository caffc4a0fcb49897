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

    def __post_init__(self) -> None:
        for entry in self.hosts:
            error = entry_error(entry)
            if error is not None:
                raise ValueError(error)

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

    def verdict(self, host: str) -> str | None:
        """None when `host` (a name or a literal address) is allowed, else why not."""
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
        return {"mode": "allowlist", "allowed_hosts": list(self.hosts)}


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
