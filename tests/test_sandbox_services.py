"""Sandbox services (`Environment.start_service`): Helios's own long-lived processes
(a desktop's X server, its browser), which outlive every command and
`stop_processes`, while every process the agent started dies before the verifier.
Each test runs on every path that has them: local with the compiled server and
with its Python twin, docker with the shell server as the init and through the
Engine API alone. The hostile agent's side is tests/security/test_service_isolation.py."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import uuid
from collections.abc import Iterator

import pytest

import helios.environments.docker.services as _docker_services
from helios.environments.base import Environment
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.environments.local.program import server_program
from helios.environments.null import NullEnvironment
from helios.environments.view import as_user
from helios.errors import EnvironmentExecError, UnsupportedFeature

from .sandbox_helpers import (
    in_provider,
    processes,
    program_runs,
    provider,
    running,
    select_provider,
    until,
)

__all__ = ["provider"]  # the fixture, shared with tests/security/test_service_isolation.py


@pytest.fixture(params=["local-compiled", "local-python"])
def local(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield select_provider(request, monkeypatch)


#: a service whose program (perl) forks: a twin of its own program, a child that
#: execs another program, a shell, and a twin that orphans a grandchild of its own
#: program (no longer its descendant); each says so in /tmp once it is what it is
FORKING_SERVICE = (
    "exec perl -e '"
    'sub mark { open(my $f, ">", "/tmp/forked-$_[0]") and close($f) } '
    'if (!fork) { mark("twin"); sleep 1000; exit } '
    'if (!fork) { exec "/bin/sh", "-c", "touch /tmp/forked-other; exec sleep 3001" } '
    'if (!fork) { exec "/bin/sh", "-c", "touch /tmp/forked-shell; sleep 3002; :" } '
    "if (!fork) { my $mid = $$; if (!fork) { "
    "select(undef, undef, undef, 0.01) while getppid() == $mid; "
    '$0 = "orphaned-twin"; mark("orphan"); sleep 1000; exit } exit } '
    "sleep 1000'"
)
FORKED = ("twin", "other", "shell", "orphan")


async def _forked(env: Environment) -> bool:
    """Whether every child of FORKING_SERVICE is what it will be: seen from the host
    on local (a command there would kill them at its end), by a command on docker."""
    if isinstance(env, LocalEnvironment):
        root = env.host_root()
        assert root is not None
        return all((root / f"tmp/forked-{name}").exists() for name in FORKED)
    marks = " ".join(f"/tmp/forked-{name}" for name in FORKED)
    return (await env.exec(f"ls {marks}", cwd="/")).ok


async def _running(env: Environment, *names: str) -> bool:
    return all([await env.service_running(name) for name in names])


def test_a_service_outlives_commands_and_stop_processes_and_the_agent_s_processes_die(
    provider: str,
) -> None:
    async def body(env: Environment) -> None:
        assert env.supports_services
        await env.start_service("svc", "exec sleep 1001")
        await program_runs(env, "sleep1001")
        assert await env.service_running("svc")
        for _ in range(3):
            assert (await env.exec("echo hi")).stdout == "hi\n"
        assert await env.service_running("svc")
        # the agent's: nohup, setsid, a double fork, and a loop that forks on (its
        # children short-lived: the pids limit is tests/security's fork bomb)
        started = await env.exec(
            "nohup sleep 2001 >/dev/null 2>&1 & setsid sleep 2002 & (sh -c 'sleep 2003' &); "
            "(while :; do sh -c 'sleep 0.01; : 2004'; done) >/dev/null 2>&1 & echo started"
        )
        assert started.stdout == "started\n"
        if provider.startswith("docker"):  # as `docker exec`: they outlive the command
            await until(lambda: _seen(env, "2004"), "the fork loop runs")
        await env.stop_processes()
        left = await processes(env)
        assert not [p for p in left if "200" in p.args], left
        assert [p.args for p in left if "sleep1001" in p.args] == ["sleep1001"]
        assert await env.service_running("svc")
        log = await env.exec("test -f /logs/helios/services/svc.log && echo logged")
        assert log.stdout == "logged\n"

    in_provider(provider, body, pids=64)


async def _seen(env: Environment, args: str) -> bool:
    return bool(running(await processes(env), args))


def test_what_a_service_spawns_survives_only_running_the_service_s_own_program(
    provider: str,
) -> None:
    async def body(env: Environment) -> None:
        await env.start_service("forker", FORKING_SERVICE)
        await until(lambda: _forked(env), "the service's children run")
        await env.stop_processes()
        left = await processes(env)
        perl = [p for p in left if p.comm == "perl"]
        assert len(perl) == 2, left  # the service and its twin, parent and child
        assert {p.ppid for p in perl} & {p.pid for p in perl}
        assert not [p for p in left if p.comm in ("sleep", "sh")], left
        # not a descendant any more
        assert not [p for p in left if p.args.startswith("orphaned-twin")], left
        assert await env.service_running("forker")

    in_provider(provider, body)


def test_a_service_whose_shell_does_not_exec_keeps_the_programs_it_started(
    provider: str,
) -> None:
    """Debian's dash runs `sleep 1015` as its child, not in its place: the shell
    Helios started and the programs it started are all the service's own."""

    async def body(env: Environment) -> None:
        await env.start_service("wrapped", "sleep 1015 & sleep 1016; wait")
        await until(lambda: _seen(env, "sleep1016"), "the service's programs run")
        await env.exec("nohup sleep 2006 >/dev/null 2>&1 &")
        await env.stop_processes()
        left = await processes(env)
        assert sorted(p.args for p in left) == [
            "sh-csleep 1015 & sleep 1016; wait", "sleep1015", "sleep1016",
        ], left  # fmt: skip
        assert await env.service_running("wrapped")

    in_provider(provider, body)


