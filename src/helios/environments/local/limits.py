"""Resource limits of the local (bubblewrap) sandbox.

Without cgroups (see `describe`), the limits are per-process rlimits set inside
the sandbox's own user namespace, where the kernel counts processes per
namespace, plus, when Helios runs as root, a size-limited tmpfs as the
sandbox's root:
- processes: RLIMIT_NPROC = the spec's `pids` (a fork bomb stops there);
- memory: RLIMIT_DATA = `memory_mb` per process (heap and private mappings);
- storage: the tmpfs size (root) and RLIMIT_FSIZE = `storage_mb` per file;
- files: the tmpfs's inode count (`inodes`). A tmpfs inode is unswappable kernel
  memory (about 1 KiB with its dentry) that no size limit counts: without the
  bound, millions of empty files in a 64 MB sandbox took gigabytes of the host's
  slab. /dev/shm is a folder of the same tmpfs (`local.bwrap`), under the same bounds.

Run `python -m helios.environments.local.limits` to see what this machine uses.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from helios.environments.spec import SandboxSpec

#: writable storage of a local sandbox when the task declares none (a tmpfs
#: lives in memory and swap, so the default stays modest)
DEFAULT_STORAGE_MB = 2048
#: /dev/shm of a sandbox without a tmpfs root (Helios not root)
SHM_MB = 64
MIB = 1024 * 1024
#: one inode (a file, folder or link) per this many bytes of storage, and at least
#: MIN_INODES: a 2 GiB sandbox holds 262,144 entries, their kernel memory ~0.25 GiB
BYTES_PER_INODE = 8192
MIN_INODES = 16384


def inodes(storage_mb: int) -> int:
    """How many files, folders and links a sandbox of `storage_mb` may hold."""
    return max(MIN_INODES, storage_mb * MIB // BYTES_PER_INODE)


@dataclass(frozen=True, slots=True)
class LocalLimits:
    memory_mb: int
    pids: int
    storage_mb: int

    @classmethod
    def from_spec(cls, spec: SandboxSpec) -> LocalLimits:
        storage = spec.storage_mb if spec.storage_mb is not None else DEFAULT_STORAGE_MB
        return cls(memory_mb=spec.memory_mb, pids=spec.pids, storage_mb=storage)

    def rlimit_values(self) -> list[str]:
        """RLIMIT_NPROC, RLIMIT_DATA and RLIMIT_FSIZE, in that order (soft = hard)."""
        return [str(self.pids), str(self.memory_mb * MIB), str(self.storage_mb * MIB)]

    def prlimit_argv(self, prlimit: str) -> list[str]:
        """A `prlimit` prefix run inside the sandbox: soft = hard, so nothing
        inside can raise them again."""
        nproc, data, fsize = self.rlimit_values()
        return [prlimit, f"--nproc={nproc}:{nproc}", f"--data={data}:{data}",
                f"--fsize={fsize}:{fsize}", "--"]  # fmt: skip


def runs_as_root() -> bool:
    return os.geteuid() == 0


def prlimit_binary() -> str | None:
    return shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")


def cgroup2_controllers() -> set[str]:
    """The controllers of a pure cgroup v2 hierarchy at /sys/fs/cgroup (empty on
    cgroup v1 or hybrid machines, where v2 has no memory or pids controller)."""
    try:
        text = Path("/sys/fs/cgroup/cgroup.controllers").read_text()
    except OSError:
        return set()
    return set(text.split())


def describe() -> str:
    """One line: which mechanism bounds the local sandbox here."""
    storage = (
        f"a size-limited tmpfs root with one inode per {BYTES_PER_INODE} bytes "
        f"(at least {MIN_INODES}; Helios runs as root)"
        if runs_as_root()
        else "RLIMIT_FSIZE per file only (not root: no tmpfs root; total storage unbounded)"
    )
    v2 = cgroup2_controllers()
    cgroups = (
        f"cgroup v2 controllers available ({' '.join(sorted(v2))}) but not used"
        if v2
        else "no cgroup v2 controllers here"
    )
    return (
        f"local sandbox limits: rlimits (NPROC=pids, DATA=memory_mb, FSIZE=storage_mb) "
        f"+ {storage}; cpus not enforced; {cgroups}"
    )


if __name__ == "__main__":
    print(describe())
