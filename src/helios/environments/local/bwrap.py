"""The bwrap command line of one local-sandbox exec.

What the sandbox sees:
- its trial root at `/` (writable, persistent between execs);
- the host's system folders read-only. On merged-/usr hosts `/lib`, `/bin`...
  are symlinks; in the sandbox they are read-only binds of their targets on
  folders of the trial root. Such a folder is a mount point in every exec,
  so the agent can neither repoint nor rename it (an ld.so swap needs that);
- a fresh /proc, a read-only /dev with a /dev/shm; at `EXCHANGE_MOUNT` the
  sandbox's exchange folder (`Environment.exchange_dir`), a folder of the root
  hidden under /dev like /dev/shm's, so the host's path to it runs through
  nothing the agent can replace; no network, unless the
  task's network is public (`--share-net`: the host's network) or allowlisted
  (`--share-net` in the sandbox's egress namespace, `egress.netns`). When the root
  is Helios's tmpfs (Helios is root), /dev/shm is a folder of it, hidden under
  /dev (`SHM_FOLDER`), so its size and inode bounds hold there too: a tmpfs of
  bwrap's own has as many inodes as half the host's RAM pages.

Who runs it: when Helios is root, bwrap itself runs as an unprivileged host
user (`nobody`), mapped to root inside, so the sandbox cannot read root-only
host files (/etc/shadow) and the kernel enforces its process limit.

Its environment: bwrap starts with an empty environment plus what the sandbox
declares, so no key of Helios's own environment is in /proc/1/environ.
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

from helios.environments.local.limits import MIB, SHM_MB, LocalLimits, runs_as_root

#: host directories shared read-only with every sandbox
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TRANSFER_MOUNT = "/.helios-transfer"
#: the root's folder that is the sandbox's /dev/shm (/dev covers it inside)
SHM_FOLDER = "dev/shm"
#: the root's folder shared with the host for sockets, and where the sandbox sees it
EXCHANGE_FOLDER = "dev/.helios-exchange"
EXCHANGE_MOUNT = "/run/helios"
#: the host user a sandbox runs as when Helios is root
SANDBOX_UID = 65534
SANDBOX_GID = 65534
_TOOL_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


@functools.cache
def system_binds() -> tuple[tuple[str, str], ...]:
    """(host folder, sandbox path) pairs, read-only; symlinked ones resolved."""
    binds: list[tuple[str, str]] = []
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if not host.is_dir():
            continue
        source = host.resolve() if host.is_symlink() else host
        binds.append((str(source), f"/{name}"))
    return tuple(binds)


def mount_points() -> list[str]:
    """Top-level names the trial root needs as folders (the binds' mount points)."""
    return [dest.lstrip("/") for _, dest in system_binds()]


@functools.cache
def tool(name: str) -> str | None:
    return shutil.which(name, path=_TOOL_PATH)


@dataclass(frozen=True)
class BwrapCall:
    root: Path
    limits: LocalLimits
    env: dict[str, str]
    transfer: Path | None = None
    #: a token in the command line (set, then unset: invisible inside), so this
    #: exec's processes can be found from the host even once orphaned
    marker: str = ""
    #: the uid and gid the command runs as inside (None: root when Helios is
    #: root, else the invoking user); see `local.users`
    uid: int | None = None
    gid: int | None = None
    #: share the host's network (a task's `network_mode = "public"`)
    share_net: bool = False
    #: a network namespace to join instead (an allowlisted network: `egress.netns`)
    netns: str | None = None
    #: extra read-only binds (host file, sandbox path), after the system ones
    extra_binds: tuple[tuple[str, str], ...] = ()
    #: the command is the pid namespace's init (bwrap's --as-pid-1): nothing
    #: inside can kill it (the persistent shell's server, which reaps orphans)
    as_pid_1: bool = False
    #: the mount namespace that holds the root's tmpfs, to start bwrap in
    #: (`root.RootNamespace.entry`; None: the host's)
    mount_ns: str | None = None

    def argv(self, script: str) -> list[str]:
        return self.command_argv(["sh", "-c", script])

    def command_argv(self, command: list[str], *, own_limits: bool = False) -> list[str]:
        """The sandbox running `command` (after the limits) instead of `sh -c script`.
        `own_limits`: the command sets the limits itself (the compiled shell server),
        so no `prlimit` process runs before it."""
        bwrap, prlimit = tool("bwrap"), tool("prlimit")
        if bwrap is None or prlimit is None:
            raise FileNotFoundError("bwrap or prlimit")
        limits = [] if own_limits else self.limits.prlimit_argv(prlimit)
        share = self.share_net or self.netns is not None
        return [
            *self._namespace(),
            *self._identity(),
            bwrap, "--unshare-all", *(["--share-net"] if share else []), *self._user(),
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            *(["--as-pid-1"] if self.as_pid_1 else []),
            "--bind", str(self.root), "/",
            *[arg for source, dest in system_binds() for arg in ("--ro-bind", source, dest)],
            *[arg for source, dest in self.extra_binds for arg in ("--ro-bind", source, dest)],
            "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
            *self._shm(),
            "--bind", str(self.root / EXCHANGE_FOLDER), EXCHANGE_MOUNT,
            *self._transfer(),
            "--chdir", "/", "--clearenv",
            *(["--setenv", "HELIOS_EXEC", self.marker, "--unsetenv", "HELIOS_EXEC"]
              if self.marker else []),
            *[arg for key, value in self.env.items() for arg in ("--setenv", key, value)],
            *limits,
            *command,
        ]  # fmt: skip

    @property
    def _entered(self) -> bool:
        """bwrap starts in namespaces entered by `nsenter` (`_namespace`)."""
        return self.netns is not None or self.mount_ns is not None

    def _namespace(self) -> list[str]:
        """`nsenter` into the sandbox's mount namespace and the egress network
        namespace, each when there is one; as root it also drops to the sandbox's
        host user, as `setpriv` does otherwise (no setgroups left, uid and gid set)."""
        if not self._entered:
            return []
        nsenter = tool("nsenter")
        if nsenter is None:
            raise FileNotFoundError("nsenter")
        return [
            nsenter,
            *([f"--net={self.netns}"] if self.netns is not None else []),
            *([f"--mount={self.mount_ns}"] if self.mount_ns is not None else []),
            *([f"--setuid={SANDBOX_UID}", f"--setgid={SANDBOX_GID}"] if runs_as_root() else []),
            "--",
        ]  # fmt: skip

    def _identity(self) -> list[str]:
        if not runs_as_root() or self._entered:
            return []  # `_namespace`'s nsenter has set the identity
        setpriv = tool("setpriv")
        if setpriv is None:
            raise FileNotFoundError("setpriv")
        return [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups"]

    def _user(self) -> list[str]:
        if self.uid is not None:
            gid = self.uid if self.gid is None else self.gid
            return ["--unshare-user", "--uid", str(self.uid), "--gid", str(gid)]
        # Root inside, as in a container; an unprivileged user outside.
        return ["--unshare-user", "--uid", "0", "--gid", "0"] if runs_as_root() else []

    def _shm(self) -> list[str]:
        if runs_as_root():
            return ["--bind", str(self.root / SHM_FOLDER), "/dev/shm"]
        return ["--perms", "1777", "--size", str(SHM_MB * MIB), "--tmpfs", "/dev/shm"]

    def _transfer(self) -> list[str]:
        return [] if self.transfer is None else ["--bind", str(self.transfer), TRANSFER_MOUNT]


def sandbox_env(declared: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of an exec (also bwrap's own): defaults, then what the
    sandbox declares, then the exec's own variables."""
    env = {"PATH": SANDBOX_PATH, "HOME": "/root", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    env.update(declared)
    env.update(extra)
    return env
