"""A hostile agent against the sandbox's services (the desktop's X server, its
browser): it may kill them (they stay dead) but never replace them, and nothing
of its own outlives `stop_processes` by posing as one: not an impostor with the
same program and arguments, not a process of the service's own program, not one
adopted by a subreaper or made a sibling by CLONE_PARENT, not one that hides its
program, not a fork bomb, not a process that took a dead service's pid. On every
path that has services (tests/sandbox_helpers.py: SERVICE_PROVIDERS), and at the
wire level for both shell servers and docker's exec'd kill."""

from __future__ import annotations

import os
import platform
import select
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import helios.environments.docker.services as _docker_services
from helios.environments.base import Environment
from helios.environments.local import LocalEnvironment
from helios.environments.local.bwrap import tool
from helios.environments.local.program import server_argv
from helios.environments.shell.native import native_server
from helios.errors import EnvironmentExecError

from ..desktop_helpers import need_desktop
from ..sandbox_helpers import (
    host_system_binds,
    in_provider,
    processes,
    program_runs,
    provider,
    running,
    until,
)

__all__ = ["provider"]  # the fixture, shared with tests/test_sandbox_services.py

X86_64 = platform.machine() == "x86_64"
#: prctl(2) and clone(2) on x86_64, for the tricks perl plays through `syscall`
SYS_PRCTL, SYS_CLONE = 157, 56
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
CLONE_PARENT, SIGCHLD = 0x8000, 17


async def _gone(env: Environment, args: str) -> bool:
    return not running(await processes(env), args)


async def _dead(env: Environment, name: str) -> bool:
    return not await env.service_running(name)


def test_an_impostor_of_a_killed_service_dies(provider: str) -> None:
    """The agent kills the service and starts its own with the same program and
    arguments (by name, by full path, with a forged argv[0]): each dies."""

    async def body(env: Environment) -> None:
        await env.start_service("x", "exec sleep 1020")
        await program_runs(env, "sleep1020")
        [service] = running(await processes(env), "sleep1020")
        await env.exec(
            f"kill -9 {service.pid}; setsid nohup sleep 1020 >/dev/null 2>&1 & "
            "nohup /usr/bin/sleep 1020 >/dev/null 2>&1 & "
            'perl -e \'exec {"/usr/bin/sleep"} "sleep", "1020"\' >/dev/null 2>&1 &'
        )
        await until(lambda: _dead(env, "x"), "the killed service is seen dead")
        await env.stop_processes()
        assert not running(await processes(env), "sleep1020")
        assert not await env.service_running("x")

    in_provider(provider, body)


def test_an_impostor_beside_a_live_service_dies(provider: str) -> None:
    async def body(env: Environment) -> None:
        await env.start_service("x", "exec sleep 1021")
        await program_runs(env, "sleep1021")
        await env.exec("setsid nohup sleep 1021 >/dev/null 2>&1 &")
        await env.stop_processes()
        assert len(running(await processes(env), "sleep1021")) == 1
        assert await env.service_running("x")

    in_provider(provider, body)