def test_a_service_that_dies_stays_dead(provider: str) -> None:
    async def body(env: Environment) -> None:
        await env.start_service("victim", "exec sleep 1003")
        await env.start_service("other", "exec sleep 1004")
        [victim] = running(await processes(env), "sleep1003")
        await env.exec(f"kill -9 {victim.pid}")
        await until(lambda: _dead(env, "victim"), "the service is seen dead")
        await env.stop_processes()
        assert not await env.service_running("victim")
        assert not running(await processes(env), "sleep1003")  # never started again
        assert await env.service_running("other")
        # its name may be used again, for a new process
        await env.start_service("victim", "exec sleep 1005")
        assert await env.service_running("victim")
        with pytest.raises(EnvironmentExecError, match="running already"):
            await env.start_service("victim", "exec sleep 1006")

    in_provider(provider, body)


async def _dead(env: Environment, name: str) -> bool:
    return not await env.service_running(name)


def test_services_as_another_user_survive_too(provider: str) -> None:
    async def body(env: Environment) -> None:
        await env.start_service("mine", "exec sleep 1007", user="nobody")
        await env.start_service("root", "exec sleep 1008")
        await program_runs(env, "sleep1007", user="nobody")
        await env.exec("nohup sleep 2005 >/dev/null 2>&1 &", user="nobody")
        await env.stop_processes()
        assert await _running(env, "mine", "root")
        seen = await processes(env, user="nobody")
        [mine] = running(seen, "sleep1007")
        owner = await env.exec(f"grep ^Uid /proc/{mine.pid}/status", user="nobody")
        assert owner.stdout.split()[1:3] == ["65534", "65534"] or provider.startswith("local")
        assert not running(seen, "sleep2005")

    in_provider(provider, body)


def test_the_service_gets_its_variables_and_logs_its_output(provider: str) -> None:
    async def body(env: Environment) -> None:
        await env.start_service(
            "talker", 'echo "said $GREETING from $(pwd)"; echo to-stderr >&2; exec sleep 1009',
            env={"GREETING": "hello"},
        )  # fmt: skip

        async def said() -> bool:
            text = (await env.exec("cat /logs/helios/services/talker.log")).stdout
            return "to-stderr" in text

        await until(said, "the service's output is in its log")
        logged = await env.exec("cat /logs/helios/services/talker.log")
        assert logged.stdout.splitlines() == ["said hello from /", "to-stderr"]
        assert await env.service_running("talker")

    in_provider(provider, body)


