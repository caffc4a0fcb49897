"""The compiled shell server (`shell/server.c`): what the sandbox runs, who can
change it, how it is built and cached, and what a broken request does to it.
The behaviour both servers share is tested in test_local_shell.py, once per server."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import helios.environments.shell.native as _shell_native
from helios.environments.local import LocalEnvironment
from helios.environments.local.program import ENV_SWITCH, server_program
from helios.environments.shell.native import SERVER_MOUNT, native_server, static_server
from helios.environments.spec import SandboxSpec

from .sandbox_helpers import Body, host_system_binds, in_sandbox


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[bytes]:
    binary = native_server()
    if binary is None:
        if os.environ.get("HELIOS_REQUIRE_BWRAP") == "1":
            pytest.fail("the compiled shell server did not build (a C compiler is required)")
        pytest.skip("no C compiler")
    monkeypatch.setenv(ENV_SWITCH, "1")
    server_program.cache_clear()
    yield binary
    server_program.cache_clear()


def _in_sandbox(body: Body, spec: SandboxSpec | None = None) -> None:
    in_sandbox(body, spec=spec, run_id="native")


@pytest.mark.usefixtures("need_bwrap")
def test_the_sandbox_init_is_the_compiled_server_with_its_limits(compiled: bytes) -> None:
    spec = SandboxSpec(memory_mb=300, pids=77, storage_mb=40)

    async def body(env: LocalEnvironment) -> None:
        init = await env.exec("tr '\\0' ' ' < /proc/1/cmdline")
        assert init.stdout.split() == [SERVER_MOUNT, "77", str(300 << 20), str(40 << 20)]
        limits = (await env.exec("cat /proc/self/limits")).stdout
        for name, value in (("processes", 77), ("data size", 300 << 20),
                            ("file size", 40 << 20)):  # fmt: skip
            line = next(ln for ln in limits.splitlines() if f"Max {name}" in ln)
            assert line.split()[-3:-1] == [str(value), str(value)], line  # soft = hard
        # No prlimit process before the server: it set them itself.
        assert "prlimit" not in (await env.exec("ps -eo comm")).stdout

    _in_sandbox(body, spec)


@pytest.mark.usefixtures("need_bwrap")
def test_the_agent_cannot_change_the_server(compiled: bytes) -> None:
    digest = hashlib.sha256(compiled).hexdigest()

    async def body(env: LocalEnvironment) -> None:
        tries = await env.exec(
            f"echo evil > {SERVER_MOUNT}; rm -f {SERVER_MOUNT}; mv {SERVER_MOUNT} /x; "
            f"umount {SERVER_MOUNT}; sha256sum {SERVER_MOUNT}; ls /proc/1/exe -L"
        )
        assert tries.stdout.split()[0] == digest
        assert "Permission denied" in tries.stderr  # sealed: not even its file is reachable
        assert env.root is not None
        host_copy = env.root.parent / _shell_native.HOLDER_NAME
        assert host_copy.read_bytes() == compiled
        if os.geteuid() == 0:  # the sandbox runs as nobody on the host: not its file
            info = host_copy.stat()
            assert info.st_uid == 0 and not info.st_mode & 0o022
        # A shell started after the agent's (another user's) runs the same program.
        again = await env.exec(f"sha256sum {SERVER_MOUNT}", user=0)
        assert again.stdout.split()[0] == digest

    _in_sandbox(body)


@pytest.mark.usefixtures("need_bwrap")
@pytest.mark.parametrize("switch", ["1", "python"])
def test_commands_get_default_pipe_and_file_size_signals(
    switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_SWITCH, switch)
    server_program.cache_clear()

    async def body(env: LocalEnvironment) -> None:
        # A writer to a closed pipe dies quietly, as in a container: no "Broken pipe".
        piped = await env.exec("yes | head -n 2")
        assert (piped.stdout, piped.stderr, piped.exit_code) == ("y\ny\n", "", 0)
        big = await env.exec("head -c 3000000 /dev/zero > /tmp/big; echo $?")
        assert big.stdout.strip() == str(128 + 25)  # SIGXFSZ past RLIMIT_FSIZE

    try:
        _in_sandbox(body, SandboxSpec(storage_mb=2))
    finally:
        server_program.cache_clear()


def _fresh_build(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    native_server.cache_clear()


@pytest.fixture
def rebuilds() -> Iterator[None]:
    native_server.cache_clear()
    yield
    native_server.cache_clear()


@pytest.mark.usefixtures("compiled", "rebuilds")
def test_the_build_is_cached_and_a_tampered_cache_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fresh_build(monkeypatch, tmp_path)
    built = native_server()
    assert built is not None and built.startswith(b"\x7fELF")
    [cached] = (tmp_path / "helios").glob("shell-server-*")
    assert stat.S_IMODE(cached.stat().st_mode) == 0o755
    # Someone else could have written it: not used, built again privately.
    cached.write_bytes(b"#!/bin/sh\necho forged\n")
    cached.chmod(0o777)
    _fresh_build(monkeypatch, tmp_path)
    assert native_server() == built
    # A link in its place is not followed either.
    cached.unlink()
    cached.symlink_to("/bin/sh")
    _fresh_build(monkeypatch, tmp_path)
    assert native_server() == built


@pytest.mark.usefixtures("compiled", "rebuilds")
def test_a_new_build_prunes_old_versions_nobody_used_for_a_month(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "helios"
    folder.mkdir(mode=0o700)
    month = time.time() - 31 * 86400
    stale, recent, foreign = (folder / f"shell-server-{n}" for n in ("stale", "recent", "x"))
    for path in (stale, recent, foreign):
        path.write_bytes(b"old build")
    os.utime(stale, (month, month))
    os.utime(recent, (time.time(), month))  # read today by another installed version
    os.chown(foreign, 12345, 12345)
    os.utime(foreign, (month, month))
    (folder / "notes.txt").write_text("not a build")
    _fresh_build(monkeypatch, tmp_path)
    assert native_server() is not None
    left = sorted(p.name for p in folder.iterdir())
    assert "shell-server-stale" not in left
    assert {"shell-server-recent", "shell-server-x", "notes.txt"} <= set(left)
    assert len([n for n in left if n.startswith("shell-server-")]) == 3  # + the new build


@pytest.mark.usefixtures("rebuilds")
def test_without_a_compiler_the_python_server_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _fresh_build(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with caplog.at_level(logging.WARNING, logger="helios.environments.shell.native"):
        assert native_server() is None
    assert "no C compiler: install gcc" in caplog.text  # the user is told, once
    monkeypatch.setenv(ENV_SWITCH, "1")
    server_program.cache_clear()
    try:
        program = server_program()
        assert program is not None and program.binary is None
        assert program.python is not None and program.python.endswith("python3")
    finally:
        server_program.cache_clear()


@pytest.mark.usefixtures("rebuilds")
def test_a_compiler_that_fails_leaves_the_python_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _fresh_build(monkeypatch, tmp_path / "cache")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "cc"
    broken.write_text("#!/bin/sh\necho 'cc: internal error' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with caplog.at_level(logging.WARNING, logger="helios.environments.shell.native"):
        assert native_server() is None
    assert "the C compiler failed" in caplog.text
    assert not list((tmp_path / "cache" / "helios").glob("*shell-server*"))


def _serve(binary: Path, request: bytes) -> subprocess.CompletedProcess[bytes]:
    """The server as the init of a throwaway pid namespace (it refuses to run
    anywhere else: its kill(-1) would reach the host's processes)."""
    sandbox = ["bwrap", "--unshare-all", "--die-with-parent", "--as-pid-1",
               *host_system_binds(), "--ro-bind", str(binary), "/server",
               "--dev", "/dev", "--proc", "/proc"]  # fmt: skip
    return subprocess.run(
        [*sandbox, "/server", "64", str(256 << 20), str(8 << 20)], input=request,
        capture_output=True, timeout=20, check=False,
    )  # fmt: skip


def test_the_server_refuses_to_run_outside_its_own_pid_namespace(server_binary: Path) -> None:
    done = subprocess.run([str(server_binary), "64", "1000000", "1000000"], input=b"",
                          capture_output=True, timeout=20, check=False)  # fmt: skip
    assert done.returncode == 2 and b"refusing to run" in done.stderr
    assert done.stdout == b""  # not even ready


@pytest.fixture(scope="module")
def server_binary(tmp_path_factory: pytest.TempPathFactory, bwrap_available: bool) -> Path:
    if not bwrap_available:
        if os.environ.get("HELIOS_REQUIRE_BWRAP") == "1":
            pytest.fail("bubblewrap is required (HELIOS_REQUIRE_BWRAP=1)")
        pytest.skip("bubblewrap not available")
    binary = native_server()
    if binary is None:
        if os.environ.get("HELIOS_REQUIRE_BWRAP") == "1":
            pytest.fail("the compiled shell server did not build (a C compiler is required)")
        pytest.skip("no C compiler")
    path = tmp_path_factory.mktemp("server") / "shell"
    path.write_bytes(binary)
    path.chmod(0o755)
    return path


def test_the_server_frames_a_command_in_a_bare_namespace(server_binary: Path) -> None:
    fields = [b"run", b"5.0", b"echo hi; echo oops >&2; exit 7", b"", b"1", b"PATH",
              b"/usr/bin:/bin"]  # fmt: skip
    done = _serve(server_binary, b"".join(b"%d\n%s" % (len(f), f) for f in fields))
    assert done.returncode == 0
    out = done.stdout
    frames = []
    while out:
        size = int.from_bytes(out[1:5], "big")
        frames.append((out[:1], out[5 : 5 + size]))
        out = out[5 + size :]
    assert frames[1:] == [(b"O", b"hi\n"), (b"E", b"oops\n"), (b"X", b"7 0")]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.binary(max_size=200))