@pytest.mark.skipif(not X86_64, reason="the tricks call x86_64 syscall numbers")
def test_no_parent_trick_keeps_an_agent_process_alive(provider: str) -> None:
    """The service runs perl; the agent runs perl too: as a subreaper whose
    grandchildren it adopts, a CLONE_PARENT sibling, one that made itself not
    dumpable (its program unreadable), and a plain perl of its own. None is the
    service's descendant, so none survives, whatever its program."""
    mark = 'sub mark { open(my $f, ">", "/tmp/trick-$_[0]") and close($f) } '
    tricks = (
        # a subreaper adopting what its children leave behind
        f"perl -e '{mark} syscall({SYS_PRCTL}, {PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0); "
        "my $me = $$; if (!fork) { if (!fork) { "
        "select(undef, undef, undef, 0.01) while getppid() != $me; "
        '$0 = "trick-adopted"; mark("adopted"); sleep 1000 } exit } '
        '$0 = "trick-reaper"; sleep 1000\' &',
        # a sibling of itself by CLONE_PARENT (its parent is the command's)
        f"perl -e '{mark} $r = syscall({SYS_CLONE}, {CLONE_PARENT | SIGCHLD}, 0, 0, 0, 0); "
        '$0 = $r == 0 ? "trick-sibling" : "trick-cloner"; $r == 0 and mark("sibling"); '
        "sleep 1000' &",
        # its program hidden: /proc/<pid>/exe unreadable to others
        f"perl -e '{mark} syscall({SYS_PRCTL}, {PR_SET_DUMPABLE}, 0, 0, 0, 0); "
        '$0 = "trick-hidden"; mark("hidden"); sleep 1000\' &',
        # the service's own program, but not its descendant
        f'setsid perl -e \'{mark} $0 = "trick-same"; mark("same"); sleep 1000\' &',
        # (all in place before the command ends: on local its end is a kill too)
        "until [ -e /tmp/trick-adopted ] && [ -e /tmp/trick-sibling ] && "
        "[ -e /tmp/trick-hidden ] && [ -e /tmp/trick-same ]; do sleep 0.02; done",
    )

    async def body(env: Environment) -> None:
        await env.start_service("svc", "exec perl -e 'sleep 1000'")
        placed = await env.exec(" ".join(tricks), timeout=60)
        assert placed.ok, placed
        await env.stop_processes()
        left = await processes(env)
        assert not [p for p in left if p.args.startswith("trick")], left
        assert [p.comm for p in left] == ["perl"]  # the service alone
        assert await env.service_running("svc")

    in_provider(provider, body)


def test_a_fork_bomb_at_the_pids_limit_dies(
    provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The bomb fills the pids limit while the processes are stopped. On docker's
    Engine API path no exec can start then: the container is restarted and the
    services die with the rest (said in a warning); everywhere else they live."""

    async def body(env: Environment) -> None:
        await env.start_service("svc", "exec sleep 1022")
        await env.exec("(while :; do sleep 2020 & done) >/dev/null 2>&1 &")
        await env.stop_processes()
        assert not running(await processes(env), "sleep2020")
        if provider == "docker-api" and not await env.service_running("svc"):
            assert "the services are stopped with the agent's processes" in caplog.text
        else:
            assert await env.service_running("svc")

    with caplog.at_level("WARNING"):
        in_provider(provider, body, pids=48)


@pytest.mark.parametrize("provider", ["local-compiled", "local-python"], indirect=True)
def test_an_agent_s_own_x_server_dies_and_the_service_s_lives(
    provider: str, need_bwrap: None
) -> None:
    """With the host's Xvfb (the local sandbox sees the host's /usr; the desktop tests
    show the same on docker with the desktop image): the agent's X server on another
    display dies; after the agent killed the service's, so does its replacement on
    the service's display."""
    need_desktop("local")

    async def x_up(env: Environment, display: int) -> bool:
        return (await env.exec(f"test -S /tmp/.X11-unix/X{display}", cwd="/")).ok

    async def body(env: Environment) -> None:
        await env.start_service("x", "exec Xvfb :5 -nolisten tcp")
        await until(lambda: x_up(env, 5), "the service's X server listens")
        await env.exec("setsid nohup Xvfb :6 -nolisten tcp >/dev/null 2>&1 &")
        await env.stop_processes()

        async def service_x_alone() -> bool:
            # Xvfb forks a child for xkbcomp that carries its name until it execs
            return [p.args for p in await processes(env) if p.comm == "Xvfb"] == [
                "Xvfb:5-nolistentcp"
            ]

        await until(service_x_alone, "the service's X server alone is left")
        xs = [p for p in await processes(env) if p.comm == "Xvfb"]
        await env.exec(f"kill -9 {xs[0].pid}")
        await until(lambda: _dead(env, "x"), "the killed X server is seen dead")
        await env.exec("rm -f /tmp/.X11-unix/X5 /tmp/.X5-lock; "
                       "setsid nohup Xvfb :5 -nolisten tcp >/dev/null 2>&1 & "
                       "until [ -S /tmp/.X11-unix/X5 ]; do sleep 0.02; done")  # fmt: skip
        await env.stop_processes()
        assert not [p for p in await processes(env) if p.comm == "Xvfb"]
        assert not await env.service_running("x")

    in_provider(provider, body)