def test_bad_names_and_a_service_that_cannot_start(provider: str) -> None:
    async def body(env: Environment) -> None:
        for name in ("", "../x", "a b", "-lead", "x" * 65):
            with pytest.raises(ValueError):
                await env.start_service(name, "exec sleep 1")
        made = await env.exec("mkdir -p /logs/helios/services/ghost.log/in-the-way", user=0)
        assert made.ok
        with pytest.raises(EnvironmentExecError, match="did not start"):
            await env.start_service("ghost", "exec sleep 1")
        assert not await env.service_running("ghost")
        assert not await env.service_running("never-started")

    in_provider(provider, body)


def test_a_service_seen_through_a_phase_view_runs_as_the_sandbox_s_default_user(
    provider: str,
) -> None:
    async def body(env: Environment) -> None:
        view = as_user(env, "nobody")
        assert view.supports_services
        await view.start_service("viewed", "id -un; exec sleep 1010")

        async def logged() -> bool:
            return "root" in (await env.exec("cat /logs/helios/services/viewed.log")).stdout

        await until(logged, "the service says who it is")
        assert await view.service_running("viewed")
        assert view.exchange_dir() == env.exchange_dir()
        await view.stop_processes()
        assert await view.service_running("viewed")

    in_provider(provider, body)


def test_the_exchange_folder_is_shared_with_the_host(provider: str) -> None:
    async def body(env: Environment) -> None:
        exchange = env.exchange_dir()
        assert exchange is not None
        inside, host = exchange
        assert inside == "/run/helios"
        # a unix socket a service makes there is one on the host
        await env.start_service("sock", "exec perl -MIO::Socket::UNIX -e '"
                                "IO::Socket::UNIX->new(Local => \"/run/helios/s.sock\", "
                                "Listen => 1) or die $!; sleep 1000'")  # fmt: skip

        async def made() -> bool:
            return (host / "s.sock").exists()

        await until(made, "the socket appears on the host")
        assert stat.S_ISSOCK(os.lstat(host / "s.sock").st_mode)
        await env.stop_processes()
        assert stat.S_ISSOCK(os.lstat(host / "s.sock").st_mode)
        assert await env.service_running("sock")
        holder.append(host)

    holder: list[object] = []
    in_provider(provider, body)
    if provider.startswith("docker"):
        assert not os.path.exists(str(holder[0]))  # removed with the container


def test_a_command_s_timeout_kills_its_processes_and_spares_the_services(local: str) -> None:
    async def body(env: Environment) -> None:
        assert isinstance(env, LocalEnvironment)
        await env.start_service("svc", "exec sleep 1011")
        shells = set(env._pool.shells.values())
        slow = await env.exec("(while :; do sleep 4001 & done) & sleep 30", timeout=1)
        assert slow.timed_out
        assert not running(await processes(env), "sleep4001")
        assert await env.service_running("svc")
        assert set(env._pool.shells.values()) == shells  # the same shell serves on

    in_provider(local, body, pids=64)


def test_a_cancelled_command_ends_without_its_shell_and_its_services(local: str) -> None:
    """A cancel (the agent's timeout) must not take the services with the command:
    the command's processes are killed from the host, the shell serves on."""

    async def body(env: Environment) -> None:
        assert isinstance(env, LocalEnvironment)
        await env.start_service("svc", "exec sleep 1012")
        (shell,) = env._pool.shells.values()
        task = asyncio.ensure_future(
            env.exec("(while :; do sleep 4002 & done) & touch /tmp/looping; sleep 300")
        )

        async def held() -> bool:
            return shell.busy

        await until(held, "the command holds the shell")
        await until(_file(env, "/tmp/looping"), "the command runs")  # (a one-shot exec)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not shell.dead and not shell.busy
        assert await env.service_running("svc")
        assert not running(await processes(env), "sleep4002")
        await env.stop_processes()
        assert await env.service_running("svc")
        assert list(env._pool.shells.values()) == [shell]

    in_provider(local, body, pids=64)


