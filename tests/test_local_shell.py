"""The local sandbox's persistent shell (issue 13): one bwrap per sandbox, commands
framed over its stdin and stdout, with every property of a one-shot exec kept."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios._proc import OUTPUT_CAP
from helios.environments.base import FileSteps
from helios.environments.local import LocalEnvironment
from helios.environments.local.cleanup import sandbox_processes
from helios.environments.local.program import ENV_SWITCH, server_program
from helios.environments.shell.native import native_server
from helios.environments.spec import SandboxSpec
from helios.errors import EnvironmentExecError

from .sandbox_helpers import Body, in_sandbox, until

pytestmark = pytest.mark.usefixtures("need_bwrap", "server")


@pytest.fixture(params=["compiled", "python"], autouse=True)
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test runs against both servers: the compiled one (where a C compiler is:
    CI must have one) and the Python one (the fallback; same wire format)."""
    if request.param == "compiled" and native_server() is None:
        if os.environ.get("HELIOS_REQUIRE_BWRAP") == "1":
            pytest.fail("the compiled shell server did not build (a C compiler is required)")
        pytest.skip("no C compiler: the compiled shell server cannot be built")
    monkeypatch.setenv(ENV_SWITCH, "1" if request.param == "compiled" else "python")
    server_program.cache_clear()
    yield request.param
    server_program.cache_clear()


def _in_sandbox(body: Body, *, spec: SandboxSpec | None = None) -> None:
    program = server_program()
    assert program is not None, "no server program (a C compiler or a system python3)"
    in_sandbox(body, spec=spec, run_id="shell")


def _only_shell(env: LocalEnvironment) -> int:
    """The pid of the one persistent shell the sandbox has (and check it is one)."""
    shells = [s for s in env._pool.shells.values() if not s.dead]
    assert len(shells) == 1
    assert shells[0].proc is not None
    return shells[0].proc.pid


async def _runs(env: LocalEnvironment, *argv: str) -> bool:
    """Whether a process of `env`'s sandbox runs `argv` now, seen from the host: a
    process with that command line below one of the sandbox's bwraps."""
    inits = {pid for pid, holder in sandbox_processes().items() if holder == env._holder}
    wanted = "\0".join(argv).encode() + b"\0"
    for name in os.listdir("/proc"):
        try:
            if not name.isdigit() or Path(f"/proc/{name}/cmdline").read_bytes() != wanted:
                continue
            pid = int(name)
            while pid > 1 and pid not in inits:
                stat = Path(f"/proc/{pid}/stat").read_text()
                pid = int(stat[stat.rfind(")") + 2 :].split()[1])  # its parent
        except OSError:
            continue  # it ended meanwhile
        if pid in inits:
            return True
    return False


async def _no_process_left(env: LocalEnvironment) -> bool:
    return not [p for p, h in sandbox_processes().items() if h == env._holder]


def test_many_commands_share_one_shell_with_framing_and_exit_codes() -> None:
    async def body(env: LocalEnvironment) -> None:
        first = await env.exec("echo out; echo err >&2; exit 3")
        assert (first.stdout, first.stderr, first.exit_code) == ("out\n", "err\n", 3)
        pid = _only_shell(env)
        for i in range(30):
            result = await env.exec(f"printf 'line {i}\\n'; printf 'e{i}' >&2; exit {i % 5}")
            assert (result.stdout, result.stderr, result.exit_code) == (
                f"line {i}\n",
                f"e{i}",
                i % 5,
            )
        assert _only_shell(env) == pid
        # A frame-like text in the output is only output.
        tricky = await env.exec("printf 'X\\0\\0\\0\\x10{\"code\": 9}'; exit 4")
        assert tricky.exit_code == 4 and tricky.stdout.startswith("X")
        killed = await env.exec("kill -9 $$")
        assert killed.exit_code == 137 and not killed.timed_out

    _in_sandbox(body)


def test_timeout_kills_the_command_and_what_it_started() -> None:
    async def body(env: LocalEnvironment) -> None:
        slow = await env.exec("echo before; (sleep 60 &); setsid sleep 61 & sleep 30", timeout=1)
        assert slow.timed_out and slow.stdout == "before\n"
        after = await env.exec("ps -eo comm")
        assert "sleep" not in after.stdout
        assert after.exit_code == 0 and not after.timed_out

    _in_sandbox(body)


