"""A sandbox shell's server process as the host sees it (by /proc, no tracing): a
pidfd of it, what a command of the same uid could change in it, its children and
who they are inside the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

#: (limits, nice value, scheduling policy, CPU set) of a process
ServerState = tuple[str, int, int, frozenset[int]]


def server_state(pid: int) -> ServerState | None:
    """What a process of the same uid, without tracing it, may change in another and
    its children inherit: its resource limits (lowered with prlimit), its nice value
    (raised), its scheduling policy and its CPU affinity. None if it is gone."""
    try:
        limits = Path(f"/proc/{pid}/limits").read_text()
        nice = os.getpriority(os.PRIO_PROCESS, pid)
        return limits, nice, os.sched_getscheduler(pid), frozenset(os.sched_getaffinity(pid))
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """A single-threaded process's children (host pids)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def identity(pid: int) -> tuple[int, int] | None:
    """A host process's (pid in its own namespace, start time), as its server knows
    it; None once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    inner = next((ln.split()[-1] for ln in status.splitlines() if ln.startswith("NSpid:")), "")
    fields = stat.rpartition(b") ")[2].split()
    if not inner.isdigit() or len(fields) < 20:
        return None
    return int(inner), int(fields[19])


def server_pidfd(bwrap: int) -> tuple[int, int] | None:
    """A pidfd of the server and its pid: the only child of the sandbox's outer bwrap
    (with `--as-pid-1` there is no separate init)."""
    try:
        children = Path(f"/proc/{bwrap}/task/{bwrap}/children").read_text().split()
    except OSError:
        return None
    if len(children) != 1:
        return None
    try:
        return os.pidfd_open(int(children[0])), int(children[0])
    except OSError:
        return None