def test_a_broken_request_ends_the_server_cleanly(server_binary: Path, request: bytes) -> None:
    """Whatever the bytes, the server ends (at the end of its input) without a crash:
    an exit, never a signal, and never a hang (the run's timeout)."""
    done = _serve(server_binary, request)
    assert done.returncode in (0, 2), (request, done.returncode, done.stderr)


@pytest.mark.usefixtures("compiled")
def test_two_processes_building_at_once_both_get_the_whole_server(tmp_path: Path) -> None:
    """Each builds under its own temporary name and renames: neither reads the other's
    half-written file, and no partial file is left in the cache."""
    code = (
        "import hashlib, sys\n"
        "from helios.environments.shell.native import native_server\n"
        "data = native_server()\n"
        "print(hashlib.sha256(data).hexdigest() if data else 'none')\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                             text=True) for _ in range(3)]  # fmt: skip
    digests = {run.communicate(timeout=120)[0].strip() for run in runs}
    assert len(digests) == 1 and "none" not in digests
    [cached] = (tmp_path / "helios").iterdir()  # one whole build, no leftovers
    assert hashlib.sha256(cached.read_bytes()).hexdigest() in digests


@pytest.mark.usefixtures("compiled")
def test_the_static_build_is_cached_apart_and_its_absence_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import helios.environments.shell.native as _shell_native

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    static_server.cache_clear()
    try:
        built = static_server()
        assert built is not None and built.name.startswith("shell-static-")
        assert built.parent == tmp_path / "helios"
        # linked statically: no interpreter to load (it runs on any image)
        assert b"ld-linux" not in built.read_bytes()[:4096]
        static_server.cache_clear()
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
        monkeypatch.setattr(_shell_native, "_compiler", lambda: None)
        with caplog.at_level("WARNING"):
            assert static_server() is None
        assert "static shell server could not be built (no C compiler" in caplog.text
    finally:
        static_server.cache_clear()