def test_no_process_outlives_its_command() -> None:
    async def body(env: LocalEnvironment) -> None:
        started = await env.exec("nohup sleep 100 >/dev/null 2>&1 & setsid sleep 101 & echo ok")
        assert started.stdout == "ok\n"
        left = await env.exec("ps -eo pid,comm")
        assert "sleep" not in left.stdout
        # only the shell (the namespace's init), sh and ps itself
        assert len(left.stdout.strip().splitlines()) == 4, left.stdout

    _in_sandbox(body)


def test_huge_and_binary_outputs() -> None:
    async def body(env: LocalEnvironment) -> None:
        big = await env.exec(f"head -c {OUTPUT_CAP + 5000} /dev/zero | tr '\\0' a")
        assert big.stdout.startswith("a" * 1000)
        assert "[... 5000 bytes dropped ...]" in big.stdout
        assert big.exit_code == 0
        binary = await env.exec("head -c 300000 /dev/urandom; printf done >&2")
        assert binary.stderr == "done" and len(binary.stdout) > 100_000
        both = await env.exec("seq 1 200000; seq 1 100000 >&2")
        assert both.stdout.splitlines()[-1] == "200000"
        assert both.stderr.splitlines()[-1] == "100000"

    _in_sandbox(body)


def test_stdin_is_empty_and_closed_stdout_is_fine() -> None:
    async def body(env: LocalEnvironment) -> None:
        reads = await env.exec('cat; read line; echo "read: $? [$line]"', timeout=10)
        assert reads.stdout == "read: 1 []\n" and not reads.timed_out
        closed = await env.exec("exec >&-; echo still >&2; exit 2")
        assert (closed.stdout, closed.stderr, closed.exit_code) == ("", "still\n", 2)
        assert (await env.exec("echo next")).stdout == "next\n"
        # Its output ends before it does: it must still run to its own end.
        early = await env.exec("echo bye; exec >&- 2>&-; sleep 0.3; touch /tmp/late; exit 6")
        assert (early.stdout, early.exit_code, early.timed_out) == ("bye\n", 6, False)
        assert (await env.exec("test -f /tmp/late && echo ran")).stdout == "ran\n"

    _in_sandbox(body)


def test_the_shell_cannot_be_killed_or_forged_from_inside() -> None:
    async def body(env: LocalEnvironment) -> None:
        await env.exec("true")
        pid = _only_shell(env)
        survived = await env.exec("kill -9 1; kill -9 -1; kill -9 $PPID; echo alive")
        assert survived.stdout == "alive\n"
        forged = await env.exec("printf 'X\\0\\0\\0\\x02{}' > /proc/1/fd/1; echo tried")
        assert forged.stdout == "tried\n"
        assert (await env.exec("echo fine")).stdout == "fine\n"
        assert _only_shell(env) == pid

    _in_sandbox(body)


def test_a_shell_killed_mid_command_reports_and_is_replaced() -> None:
    async def body(env: LocalEnvironment) -> None:
        await env.exec("true")
        pid = _only_shell(env)
        (shell,) = env._pool.shells.values()
        read_frame = shell._frame
        printed = asyncio.Event()

        async def frame() -> tuple[bytes, bytes]:
            kind, data = await read_frame()
            if kind == b"O":
                printed.set()  # the command's output reached Helios: it is mid-command
            return kind, data

        shell._frame = frame  # type: ignore[method-assign]

        async def kill_once_it_printed() -> None:
            async def has_printed() -> bool:
                return printed.is_set()

            await until(has_printed, "the command's first output reached Helios")
            os.killpg(pid, signal.SIGKILL)

        killer = asyncio.create_task(kill_once_it_printed())
        result = await env.exec("echo partial; sleep 20", timeout=30)
        await killer
        assert result.exit_code == 137 and "died" in result.stderr
        assert result.stdout == "partial\n"
        again = await env.exec("echo again")
        assert again.stdout == "again\n" and _only_shell(env) != pid

    _in_sandbox(body)


