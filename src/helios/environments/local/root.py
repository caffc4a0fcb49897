"""A local sandbox's folder on the host: `<tmp>/helios-sandbox-*/{owner.json, root/}`.

`owner.json` names the run and the owning process, so `helios cleanup` can
tell leftovers from the sandboxes of a batch that is still running. When
Helios is root, `root/` is a tmpfs of the sandbox's storage size.

That tmpfs is mounted in a mount namespace of the sandbox's own (`RootNamespace`),
not the host's: every bwrap copies and reads the whole mount table of the namespace
it starts in, once per bind (about fifteen times), so with a tmpfs per running
sandbox in the host's table, a start cost grew with the sandboxes running (at 256,
reading the table was two thirds of bwrap's CPU and an eighth of the machine's).
A sandbox's bwraps start in its namespace (`nsenter`); the namespace ends with its
last process and the fd Helios holds, so a Helios killed outright leaves no mount.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from helios._proc import decode, last_line, run_process
from helios.environments.local.bwrap import (
    EXCHANGE_FOLDER,
    EXCHANGE_MOUNT,
    SANDBOX_GID,
    SANDBOX_UID,
    SHM_FOLDER,
    mount_points,
    tool,
)
from helios.environments.local.limits import inodes, runs_as_root
from helios.environments.shell.owner import Owner, current_owner
from helios.errors import EnvironmentStartError
from helios.settings import current as helios_settings

SANDBOX_PREFIX = "helios-sandbox-"
OWNER_FILE = "owner.json"
#: the file earlier versions wrote (a bare pid); still read by cleanup
LEGACY_OWNER_FILE = "owner.pid"
SKIPPED_ENV_FILES = {"Dockerfile", ".dockerignore"}
_MS_NOSUID, _MS_NODEV = 2, 4
_MS_REC, _MS_SLAVE = 0x4000, 0x80000
_MNT_DETACH = 2
_CLONE_FS, _CLONE_NEWNS = 0x200, 0x20000


@dataclass
class RootNamespace:
    """The mount namespace that holds a sandbox's root tmpfs: an fd of it (kept open
    while the sandbox lives, so its bwraps can enter it) and one of the root folder
    in it (the host's way to the root's files, e.g. the exchange folder's socket)."""

    namespace_fd: int
    root_fd: int

    def entry(self) -> str:
        """What `nsenter --mount=` takes."""
        return f"/proc/{os.getpid()}/fd/{self.namespace_fd}"

    def host_root(self) -> Path:
        """The host's path to the root's files (through the fd opened in the namespace)."""
        return Path(f"/proc/{os.getpid()}/fd/{self.root_fd}")

    def close(self) -> None:
        for fd in (self.root_fd, self.namespace_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.root_fd = self.namespace_fd = -1


def sandbox_base() -> Path:
    """Where sandbox folders go: $HELIOS_SANDBOX_DIR, else the temporary folder."""
    return Path(helios_settings().sandbox_dir or tempfile.gettempdir())


def create_root(
    run_id: str, trial_id: str, storage_mb: int, workdir: str, env_dir: Path | None
) -> tuple[Path, bool, RootNamespace | None]:
    """A sandbox's folder with its root's tmpfs mounted (as root) and laid out, in one
    thread hop: (holder, laid out, the tmpfs's own namespace). Not laid out when the
    tmpfs needs the `mount` command (no libc to call): the caller runs
    `mount_by_command`, then `populate`. The tmpfs is in the host's namespace when
    one of its own cannot be made (no `nsenter`, no unshare). On an error nothing is
    left behind."""
    holder = make_holder(run_id, trial_id)
    root = holder / "root"
    try:
        if runs_as_root() and tool("mount") is not None:
            libc = _libc()
            if libc is None:
                return holder, False, None
            options = storage_options(storage_mb)
            if tool("nsenter") is not None:
                namespace = _in_own_namespace(libc, root, options, workdir, env_dir)
                if namespace is not None:
                    return holder, True, namespace
            _mount_call(libc, root, options)
        populate(root, workdir, env_dir)
    except BaseException:
        remove_if_unmounted(holder)
        raise
    return holder, True, None


def _in_own_namespace(libc: ctypes.CDLL, root: Path, options: str, workdir: str,
                      env_dir: Path | None) -> RootNamespace | None:  # fmt: skip
    """Mount and lay out `root` in a new mount namespace, made by a thread of its own
    (a thread may unshare its mount namespace; it ends with it, so no thread of the
    process is left in it); None, with nothing made, when the kernel refuses one."""
    made: list[RootNamespace] = []
    failed: list[BaseException] = []

    def body() -> None:
        try:
            if libc.unshare(_CLONE_FS | _CLONE_NEWNS) != 0:
                return  # refused (a container without the right): the host's namespace
            # the tmpfs must not propagate back to the host's namespace
            if libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
                return
            _mount_call(libc, root, options)
            populate(root, workdir, env_dir)
            root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                namespace_fd = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            except BaseException:
                os.close(root_fd)
                raise
            made.append(RootNamespace(namespace_fd, root_fd))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=body, name="helios-sandbox-root", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0] if made else None


def make_holder(run_id: str, trial_id: str) -> Path:
    base = sandbox_base()
    if runs_as_root() and not _traversable(base):
        raise EnvironmentStartError(
            f"the sandbox user (uid {SANDBOX_UID}) cannot reach {base}: set "
            "HELIOS_SANDBOX_DIR (or TMPDIR) to a folder others may traverse, such as /tmp"
        )
    holder = Path(tempfile.mkdtemp(prefix=SANDBOX_PREFIX, dir=base))
    # The sandbox user (nobody, when Helios is root) must reach root/ and its
    # transfer folders, and nothing else here.
    holder.chmod(0o711)
    owner = {"owner": current_owner().label(), "run": run_id, "trial": trial_id}
    (holder / OWNER_FILE).write_text(json.dumps(owner))
    (holder / "root").mkdir()
    return holder


def _traversable(path: Path) -> bool:
    """Every folder on the way to `path` lets others through (o+x). A yes is kept
    for the process: it is asked once per sandbox."""
    if path in _TRAVERSABLE:
        return True
    try:
        found = all(folder.stat().st_mode & 0o001 for folder in (path, *path.parents))
    except OSError:
        return False
    if found:
        _TRAVERSABLE.add(path)
    return found


_TRAVERSABLE: set[Path] = set()


def read_owner(holder: Path) -> tuple[Owner | None, str | None]:
    """(owner, run id) of a holder; (None, None) when unknown."""
    try:
        data = json.loads((holder / OWNER_FILE).read_text())
        return Owner.parse(str(data.get("owner", ""))), str(data.get("run") or "") or None
    except (OSError, ValueError, AttributeError):
        pass
    try:
        pid = int((holder / LEGACY_OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        return None, None
    return Owner(current_owner().host, pid), None


async def mount_by_command(root: Path, storage_mb: int) -> None:
    """Make `root` a tmpfs of `storage_mb` with the `mount` command: the fallback of
    `create_root` (which calls mount(2) itself) where libc cannot be called."""
    mount = tool("mount")
    assert mount is not None  # create_root asks for this path only when it exists
    options = storage_options(storage_mb) + ",nosuid,nodev"
    result = await run_process(
        [mount, "-t", "tmpfs", "-o", options, "helios-sandbox", str(root)], timeout=30
    )
    if result.returncode != 0:
        raise EnvironmentStartError(
            f"could not mount the sandbox's tmpfs: {last_line(decode(result.stderr), 'mount')}"
        )


def storage_options(storage_mb: int) -> str:
    """The root tmpfs's options: its size, and as many inodes as that size allows
    (a tmpfs's default is half the host's RAM pages, whatever its size)."""
    return (f"size={storage_mb}m,nr_inodes={inodes(storage_mb)},mode=0755,"
            f"uid={SANDBOX_UID},gid={SANDBOX_GID}")  # fmt: skip


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_ulong, ctypes.c_char_p]  # fmt: skip
        libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        libc.unshare.argtypes = [ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


def _mount_call(libc: ctypes.CDLL, root: Path, options: str) -> None:
    flags = _MS_NOSUID | _MS_NODEV
    if libc.mount(b"helios-sandbox", os.fsencode(root), b"tmpfs", flags, options.encode()) != 0:
        reason = os.strerror(ctypes.get_errno())
        raise EnvironmentStartError(f"could not mount the sandbox's tmpfs: {reason}")


def _umount_call(libc: ctypes.CDLL, point: str) -> bool:
    return bool(libc.umount2(os.fsencode(point), _MNT_DETACH) == 0)


def mounts_under(path: Path, table: Path = Path("/proc/self/mountinfo")) -> list[str]:
    """Mount points at or below `path`, deepest first (in this process's mount
    namespace, or the one whose `mountinfo` is `table`)."""
    prefix = str(path)
    found: list[str] = []
    try:
        lines = table.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def unmount_own(root: Path) -> bool:
    """Unmount the one mount Helios made in a sandbox's folder, its root's tmpfs, and
    tell whether `root` is now plainly part of its parent's filesystem. Nothing else
    is ever mounted there in the host's namespace (the sandbox's own mounts live in
    its namespace), so this spares reading the host's whole mount table per trial,
    which grows with the sandboxes running. False: look through the table."""
    try:
        parent = os.stat(root.parent).st_dev
        if os.stat(root).st_dev == parent:
            return True
        libc = _libc()
        return (
            libc is not None and _umount_call(libc, str(root)) and (os.stat(root).st_dev == parent)
        )
    except OSError:
        return False


def remove_if_unmounted(holder: Path) -> bool:
    """The usual end of a sandbox's folder, in one go (run it in a thread): its
    tmpfs unmounted, the folder deleted. False, and nothing deleted, when a mount
    may remain under it."""
    if not unmount_own(holder / "root"):
        return False
    remove_tree(holder)
    return True


def remove_tree(path: Path) -> None:
    """Delete a folder the sandbox filled, however deep (run it in a thread):
    shutil.rmtree recurses once per level and fails past ~1,000 (a RecursionError,
    which ignore_errors does not cover); `rm -rf` does not recurse. What cannot be
    deleted stays, as with ignore_errors."""
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):
        rm = tool("rm")
        if rm is not None:
            subprocess.run([rm, "-rf", "--", str(path)], capture_output=True, timeout=300)


async def unmount_all(path: Path) -> None:
    points = mounts_under(path)
    if not points:
        return
    umount, libc = tool("umount"), _libc()
    for point in points:
        # Lazy: a process that is still dying must not keep the folder forever.
        if libc is not None and await asyncio.to_thread(_umount_call, libc, point):
            continue
        if umount is not None:
            await run_process([umount, "-l", point], timeout=30)


def workdir_in(root: Path, workdir: str) -> Path:
    """The host path of the sandbox's working directory; refuses one that leaves the root."""
    path = PurePosixPath(workdir)
    if not path.is_absolute():
        raise EnvironmentStartError(f"the working directory {workdir!r} is not absolute")
    if ".." in path.parts:
        raise EnvironmentStartError(f"the working directory {workdir!r} leaves the sandbox")
    return root.joinpath(*path.parts[1:])


def populate(root: Path, workdir: str, env_dir: Path | None) -> None:
    """Lay out a fresh trial root. Runs before any sandboxed process exists, so no
    path here can hold a link the agent planted."""
    for name in mount_points():
        (root / name).mkdir(exist_ok=True)
    target = workdir_in(root, workdir)
    target.mkdir(parents=True, exist_ok=True)
    for sub in ("logs/agent", "logs/verifier", "tmp", "root", SHM_FOLDER, EXCHANGE_FOLDER,
                EXCHANGE_MOUNT.lstrip("/")):  # fmt: skip
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / SHM_FOLDER).chmod(0o1777)
    if env_dir is not None and env_dir.is_dir():
        _copy_environment(env_dir, target)
    if runs_as_root():
        _give_to_sandbox_user(root)


def _copy_environment(env_dir: Path, target: Path) -> None:
    # Links are copied as links: they resolve inside the sandbox, never on the host.
    for entry in env_dir.iterdir():
        if entry.name in SKIPPED_ENV_FILES:
            continue
        dest = target / entry.name
        if entry.is_symlink():
            dest.symlink_to(os.readlink(entry))
        elif entry.is_dir():
            shutil.copytree(entry, dest, symlinks=True)
        elif entry.is_file():
            shutil.copy2(entry, dest)


def _give_to_sandbox_user(root: Path) -> None:
    os.lchown(root, SANDBOX_UID, SANDBOX_GID)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), SANDBOX_UID, SANDBOX_GID)


def give_tree(path: Path) -> None:
    """Hand a transfer folder to the sandbox user (root only)."""
    if runs_as_root():
        _give_to_sandbox_user(path)
