"""Which process owns a sandbox, and whether it is still alive.

`helios cleanup` must never take the sandboxes of a batch that is still
running. Each sandbox records its owner as `host:pid:start`; the start time
(clock ticks since boot, from /proc) tells a live owner from a new process
that happens to reuse the pid.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    pid: int
    #: start time in clock ticks; 0 when unknown (then the pid alone decides)
    start: int = 0

    def label(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        host, _, rest = text.strip().rpartition(":")
        host, _, pid = host.rpartition(":")
        try:
            return cls(host, int(pid), int(rest))
        except ValueError:
            return None

    def alive(self) -> bool:
        """True unless this owner is known to be gone. An owner on another host
        cannot be checked from here, so it counts as alive."""
        if self.host != hostname():
            return True
        if self.pid <= 0:
            return False
        start = process_start(self.pid)
        if start is None:
            return False
        return self.start == 0 or start == self.start


@functools.cache
def hostname() -> str:
    return socket.gethostname()


def current_owner() -> Owner:
    return _owner_of(os.getpid())


@functools.lru_cache(maxsize=4)
def _owner_of(pid: int) -> Owner:
    # Keyed by pid: a forked worker is an owner of its own. Asked once per sandbox.
    return Owner(hostname(), pid, process_start(pid) or 0)