def test_cancel_mid_command_leaves_no_process() -> None:
    async def body(env: LocalEnvironment) -> None:
        for _ in range(5):
            task = asyncio.create_task(env.exec("sleep 30"))
            await until(lambda: _runs(env, "sleep", "30"), "the command's `sleep 30` runs")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await until(lambda: _no_process_left(env), "the cancelled commands' bwraps have ended")
        assert (await env.exec("echo ok")).stdout == "ok\n"

    _in_sandbox(body)


def test_concurrent_commands_all_run() -> None:
    async def body(env: LocalEnvironment) -> None:
        results = await asyncio.gather(*(env.exec(f"sleep 0.2; echo {i}") for i in range(4)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]

    _in_sandbox(body)


def test_environment_users_network_and_read_only_system() -> None:
    spec = SandboxSpec(env={"DECLARED": "yes"})

    async def body(env: LocalEnvironment) -> None:
        seen = await env.exec("env; cat /proc/1/environ | tr '\\0' '\\n'", env={"EXTRA": "1"})
        names = {line.split("=", 1)[0] for line in seen.stdout.splitlines() if "=" in line}
        assert {"DECLARED", "EXTRA", "PATH"} <= names
        assert not names & {"HOME_HOST", "PYTEST_CURRENT_TEST", "VIRTUAL_ENV"}
        first = await env.exec("cat /proc/1/environ | tr '\\0' '\\n'")
        assert "EXTRA" not in first.stdout  # per-command variables stay per command
        denied = await env.exec("touch /usr/helios-x /etc/helios-x 2>&1; echo $?")
        assert denied.stdout.strip().endswith("1")
        who = await env.exec("id -un; echo $HOME", user="agent")
        assert who.stdout.split() == ["agent", "/home/agent"]
        root = await env.exec("id -u")
        assert root.stdout.strip() in ("0", str(os.getuid()))
        await env.set_network(True)
        await env.exec("true")
        assert len([s for s in env._pool.shells.values() if not s.dead]) == 3

    os.environ.setdefault("HOME_HOST", "x")
    _in_sandbox(body, spec=spec)


def test_stop_processes_keeps_only_a_sealed_idle_shell(tmp_path: Path) -> None:
    async def body(env: LocalEnvironment) -> None:
        await env.exec("true")
        pid = _only_shell(env)
        (shell,) = env._pool.shells.values()
        assert shell.sealed  # the server is not dumpable: nothing inside can trace it
        seal = await env.exec("grep -i '^cap' /proc/self/status; cat /proc/1/status")
        assert "CapEff:\t0000000000000000" in seal.stdout
        await env.exec("nohup sleep 100 >/dev/null 2>&1 &")
        await env.stop_processes()
        holder = env._holder
        left = [p for p, h in sandbox_processes().items() if h == holder]
        assert left == [shell.proc.pid] if shell.proc else left == []
        assert "sleep" not in (await env.exec("ps -eo comm")).stdout
        assert _only_shell(env) == pid  # the verifier reuses it
        shell.sealed = False  # as if PR_SET_DUMPABLE had failed: then it goes
        await env.stop_processes()
        assert env._pool.shells == {}
        assert [p for p, h in sandbox_processes().items() if h == holder] == []
        assert (await env.exec("echo fresh")).stdout == "fresh\n"
        assert _only_shell(env) != pid

    _in_sandbox(body)


@pytest.mark.parametrize(
    "tamper",
    [
        "prlimit --pid 1 --nproc=3:3",  # the verifier could then not fork: `cmd || echo 1`
        "renice -n 19 -p 1",
        "taskset -p 1 1",
    ],
)
def test_a_shell_a_command_changed_does_not_serve_the_verifier(tamper: str) -> None:
    """Same uid, no capabilities, not dumpable: a command still may lower the server's
    limits, raise its nice value or pin it; its children (the verifier's) would inherit
    them, so such a shell is not kept past the agent's phase."""
    if tamper.startswith("taskset") and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: pinning changes nothing")

    async def body(env: LocalEnvironment) -> None:
        before = (await env.exec("cat /proc/1/limits; nice")).stdout
        changed = await env.exec(f"{tamper} >/dev/null && echo changed")
        assert changed.stdout == "changed\n", changed  # the attack works on the server...
        pid = _only_shell(env)
        await env.stop_processes()
        assert env._pool.shells == {}  # ...so it is not kept
        fresh = await env.exec("cat /proc/1/limits; nice")
        assert _only_shell(env) != pid
        assert fresh.stdout == before

    _in_sandbox(body)


def test_an_untouched_shell_is_kept_for_the_verifier() -> None:
    async def body(env: LocalEnvironment) -> None:
        await env.exec("prlimit --pid $$ --nproc=3:3; renice -n 19 -p $$ >/dev/null; true")
        pid = _only_shell(env)
        await env.stop_processes()  # a command changing itself leaves the server as it was
        assert _only_shell(env) == pid

    _in_sandbox(body)


def test_one_shot_fallback_keeps_working() -> None:
    async def body(env: LocalEnvironment) -> None:
        await env._pool.close()
        env._pool.one_shot = True
        result = await env.exec("echo one-shot; exit 5")
        assert (result.stdout, result.exit_code) == ("one-shot\n", 5)
        assert env._pool.shells == {}

    _in_sandbox(body)


def test_a_clean_sandbox_is_stopped_without_searching_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import helios.environments.local.cleanup as cleanup
    import helios.environments.local.environment as local

    scans: list[object] = []
    real = cleanup.kill_processes

    async def counting(holder: Path, **kwargs: object) -> bool:
        scans.append(holder)
        return await real(holder)

    monkeypatch.setattr(local, "kill_processes", counting)
    monkeypatch.setattr(cleanup, "kill_processes", counting)

    async def body(env: LocalEnvironment) -> None:
        await env.exec("sleep 100 & echo started")
        assert (await env.exec("sleep 30", timeout=0.5)).timed_out  # the server's own kill
        task = asyncio.create_task(env.exec("sleep 30"))
        await until(lambda: _runs(env, "sleep", "30"), "the command's `sleep 30` runs")
        task.cancel()  # the shell is killed through its known server
        with pytest.raises(asyncio.CancelledError):
            await task
        await env.stop_processes()
        assert scans == []  # every init it started is known to have ended
        env._pool.one_shot = True
        assert (await env.exec("sleep 30", timeout=0.5)).timed_out
        await env.stop_processes()
        assert len(scans) == 1  # a one-shot timeout is a gap in the bookkeeping
        await env.exec("true")
        await env.stop_processes()
        assert len(scans) == 1

    _in_sandbox(body)


def test_transfers_go_through_the_shell_and_stay_checked(tmp_path: Path) -> None:
    src = tmp_path / "up"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)) * 1000)
    (src / "link").symlink_to("/etc/passwd")
    single = tmp_path / "one.txt"
    single.write_text("S")

    async def body(env: LocalEnvironment) -> None:
        await env.upload(src, "/data/in")
        await env.upload(single, "/data/x/renamed.txt")
        pid = _only_shell(env)  # both went through the one shell
        listing = await env.exec("cat /data/in/a.txt /data/x/renamed.txt; readlink /data/in/link")
        assert listing.stdout == "AS/etc/passwd\n"
        await env.exec("ln -s /etc/shadow /data/in/evil; mkfifo /data/in/fifo")
        await env.download("/data/in", tmp_path / "down")
        down = tmp_path / "down"
        assert (down / "sub" / "b.bin").read_bytes() == bytes(range(256)) * 1000
        assert not (down / "link").exists() and not (down / "evil").exists()
        assert not (down / "fifo").exists()
        await env.download("/data/x/renamed.txt", tmp_path / "r.txt")
        assert (tmp_path / "r.txt").read_text() == "S"
        with pytest.raises(EnvironmentExecError, match="does not exist"):
            await env.download("/nope", tmp_path / "nope")
        await env.exec("ln -s /etc /logs/linked")
        await env.download("/logs/linked", tmp_path / "linked")
        assert not any((tmp_path / "linked").glob("*"))  # the link itself is dropped
        assert _only_shell(env) == pid

    _in_sandbox(body)