def _file(env: Environment, path: str) -> object:
    async def exists() -> bool:
        return (await env.exec(f"test -e {path}", cwd="/")).ok

    return exists


def test_a_host_scan_spares_the_shell_that_keeps_services(local: str) -> None:
    """When the bookkeeping has a gap (a one-shot exec timed out), stop_processes
    also kills the sandbox's processes found on the host: not the kept shell."""

    async def body(env: Environment) -> None:
        assert isinstance(env, LocalEnvironment)
        await env.start_service("svc", "exec sleep 1013")
        env._dirty = True
        await env.stop_processes()
        assert await env.service_running("svc")
        assert (await env.exec("echo fine")).stdout == "fine\n"

    in_provider(local, body)


@pytest.mark.parametrize("provider", ["docker-shell"], indirect=True)  # the stream only
def test_a_command_abandoned_on_docker_dies_at_stop_and_the_services_live(
    provider: str,
) -> None:

    async def body(env: Environment) -> None:
        assert isinstance(env, DockerEnvironment) and env._shell is not None
        await env.start_service("svc", "exec sleep 1014")
        shell = env._shell
        long = asyncio.ensure_future(env.exec("sleep 300; echo late > /app/late"))

        async def held() -> bool:
            return shell.busy

        await until(held, "the command holds the init's stream")
        await until(lambda: _seen(env, "sleep300"), "the command runs")  # (an exec)
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
        assert env._shell.busy
        await env.stop_processes()  # the init is freed by an exec'd kill that spares
        assert await env.service_running("svc")
        assert not running(await processes(env), "sleep300")
        late = await env.exec("test -e /app/late && echo late || echo none")
        assert late.stdout == "none\n"

    in_provider(provider, body)


def test_without_a_shell_server_local_has_no_services(need_bwrap: None) -> None:
    async def body(env: Environment) -> None:
        assert not env.supports_services
        with pytest.raises(UnsupportedFeature):
            await env.start_service("svc", "exec sleep 1")
        assert env.exchange_dir() is not None  # the folder exists all the same

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HELIOS_LOCAL_SHELL", "0")
            server_program.cache_clear()
            assert not LocalEnvironment.supports_services  # asked of the host, as read
            in_provider("local-one-shot", body)
            patch.setenv("HELIOS_LOCAL_SHELL", "python")
            server_program.cache_clear()
            assert LocalEnvironment.supports_services
    finally:
        server_program.cache_clear()
    assert not NullEnvironment.supports_services and DockerEnvironment.supports_services


@pytest.mark.parametrize("provider", ["docker-shell", "docker-api"], indirect=True)
def test_an_exchange_folder_left_by_a_killed_helios_is_cleaned_up(provider: str) -> None:
    """Helios killed before `stop` leaves the docker sandbox's host folder (local's is
    the sandbox's own): the run's cleanup (an interrupt's, a resume's, `helios
    cleanup`) removes it once its container is gone, and a cleanup of every run
    spares a young one (a start)."""

    async def body(env: Environment) -> None:
        assert isinstance(env, DockerEnvironment)
        exchange = env.exchange_dir()
        assert exchange is not None and exchange[1].is_dir()
        folder = exchange[1]
        await env.exec("touch /run/helios/left-behind")
        run = _docker_services_run(env)
        assert str(folder) not in await _docker_services.remove_exchanges(run)  # alive
        gone = subprocess.run(["docker", "rm", "-f", env.container or ""], capture_output=True)
        assert gone.returncode == 0
        assert str(folder) not in await _docker_services.remove_exchanges(None)  # young
        assert folder.is_dir()
        assert str(folder) in await DockerEnvironment.cleanup_run(env.run_id)
        assert not folder.exists()

    in_provider(provider, body, run_id=f"services-{uuid.uuid4().hex[:8]}")  # its own run


def _docker_services_run(env: DockerEnvironment) -> str:
    from helios.environments.docker.environment import _name_part

    return _name_part(env.run_id, 36)
