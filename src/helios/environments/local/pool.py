"""The persistent shells of one local sandbox: one per (uid, gid, network, binds),
started on first use, or ahead of it (`warm`) so that the first command does
not wait for it: the sandbox's start then overlaps the agent's first model call.

A command goes to its shell when that shell is idle; when it is busy (two
commands at once) or cannot start here, the caller runs a one-shot bwrap. A
service (`start_service`) lives in its shell and waits for it to be idle: a
one-shot bwrap's namespace ends with its command.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from helios._proc import run_to_end
from helios.environments.base import ExecResult
from helios.environments.local.bwrap import BwrapCall
from helios.environments.local.limits import runs_as_root
from helios.environments.local.program import ServerProgram, server_argv, server_program
from helios.environments.shell.client import SandboxShell, ShellUnavailable, Sink
from helios.environments.shell.native import SERVER_MOUNT, place_server

log = logging.getLogger(__name__)
#: how long the server of a shell with services may take to stop everything else
STOP_SECONDS = 10.0

Key = tuple[object, ...]


def key_of(call: BwrapCall) -> Key:
    """Calls with the same identity inside share a shell: the default user is root
    (0, 0) when Helios is root, so the verifier's explicit root reuses the agent's
    idle, sealed shell instead of starting a second interpreter per trial."""
    uid, gid = call.uid, call.gid
    if uid is None and runs_as_root():
        uid, gid = 0, 0
    elif uid is not None and gid is None:
        gid = uid
    network = call.share_net if call.netns is None else call.netns
    return (uid, gid, network, call.extra_binds)


class ShellPool:
    def __init__(self) -> None:
        self.shells: dict[Key, SandboxShell] = {}
        #: no shell can start here: every command is a one-shot bwrap
        self.one_shot = False
        #: a shell ended without its server known to be killed: the host's
        #: processes must be searched before the sandbox is trusted empty
        self.dirty = False
        self._starting: dict[Key, asyncio.Task[SandboxShell | None]] = {}

    async def prepare(self) -> None:
        """Find (or build, once per machine) the server, off the event loop; it is
        cached, so the shells' starts then look it up at no cost."""
        if server_program.cache_info().currsize:
            program = server_program()  # known: no thread hop per sandbox
        else:
            program = await asyncio.to_thread(server_program)
        self.one_shot = self.one_shot or program is None

    def warm(self, call: BwrapCall) -> None:
        """Start the shell for `call` now, in the background."""
        if self.one_shot or key_of(call) in self._starting:
            return
        task = asyncio.ensure_future(self._start(call))
        self._starting[key_of(call)] = task
        # a failed warm-up is tried again by the first command
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def run(
        self, call: BwrapCall, script: str, env: dict[str, str], timeout: float | None,
        *, data: bytes = b"", sink: Sink | None = None, operation: bytes = b"run",
    ) -> ExecResult | None:  # fmt: skip
        """The command's result through its shell, or None if there is none free.
        `operation`: the server's ("steps": `script` is its words)."""
        shell = await self.get(call)
        if shell is None:
            return None
        try:
            return await shell.run(script, env, timeout, data=data, sink=sink,
                                   head=shell.head(operation))  # fmt: skip
        finally:
            self.dirty = self.dirty or (shell.dead and not shell.clean)

    async def _known(self, call: BwrapCall) -> SandboxShell | None:
        """The shell for `call` once any start of it in progress has ended (None:
        there is none yet)."""
        key = key_of(call)
        starting = self._starting.get(key)
        if starting is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(starting)
        return self.shells.get(key)

    async def get(self, call: BwrapCall) -> SandboxShell | None:
        """The idle shell for `call` (started if need be), or None."""
        shell = await self._known(call)
        if shell is not None and not shell.dead:
            return None if shell.busy else shell
        if self.one_shot:
            return None
        return await self._start(call)

    async def for_service(self, call: BwrapCall) -> SandboxShell | None:
        """The shell for `call`, started if need be and waited for when busy; None
        when no shell can run here."""
        while True:
            shell = await self._known(call)
            if shell is None or shell.dead:
                return None if self.one_shot else await self._start(call)
            if not shell.busy:
                return shell
            await shell.wait_idle()

    async def _start(self, call: BwrapCall) -> SandboxShell | None:
        key = key_of(call)
        program = server_program()
        if program is None:
            return None
        for old_key, old in list(self.shells.items()):
            # (a shell with services keeps them: they are not the next command's)
            if old_key[3] != call.extra_binds and not old.busy and not old.services:
                # A user was added since: no command will pick that shell again.
                del self.shells[old_key]
                await self._close(old)
        shell = SandboxShell(_server_command(call, program), call.env, call.marker)
        self.shells[key] = shell
        shell.busy = True
        try:
            await shell.start()
        except ShellUnavailable:
            self.one_shot = True
            return None
        except BaseException:
            self.dirty = True
            raise
        finally:
            shell.busy = False
            self._starting.pop(key, None)
        return shell

    async def close(self, *, keep_reusable: bool = False) -> None:
        """Close the shells; before a verifier, idle sealed ones are kept: nothing
        but their server is left in them (and in one with services, what those
        spare, once its server's "stop" answered), and nothing the agent ran can
        reach it."""
        for task in list(self._starting.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await run_to_end(task)
        self._starting.clear()
        kept = {k: s for k, s in self.shells.items()
                if keep_reusable and s.reusable and await _stopped(s)}  # fmt: skip
        closing = [s for k, s in self.shells.items() if k not in kept]
        self.shells = kept
        for shell in closing:
            await self._close(shell)

    def host_pids(self) -> set[int]:
        """The host pids of the shells' outer processes (bwrap)."""
        return {s.proc.pid for s in self.shells.values() if s.proc is not None and not s.dead}

    async def _close(self, shell: SandboxShell) -> None:
        await shell.close()
        self.dirty = self.dirty or not shell.clean


async def _stopped(shell: SandboxShell) -> bool:
    """A shell with services keeps them only once its server killed everything
    else; without services, it holds nothing else already."""
    if not shell.services:
        return True
    try:
        result = await shell.stop_others(STOP_SECONDS)
    except ShellUnavailable:
        return False
    if not result.ok:
        log.warning("local sandbox: %s; its services are stopped too",
                    result.stderr.strip()[:200] or "the shell did not stop")  # fmt: skip
    return result.ok and not shell.dead


def _server_command(call: BwrapCall, program: ServerProgram) -> list[str]:
    """bwrap running the server as the sandbox's init, under `call`'s identity,
    binds and limits; bwrap's own environment (and the server's) is the sandbox's."""
    own = dataclasses.replace(call, as_pid_1=True)
    if program.binary is None:
        assert program.python is not None
        return own.command_argv(server_argv(program.python))
    # A copy in the holder folder, which nothing inside can write, bound read-only.
    binary = place_server(call.root.parent, program.binary)
    own = dataclasses.replace(own, extra_binds=(*call.extra_binds, (str(binary), SERVER_MOUNT)))
    return own.command_argv([SERVER_MOUNT, *call.limits.rlimit_values()], own_limits=True)