def test_a_hijacked_archive_from_the_shell_follows_no_link(tmp_path: Path) -> None:
    """Whatever the in-sandbox `tar` hands back is checked on the host: here it is
    replaced by a script that emits links to a host file and a path out of the
    destination."""
    secret = tmp_path / "host-secret.txt"
    secret.write_text("0.5\n")

    async def body(env: LocalEnvironment) -> None:
        forged = (
            "d=$(mktemp -d) && mkdir $d/verifier && echo ok > $d/verifier/ok"
            f" && ln -s {secret} $d/verifier/reward.txt && ln -s / $d/verifier/root"
            " && cd $d && exec tar -c -f - verifier"
        )
        real = env._shell_command

        async def hijacked(command: str, **kwargs: object) -> object:
            return await real(forged if "tar -c" in command else command, **kwargs)  # type: ignore[arg-type]

        env._shell_command = hijacked  # type: ignore[method-assign,assignment]
        await env.download("/logs/verifier", tmp_path / "out")
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ok"]

    _in_sandbox(body)


def test_two_commands_at_once_without_a_shell_leave_no_orphan_shell() -> None:
    """Both would start a shell for the same key; the second must not replace (and so
    lose) the first: one start, the other command a one-shot exec."""

    async def body(env: LocalEnvironment) -> None:
        await env._pool.close()  # no shell, none starting: as after a shell died
        holder = env._holder
        results = await asyncio.gather(env.exec("echo a"), env.exec("echo b"))
        assert sorted(r.stdout for r in results) == ["a\n", "b\n"]
        live = [s for s in env._pool.shells.values() if not s.dead]
        assert len(live) == 1
        await env._pool.close()
        assert [p for p, h in sandbox_processes().items() if h == holder] == []

    _in_sandbox(body)


