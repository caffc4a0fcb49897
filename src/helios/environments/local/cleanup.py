"""Finding and removing local sandboxes: their processes, mounts and folders.

A sandbox's processes are found from the host by their bwrap command line,
which binds `<tmp>/helios-sandbox-*/root` at `/`. That finds them even when
the Helios process that started them lost track (a cancel during the spawn,
CPython gh-103847) or died (kill -9).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from helios.environments.local.root import (
    SANDBOX_PREFIX,
    read_owner,
    remove_if_unmounted,
    remove_tree,
    sandbox_base,
    unmount_all,
)


def marked_processes(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (one exec's token)."""
    needle = marker.encode()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if needle in handle.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


async def kill_marked(marker: str, *, within: float = 5.0) -> bool:
    """Kill the processes of one exec (its outer bwrap and its sandbox init, which
    may have lost its parent); True once none is left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while pids := await asyncio.to_thread(marked_processes, marker):
        if loop.time() > deadline:
            return False
        for pid in pids:
            _kill(pid)
        await asyncio.sleep(0.02)
    return True


def sandbox_processes() -> dict[int, Path]:
    """pid → sandbox folder, for every bwrap process of a Helios sandbox on this host."""
    found: dict[int, Path] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        holder = _holder_of(argv)
        if holder is not None:
            found[int(name)] = holder
    return found


def _holder_of(argv: list[bytes]) -> Path | None:
    if not argv or os.path.basename(argv[0]) not in (b"bwrap", b"setpriv", b"nsenter"):
        return None
    for index, arg in enumerate(argv[:-2]):
        if arg == b"--bind" and argv[index + 2] == b"/":
            root = Path(os.fsdecode(argv[index + 1]))
            if root.parent.name.startswith(SANDBOX_PREFIX):
                return root.parent
    return None


async def kill_processes(
    holder: Path, *, within: float = 5.0, spare: frozenset[int] | set[int] = frozenset()
) -> bool:
    """Kill every process of one sandbox but the outer processes in `spare` (the
    persistent shells kept, whose namespaces hold only what their servers
    allow); True once none other is left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        pids = [pid for pid, h in (await asyncio.to_thread(sandbox_processes)).items()
                if h == holder and pid not in spare]  # fmt: skip
        if not pids:
            return True
        if loop.time() > deadline:
            return False
        for pid in pids:
            _kill(pid)
        await asyncio.sleep(0.05)


def _kill(pid: int) -> None:
    # Its group too: the outer bwrap leads one (start_new_session), and killing
    # the sandbox's init kills its whole pid namespace.
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


async def remove_holder(holder: Path, *, scan: bool = True) -> None:
    """Kill what is left of a sandbox, unmount and delete its folder. `scan=False`
    when its owner knows every sandbox init it started has ended: the look
    through every process's command line is then skipped (it costs about 10 ms
    with a few hundred sandboxes running)."""
    if scan:
        await kill_processes(holder)
    elif await asyncio.to_thread(remove_if_unmounted, holder):
        return
    await unmount_all(holder / "root")
    await asyncio.to_thread(remove_tree, holder)


def _chosen(holder: Path, run_id: str | None, force: bool) -> bool:
    owner, run = read_owner(holder)
    if run_id is not None:
        return run == run_id
    return force or owner is None or not owner.alive()


async def cleanup_sandboxes(run_id: str | None, *, force: bool = False) -> list[str]:
    """Remove the sandboxes of one run (or, with None, of dead owners; `force`:
    all), and kill bwrap processes whose sandbox folder is gone. Returns what went."""
    holders = [h for h in sandbox_base().glob(f"{SANDBOX_PREFIX}*") if h.is_dir()]
    removed: list[str] = []
    for holder in holders:
        if _chosen(holder, run_id, force):
            await remove_holder(holder)
            removed.append(str(holder))
    if run_id is None:
        for pid, holder in (await asyncio.to_thread(sandbox_processes)).items():
            if not holder.exists():
                _kill(pid)
                removed.append(f"orphaned sandbox process {pid}")
    return removed
