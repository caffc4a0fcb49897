"""Local provider: a bubblewrap sandbox per trial, no Docker needed.

Each trial gets a fresh root directory bound at `/`; the host's system
directories are mounted read-only over it, so the sandbox has the host's tools
but cannot see the host's home, the repository or any other trial. Commands
run in a persistent shell (`shell.client`): one `bwrap` per sandbox (and user and
network) with no network, its own pid namespace and die-with-parent, whose
server runs one command at a time and kills every other process of its
namespace when a command ends, so no process outlives the command that started
it, but Helios's own *services* (`start_service`: a desktop's X server), which
the server started and its kills spare. Without a shell server here (compiled,
or the system Python), or when the shell is busy, a command is its own one-shot
`bwrap`, with the same guarantees (and no services: `supports_services` False).
Files persist between commands through the trial's root. See `local.bwrap` for what
the sandbox sees and who it runs as, and `local.limits` for its resource limits.

Its paths and who needs each: the compiled shell server (`shell.native`: a host with
a C compiler, the default); its Python twin (`shell/server.py`: a host without a
compiler, or HELIOS_LOCAL_SHELL=python); the one-shot bwrap (a host with neither a
compiler nor a system python3, HELIOS_LOCAL_SHELL=0, and, on every host, a command
sent while its shell is busy: two commands at once). Tests: tests/test_local_shell.py
(both servers, and `test_one_shot_fallback_keeps_working`), tests/test_local_env.py.

The Dockerfile is not run: the build context's files (a task's `environment/`) are copied into the
working directory. Tasks whose Dockerfile installs software need docker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import posixpath
import secrets
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import ClassVar

import helios.environments.local.root as _local_root
import helios.environments.shell.transfer as _shell_transfer
from helios._proc import decode, last_line, run_process, run_to_end
from helios.environments.base import ExecResult, FileSteps, User
from helios.environments.egress import Network
from helios.environments.local.bwrap import (
    TRANSFER_MOUNT,
    BwrapCall,
    sandbox_env,
    tool,
)
from helios.environments.local.cleanup import (
    cleanup_sandboxes,
    kill_marked,
    kill_processes,
    remove_holder,
)
from helios.environments.local.egress import LocalEgress
from helios.environments.local.limits import LocalLimits, runs_as_root
from helios.environments.local.pool import ShellPool
from helios.environments.local.services import LocalServices
from helios.environments.local.users import LocalUsers, SandboxUser
from helios.environments.shell.client import SandboxShell, Sink
from helios.environments.shell.payload import place_payload
from helios.environments.shell.safe_copy import Bounds, DownloadMissing, copy_out
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentExecError, EnvironmentUnavailable

INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `apt-get install bubblewrap` "
    "(Debian/Ubuntu) or `dnf install bubblewrap` (Fedora), or use --provider docker"
)


class LocalEnvironment(LocalServices):
    name: ClassVar[str] = "local"
    #: as far as one user namespace allows: see `local.users`
    supports_users: ClassVar[bool] = True
    #: every exec is its own bwrap, so each can have its own network
    dynamic_network: ClassVar[bool] = True
    #: in a network namespace of its own whose only way out is the proxy (`egress.netns`)
    supports_allowlist: ClassVar[bool] = True

    def __init__(self, spec: SandboxSpec, *, trial_id: str, run_id: str) -> None:
        super().__init__(spec, trial_id=trial_id, run_id=run_id)
        self.root: Path | None = None
        self._holder: Path | None = None
        #: the mount namespace of the root's tmpfs (None: the host's, or no tmpfs)
        self._namespace: _local_root.RootNamespace | None = None
        self._users: LocalUsers | None = None
        self.limits = LocalLimits.from_spec(spec)
        #: persistent shells: one bwrap for many commands (see `local.pool`)
        self._pool = ShellPool()
        #: a sandbox init may have escaped our bookkeeping (a cancel, a timeout, a
        #: shell that died): look through the host's processes before trusting it
        self._dirty = False
        #: one-shot bwraps running now
        self._running = 0
        #: the shell each service lives in, by name
        self._services: dict[str, SandboxShell] = {}
        #: the proxy and namespace of an allowlisted network (made when first needed)
        self._egress = LocalEgress()
        #: host folders shown read-only to later commands (`mount_readonly`)
        self._mounts: list[tuple[str, str]] = []

    @classmethod
    async def preflight(cls) -> None:
        _require_tools()
        probe = LocalEnvironment(SandboxSpec(label="preflight"), trial_id="probe", run_id="")
        try:
            await probe.start()
            result = await probe.exec("true", cwd="/")
        except EnvironmentUnavailable:
            raise
        except Exception as exc:
            raise EnvironmentUnavailable(_unusable(str(exc))) from None
        finally:
            await probe.stop()
        if result.exit_code != 0:
            raise EnvironmentUnavailable(_unusable(last_line(result.stderr, "unknown")))

    @classmethod
    async def cleanup_run(cls, run_id: str | None, *, force: bool = False) -> list[str]:
        return await cleanup_sandboxes(run_id, force=force)

    async def start(self) -> None:
        _require_tools()
        holder, laid_out, self._namespace = await self._create_root()
        root = holder / "root"
        self._users = LocalUsers(holder)
        self.root = root
        await self._egress.follow(self.network)
        if not laid_out:
            await _local_root.mount_by_command(root, self.limits.storage_mb)
            await asyncio.to_thread(
                _local_root.populate, root, self.workdir, self.spec.build_context
            )
        # The first command's shell starts now, while the agent's first model
        # call is in flight, not when that command arrives.
        await self._pool.prepare()
        self._pool.warm(self._root_call(self.marker()))

    async def _create_root(self) -> tuple[Path, bool, _local_root.RootNamespace | None]:
        """The sandbox's folder, made in a thread. A cancel meanwhile waits for the
        thread and records the folder first, so `stop` removes it (else it would
        wait for the run's last cleanup)."""
        creating = asyncio.ensure_future(asyncio.to_thread(
            _local_root.create_root, self.run_id, self.trial_id,
            self.limits.storage_mb, self.workdir, self.spec.build_context,
        ))  # fmt: skip
        try:
            made = await asyncio.shield(creating)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await run_to_end(creating)
            if creating.done() and not creating.cancelled() and creating.exception() is None:
                self._holder, _, self._namespace = creating.result()
            raise
        self._holder = made[0]
        return made

    @staticmethod
    def marker() -> str:
        return f"helios-exec-{secrets.token_hex(8)}"

    def _root_call(self, marker: str) -> BwrapCall:
        """A command as the sandbox's default user, with its own variables only."""
        assert self.root is not None and self._users is not None
        env = sandbox_env(self._declared(None), {})
        return BwrapCall(self.root, self.limits, env, None, marker, share_net=self.network is True,
                         netns=self._egress.netns(self.network),
                         extra_binds=(*self._users.binds(), *self._mounts),
                         mount_ns=self._mount_ns())  # fmt: skip

    def _mount_ns(self) -> str | None:
        return None if self._namespace is None else self._namespace.entry()

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        user: User | None = None,
    ) -> ExecResult:
        who = await self._user(user) if user is not None else None
        return await self._exec(command, cwd or self.workdir, env or {}, timeout, who=who)

    async def _user(self, user: User) -> SandboxUser:
        if self._users is None:
            raise EnvironmentExecError("sandbox is not running")
        return await asyncio.to_thread(self._users.resolve, user)

    async def _exec(
        self,
        command: str,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        transfer: Path | None = None,
        who: SandboxUser | None = None,
    ) -> ExecResult:
        if self.root is None or self._users is None:
            raise EnvironmentExecError("sandbox is not running")
        # The working directory is made from inside the sandbox: on the host side a
        # path could run through a symlink the agent planted, and lead outside.
        # `cd` and `[` are shell builtins: a mkdir process only when the folder is missing
        # (a process per command was a tenth of the sandbox's CPU per trial).
        quoted = shlex.quote(cwd)
        script = (
            f"cd -- {quoted} 2>/dev/null || {{ mkdir -p -- {quoted} 2>/dev/null; cd -- {quoted}; }}"
            f" || exit 125\n{command}"
        )
        declared = self._declared(who)
        if who is not None:
            home = shlex.quote(who.home)
            script = f"[ -d {home} ] || mkdir -p -- {home} 2>/dev/null; {script}"
        full_env = sandbox_env(declared, env)
        call = self._call(who, full_env, transfer)
        marker = call.marker
        if transfer is None:
            # The shell's own environment is the sandbox's alone, as bwrap's is.
            own = dataclasses.replace(call, env=sandbox_env(declared, {}))
            in_shell = await self._pool.run(own, script, full_env, timeout)
            if in_shell is not None:
                return in_shell
        self._running += 1
        try:
            # bwrap itself starts with only the sandbox's variables: nothing of ours
            # (API keys) reaches /proc/1/environ inside.
            result = await run_process(call.argv(script), timeout=timeout, env=full_env)
        except BaseException:
            self._dirty = True
            # A sandbox init that lost its parent (killed mid-start) is in its own
            # session, out of reach of the group kill: find it by its marker.
            await run_to_end(kill_marked(marker))
            raise
        finally:
            self._running -= 1
        if result.timed_out:
            self._dirty = True
            await kill_marked(marker)
        return ExecResult(
            decode(result.stdout), decode(result.stderr), result.returncode, result.timed_out
        )

    def _declared(self, who: SandboxUser | None) -> dict[str, str]:
        """The sandbox's variables for a command as `who` (None: the default user)."""
        declared = {**self._egress.variables(self.network), **self.spec.env}
        if who is None:
            return declared
        return {"HOME": who.home, "USER": who.name, "LOGNAME": who.name, **declared}

    def _call(self, who: SandboxUser | None, env: dict[str, str],
              transfer: Path | None = None) -> BwrapCall:  # fmt: skip
        assert self.root is not None and self._users is not None
        return BwrapCall(
            self.root, self.limits, env, transfer, self.marker(),
            uid=who.uid if who else None, gid=who.gid if who else None,
            share_net=self.network is True, netns=self._egress.netns(self.network),
            extra_binds=(*self._users.binds(), *self._mounts), mount_ns=self._mount_ns(),
        )  # fmt: skip

    async def _shell_command(
        self, command: str, *, data: bytes = b"", sink: Sink | None = None,
        env: dict[str, str] | None = None, timeout: float | None = 120,
    ) -> ExecResult | None:  # fmt: skip
        """A transfer's command as root in the sandbox's shell, or None (no shell)."""
        return await self._root_shell(f"cd / || exit 125\n{command}", data=data, sink=sink,
                                      env=env, timeout=timeout)  # fmt: skip

    async def _shell_steps(
        self, words: list[str], *, data: bytes = b"", timeout: float | None = 120
    ) -> ExecResult | None:
        return await self._root_shell("\0".join(words), data=data, timeout=timeout,
                                      operation=b"steps")  # fmt: skip

    async def _root_shell(
        self, script: str, *, data: bytes = b"", sink: Sink | None = None,
        env: dict[str, str] | None = None, timeout: float | None = 120,
        operation: bytes = b"run",
    ) -> ExecResult | None:  # fmt: skip
        """One request to the root shell's server, or None (no shell)."""
        if self.root is None or self._users is None or self._pool.one_shot:
            return None
        call = self._root_call(self.marker())
        full_env = sandbox_env(self._declared(None), env) if env else call.env
        return await self._pool.run(call, script, full_env, timeout, data=data, sink=sink,
                                    operation=operation)  # fmt: skip

    @property
    def _has_services(self) -> bool:
        return bool(self._services)

    # Files cross the sandbox boundary only through a fresh transfer folder that
    # the sandbox sees at TRANSFER_MOUNT; the copy to or from the destination
    # runs inside the sandbox, so symlinks the agent made resolve in its own
    # view and can never reach host files. What comes out is checked on the
    # host again (`copy_out`): no link followed, nothing outside `dst`, bounded.
    async def upload(self, src: Path, dst: str) -> None:
        if await self._upload_in_shell(src, dst):
            return
        is_dir = await asyncio.to_thread(src.is_dir)
        copy = place_payload(TRANSFER_MOUNT, dst, is_dir=is_dir)
        async with self._transfer() as folder:
            await asyncio.to_thread(_stage, src, folder / "payload")
            result = await self._exec(copy, "/", {}, 120, transfer=folder)
        if result.exit_code != 0:
            raise EnvironmentExecError(f"upload to {dst} failed: {result.stderr.strip()[:200]}")

    @property
    def _transfers_in_shell(self) -> bool:
        return not self._pool.one_shot and _shell_transfer.usable()

    async def prepare_and_upload(
        self, prepare: str | FileSteps, uploads: Sequence[tuple[Path, str]]
    ) -> ExecResult:
        done = await self._prepare_and_upload_in_shell(prepare, uploads)
        return done if done is not None else await super().prepare_and_upload(prepare, uploads)

    async def mount_readonly(self, host: Path, dst: str) -> bool:
        if not posixpath.isabs(dst) or ".." in dst.split("/"):
            raise ValueError(f"mount point must be an absolute path: {dst!r}")
        if (str(host), dst) not in self._mounts:  # a task's later steps mount it again
            self._mounts.append((str(host), dst))
        return True

    async def download(self, src: str, dst: Path) -> list[str]:
        done = await self._download_in_shell(src, dst)
        if done is not None:
            return done
        source = posixpath.join("/", posixpath.normpath(src))
        bounds = Bounds()
        # -P: links are copied as links, and then dropped on the host side.
        copy = (
            f"test -e {shlex.quote(source)} || exit {_shell_transfer.MISSING}\n"
            f"{_shell_transfer.size_check(source, bounds)}\n"
            f"cp -R -P -- {shlex.quote(source)} {TRANSFER_MOUNT}/payload"
        )
        async with self._transfer() as folder:
            result = await self._exec(copy, "/", {}, 120, transfer=folder)
            _shell_transfer.refuse(result.exit_code, src, bounds)
            payload = folder / "payload"
            if not await asyncio.to_thread(payload.exists):
                raise DownloadMissing(f"{src} does not exist in the sandbox")
            skipped = await asyncio.to_thread(
                copy_out, payload, dst, what=f"download of {src}", bounds=bounds
            )
        # what `cp` could not read (the sandbox's user may not) is left out
        return [*_shell_transfer.complaints(result.stderr, "cp"), *skipped]

    @contextlib.asynccontextmanager
    async def _transfer(self) -> AsyncIterator[Path]:
        if self._holder is None:
            raise EnvironmentExecError("sandbox is not running")
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, "", "xfer-", str(self._holder)))
        try:
            await asyncio.to_thread(_local_root.give_tree, folder)
            yield folder
        finally:
            # however deep the sandbox's `cp` made it
            await asyncio.to_thread(_local_root.remove_tree, folder)

    async def default_owner(self) -> User | None:
        # Every file of the trial root is the exec's own (see `give_to`).
        return None

    async def give_to(self, path: str, user: User) -> None:
        # One host user owns the whole trial root and appears as whoever runs an
        # exec (see `local.users`): the files are already the user's.
        return None

    async def stop_processes(self) -> None:
        """Every command's namespace has ended with it, and the shells' end with
        their server (a shell with services is kept once its server killed all
        but them); only when that bookkeeping may have a gap (a cancel, a
        timeout, a shell that died) are the host's processes searched as well,
        sparing the shells kept."""
        holder = self._holder
        await self._pool.close(keep_reusable=True)
        if holder is not None and (self._dirty or self._pool.dirty or self._running):
            if not await kill_processes(holder, spare=self._pool.host_pids()):
                raise EnvironmentExecError("processes of the sandbox survived SIGKILL")
            self._dirty = self._pool.dirty = False

    async def set_network(self, network: Network) -> None:
        if self.root is not None:
            await self._egress.follow(network)
        await super().set_network(network)

    def egress_denials(self) -> list[str]:
        return self._egress.denials()

    async def stop(self) -> None:
        holder, self._holder, self.root = self._holder, None, None
        namespace, self._namespace = self._namespace, None
        await run_to_end(self._pool.close())
        await run_to_end(self._egress.close())
        if holder is not None:
            # To its end: a Ctrl-C arriving now must not leave the sandbox behind.
            scan = self._dirty or self._pool.dirty or self._running > 0
            await run_to_end(remove_holder(holder, scan=scan))
        if namespace is not None:  # its tmpfs goes with the last of its processes
            namespace.close()


def _stage(src: Path, dst: Path) -> None:
    """Copy a host file or folder into a transfer folder for the sandbox to read."""
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)
    _local_root.give_tree(dst.parent)


def _require_tools() -> None:
    if tool("bwrap") is None:
        raise EnvironmentUnavailable(INSTALL_HINT)
    if tool("prlimit") is None or (runs_as_root() and tool("setpriv") is None):
        raise EnvironmentUnavailable(
            "the local sandbox needs prlimit and setpriv (util-linux): "
            "install util-linux, or use --provider docker"
        )


def _unusable(reason: str) -> str:
    return (
        f"bwrap cannot create a sandbox here ({reason}); "
        "enable unprivileged user namespaces or use --provider docker"
    )