def test_a_planted_log_link_is_not_followed(provider: str) -> None:
    async def body(env: Environment) -> None:
        planted = await env.exec(
            "mkdir -p /logs/helios/services && echo untouched > /tmp/target && "
            "ln -s /tmp/target /logs/helios/services/svc.log"
        )
        assert planted.ok
        if isinstance(env, LocalEnvironment):
            # the agent's own folder on local: the server opens no link
            with pytest.raises(EnvironmentExecError, match="did not start"):
                await env.start_service("svc", "echo written; exec sleep 1023")
        else:
            # docker: root makes the log afresh, in a folder only root may change
            await env.start_service("svc", "echo written; exec sleep 1023")
            log = await env.exec("test -L /logs/helios/services/svc.log || echo plain")
            assert log.stdout == "plain\n"
        assert (await env.exec("cat /tmp/target")).stdout == "untouched\n"

    in_provider(provider, body)


def test_the_exchange_folder_cannot_be_swapped(provider: str) -> None:
    """The agent cannot make the host's path to the exchange folder lead elsewhere:
    inside it is a mount point (no rename, no unmount, no link in its place)."""

    async def body(env: Environment) -> None:
        exchange = env.exchange_dir()
        assert exchange is not None
        inside, host = exchange
        before = os.lstat(host)
        await env.exec(f"umount {inside}; rm -rf {inside}; mv {inside} /run/elsewhere; "
                       f"ln -sfn / {inside}; touch {inside}/from-inside", user=0)  # fmt: skip
        after = os.lstat(host)
        assert stat.S_ISDIR(after.st_mode) and after.st_ino == before.st_ino
        assert (host / "from-inside").is_file()

    in_provider(provider, body)


# -- pid reuse, at the wire: a service is its pid *and* its start time --------------

#: a throwaway pid namespace whose processes may choose their next pid (root on the
#: host with CAP_SYS_ADMIN: /proc/sys/kernel/ns_last_pid), as no agent can
_REUSE_SANDBOX = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--die-with-parent",
                  "--as-pid-1", "--cap-add", "CAP_SYS_ADMIN", *host_system_binds(),
                  "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]  # fmt: skip


@pytest.fixture
def can_reuse_pids(need_bwrap: None) -> None:
    if os.geteuid() != 0:
        pytest.skip("choosing a pid (ns_last_pid) needs root on the host")


class Wire:
    """A server in `_REUSE_SANDBOX`, spoken to request by request."""

    def __init__(self, argv: list[str], container: bool, binds: tuple[str, ...] = ()) -> None:
        self.container = container
        self.proc = subprocess.Popen([*_REUSE_SANDBOX, *binds, *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)  # fmt: skip
        assert self._frame()[0] == b"R"

    def _read(self, size: int) -> bytes:
        assert self.proc.stdout is not None
        data = b""
        while len(data) < size:
            ready, _, _ = select.select([self.proc.stdout], [], [], 30)
            assert ready, "the server did not answer within 30s"
            chunk = os.read(self.proc.stdout.fileno(), size - len(data))
            assert chunk, "the server ended"
            data += chunk
        return data

    def _frame(self) -> tuple[bytes, bytes]:
        header = self._read(5)
        return header[:1], self._read(int.from_bytes(header[1:], "big"))

    def ask(self, operation: str, script: str = "", data: bytes = b"") -> tuple[str, int]:
        """(stdout, exit code) of one request; the variables are PATH's alone."""
        head = [operation.encode(), *([b"0"] if self.container else [])]
        fields = [*head, b"10", script.encode(), data, b"1", b"PATH", b"/usr/bin:/bin"]
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(b"%d\n%s" % (len(f), f) for f in fields))
        self.proc.stdin.flush()
        out = b""
        while (frame := self._frame())[0] != b"X":
            out += frame[1] if frame[0] == b"O" else b""
        return out.decode(), int(frame[1].split()[0])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait(timeout=30)


SERVERS = [("compiled", False), ("compiled", True), ("python", False)]


@pytest.fixture(params=SERVERS, ids=["compiled", "compiled-container", "python"])
def wire(request: pytest.FixtureRequest, can_reuse_pids: None,
         tmp_path: Path) -> Iterator[Wire]:  # fmt: skip
    kind, container = request.param
    if kind == "compiled":
        binary = native_server()
        if binary is None:
            pytest.skip("no C compiler")
        path = tmp_path / "server"
        path.write_bytes(binary)
        path.chmod(0o755)
        limits = ["256", str(1 << 30), str(1 << 30)]  # processes, data, file size
        argv = ["/tmp/.server", *(["--container", "0"] if container else limits)]
        binds: tuple[str, ...] = ("--ro-bind", str(path), "/tmp/.server")  # (on the tmpfs)
    else:
        python = tool("python3")
        if python is None:
            pytest.skip("no system python3")
        argv, binds = server_argv(python), ()
    served = Wire(argv, container, binds)
    try:
        yield served
    finally:
        served.close()