def test_file_steps_run_in_the_server_without_a_process() -> None:
    """The "steps" operation: file work done by the server itself. The pids of a
    fresh pid namespace come in order, so a command's pid before and after shows
    how many processes the steps started: none, or one for the program after "--"."""

    async def body(env: LocalEnvironment) -> None:
        async def pid() -> int:
            return int((await env._shell_command("echo $$")).stdout)  # type: ignore[union-attr]

        await env.exec("mkdir -p /keep /w/a/b && echo K > /keep/k && ln -s /keep /w/a/out"
                       " && ln -s /keep /link && echo x > /w/a/b/x")  # fmt: skip
        before = await pid()
        words = ["rm", "/w", "rm", "/link", "mkdir", "/w/new/er", "private", "/tmp/home",
                 "kind", "/keep/k", "kind", "/w", "kind", "/link", "kind", "/dev/null"]  # fmt: skip
        done = await env._shell_steps(words)
        assert done is not None and (done.exit_code, done.stderr) == (0, "")
        assert done.stdout == "file\ndir\nmissing\nspecial\n"
        assert await pid() == before + 1  # the steps started no process
        seen = await env._shell_command("ls -A /w /w/new; cat /keep/k; stat -c %a /tmp/home")
        assert seen is not None and seen.stdout.split() == ["/w:", "new", "/w/new:", "er", "K",
                                                            "700"]  # fmt: skip
        before = await pid()
        ran = await env._shell_steps(["mkdir", "/w2", "--", "sh", "-c", 'read x; echo $x $0'],
                                     data=b"fed\n")  # fmt: skip
        assert ran is not None and (ran.stdout, ran.exit_code) == ("fed sh\n", 0)
        assert await pid() == before + 2  # only the program's process
        for bad, why in [
            (["private", "/tmp/home", "kind", "/w"], "File exists"),  # must be new
            (["rm", "/"], "Invalid argument"), (["rm", "/w/.."], "Invalid argument"),
            (["rm", "relative"], "Invalid argument"), (["kind"], "without its path"),
            (["mkdir", "/keep/k/under"], "Not a directory"), (["chmod", "/w"], "Invalid"),
            (["--", "no-such-program-here"], "cannot start"),
        ]:  # fmt: skip
            failed = await env._shell_steps(bad)
            assert failed is not None and not failed.ok and why in failed.stderr, (bad, failed)
            assert failed.stdout == ""  # nothing after the failed step ran
        assert (await env.exec("cat /keep/k; ls /")).stdout.startswith("K\n")
        # A tree deeper than the server goes: refused there, removed by `rm -rf`.
        await env.exec("cd /w && for i in $(seq 200); do mkdir d && cd d; done && echo x > f")
        deep = await env._shell_steps(["rm", "/w"])
        assert deep is not None and not deep.ok and "Too many levels" in deep.stderr
        cleared = await env.prepare_and_upload(FileSteps(remove=("/w",), make=("/w",)), [])
        assert cleared.ok and (await env.exec("ls -A /w")).stdout == ""

    _in_sandbox(body)