def _reuse(pid: int) -> str:
    """A command that starts `sleep 1000` in the background as pid `pid`."""
    return (f"echo {pid - 1} > /proc/sys/kernel/ns_last_pid; "
            "setsid sleep 1000 >/dev/null 2>&1 & echo $!")  # fmt: skip


def test_a_process_that_took_a_dead_service_s_pid_is_not_the_service(wire: Wire) -> None:
    out, code = wire.ask("service", "exec sleep 1000", b"/tmp/svc.log")
    assert code == 0
    pid = int(out.split()[0])
    assert wire.ask("status")[0].split() == [str(pid)]
    assert wire.ask("run", f"kill -9 {pid}")[1] == 0
    # the server reaps it (as that command ends, or a later one): then its pid is free
    deadline = time.monotonic() + 20
    while wire.ask("run", f"test -e /proc/{pid}")[1] == 0:
        assert time.monotonic() < deadline, "the killed service was never reaped"
    taken, code = wire.ask("run", _reuse(pid))
    assert code == 0 and taken.split() == [str(pid)], "the pid was not reused"
    assert wire.ask("status")[0] == ""  # the newcomer is not the service
    assert wire.ask("stop")[1] == 0
    left, _ = wire.ask("run", f"test -e /proc/{pid} && echo alive || echo gone")
    assert left == "gone\n"


def test_a_live_service_survives_the_wire_s_stop(wire: Wire) -> None:
    out, code = wire.ask("service", "exec sleep 1000", b"/tmp/svc.log")
    pid = int(out.split()[0])
    wire.ask("run", "setsid sleep 1001 >/dev/null 2>&1 &")
    assert wire.ask("stop")[1] == 0
    listed, _ = wire.ask("run", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "sleep 1000" in listed and "sleep 1001" not in listed
    assert wire.ask("status")[0].split() == [str(pid)]
    missing, code = wire.ask("service", "exec sleep 1", b"/tmp/no/such/folder.log")
    assert code != 0 and missing == ""
    assert wire.ask("bogus")[1] == 2  # an unknown operation is refused, the server goes on
    assert wire.ask("run", "echo on")[0] == "on\n"


@pytest.mark.usefixtures("can_reuse_pids")
def test_docker_s_exec_d_kill_does_not_spare_a_reused_pid() -> None:
    """The Engine API path's kill script, given a dead service's pid and start time,
    kills the process that took that pid (and spares the live one it is given)."""
    # (the driver is the namespace's init: its `wait` reaps as the container's does)
    driver = (
        "setsid sleep 1000 & p=$!; read -r l </proc/$p/stat; set -- ${l##*) }; start=${20}\n"
        "setsid sleep 1001 & k=$!; read -r l </proc/$k/stat; set -- ${l##*) }; kept=${20}\n"
        "kill -9 $p; wait $p\n"
        # a new clock tick first: start times count ticks, and the same pid within one
        # tick is for who may choose pids (CAP_SYS_ADMIN), which no agent may
        "read -r a _ </proc/uptime; until read -r b _ </proc/uptime; [ $b != $a ]; do :; done\n"
        "echo $((p - 1)) > /proc/sys/kernel/ns_last_pid; setsid sleep 1002 & q=$!\n"
        '[ "$q" = "$p" ] || { echo "not reused"; exit 3; }\n'
        'sh -c "$KILL" sh "$p:$start" "$k:$kept" & w=$!; wait $w; echo "kill said $?"\n'
        "[ -e /proc/$q ] && echo impostor-alive || echo impostor-gone\n"
        "[ -e /proc/$k ] && echo service-alive || echo service-gone\n"
    )
    done = subprocess.run([*_REUSE_SANDBOX, "--setenv", "KILL", _docker_services.SPARING_KILL,
                           "sh", "-c", driver], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    said = done.stdout.splitlines()
    assert said[-3:] == ["kill said 0", "impostor-gone", "service-alive"], done
