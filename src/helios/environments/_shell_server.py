"""The persistent shell's server: runs *inside* a local sandbox, one per sandbox
(and user and network), and runs the commands the host sends it one at a time.
Where the host has a C compiler, `_shell_server.c` (the same wire format and
behaviour) runs instead; this one is the fallback.

It is started by bwrap as `python3 -I -S -c <this file's text>` with the host's
system Python (read-only in the sandbox), so nothing the agent can write is on
its import path. It imports only the standard library and must stay runnable
by any Python 3.9+ (`os.pidfd_open`).

Wire format (see `_shell.py`, the host side):
- host → server: fields of `<length>\\n<bytes>`: the timeout, the script, the
  bytes for its stdin (an upload's archive; empty: /dev/null), the number of
  variables, each variable's name and value;
- server → host: frames of 1 type byte + 4-byte big-endian length + payload:
  `R` ready (once), `O` stdout bytes, `E` stderr bytes, `X` the end:
  b"<exit code> <1 if timed out else 0>".

It imports builtin modules only (`posix`, `select`, `sys`, `time`), and `_ctypes`
for one prctl: no `os`, `signal`, `subprocess`, `json` or `selectors`, whose own
imports would cost milliseconds per start. It starts in about 13 ms of CPU, against
9.4 ms for a bare interpreter.

Per command, as a one-shot bwrap exec would:
- `sh -c script` with exactly the given environment, stdin empty (/dev/null),
  its own session, SIGPIPE and SIGXFSZ at their defaults; the server's own
  pipes are never inherited;
- when it exits (or its timeout passes) every other process of the sandbox is
  killed (`kill(-1)`), so no process outlives its command, and the output ends
  when that command's does. The server is the pid namespace's init (bwrap's
  `--as-pid-1`), so nothing inside can kill it, and it reaps the orphans;
- a command killed by signal N reports 128 + N, as a shell would.
"""

from __future__ import annotations

# Builtin modules only: `os` is a Python module over `posix` whose own imports, like
# `signal`'s (enum), cost milliseconds of CPU per server start, once per sandbox.
import posix as os
import select
import sys
import time

SIGKILL = 9  # signal.SIGKILL on Linux
#: SIGPIPE and SIGXFSZ, which Python ignores and children would inherit ignored:
#: a command gets them back at their defaults, as in a one-shot exec or a container
DEFAULT_SIGNALS = (13, 25)

#: after the command's exit (or its timeout), how long leftover output may drain
DRAIN_SECONDS = 2.0
_READ = select.POLLIN | select.POLLHUP | select.POLLERR


def send(kind: bytes, data: bytes) -> None:
    view = memoryview(kind + len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(1, view) :]


def kill_the_rest() -> None:
    """Every process of this pid namespace but this server (its pid 1)."""
    for _ in range(2):
        try:
            os.kill(-1, SIGKILL)
        except OSError:
            return


def reap_orphans() -> None:
    """Collect the killed processes that were reparented to this server (pid 1),
    so none shows up as a zombie in the next command."""
    until = time.monotonic() + DRAIN_SECONDS
    while time.monotonic() < until:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            time.sleep(0.0005)  # killed, not yet dead


def spawn(script: bytes, env: dict[bytes, bytes], feed: bool) -> tuple[int, int, int, int]:
    """`sh -c script` in its own session: stdout and stderr pipes; stdin /dev/null,
    or a pipe for `feed` (an upload's archive)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if feed else (-1, -1)
    actions = [
        (os.POSIX_SPAWN_DUP2, in_r, 0) if feed else (os.POSIX_SPAWN_OPEN, 0, "/dev/null",
                                                      os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    try:
        pid = os.posix_spawn(b"/bin/sh", [b"sh", b"-c", script], env,
                             file_actions=actions, setsid=True, setsigdef=DEFAULT_SIGNALS)
    finally:
        for fd in (out_w, err_w, in_r):
            if fd >= 0:
                os.close(fd)
    return pid, out_r, err_r, in_w


def run(script: bytes, env: dict[bytes, bytes], timeout: float | None, data: bytes) -> None:
    pid, out_r, err_r, in_w = spawn(script, env, bool(data))
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    kinds = {out_r: b"O", err_r: b"E"}
    for fd in (out_r, err_r, pidfd):
        poller.register(fd, _READ)
    pending = memoryview(data)
    if in_w >= 0:
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    deadline = None if timeout is None else time.monotonic() + timeout
    drain: float | None = None
    timed_out = exited = False
    # Until the command has exited and its output has ended (or its time is up):
    # a command may close its output before it exits, and must not be killed then.
    while kinds or not exited:
        limits = [t for t in (deadline, drain) if t is not None]
        wait = None if not limits else max(0.0, min(limits) - time.monotonic()) * 1000
        for fd, _ in poller.poll(wait):
            if fd == in_w:
                try:
                    pending = pending[os.write(in_w, pending[:65536]) :]
                except OSError:  # the command stopped reading
                    pending = pending[:0]
                if not pending:
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = -1
                continue
            if fd == pidfd:
                # The command is done: nothing it started may outlive it.
                poller.unregister(pidfd)
                exited = True
                kill_the_rest()
                deadline, drain = None, time.monotonic() + DRAIN_SECONDS
                continue
            chunk = os.read(fd, 65536)
            if chunk:
                send(kinds[fd], chunk)
            else:
                poller.unregister(fd)
                os.close(fd)
                del kinds[fd]
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            timed_out = True
            kill_the_rest()
            deadline, drain = None, now + DRAIN_SECONDS
        if drain is not None and now >= drain:
            break
    for fd in [*kinds, in_w, pidfd]:
        if fd >= 0:
            os.close(fd)
    kill_the_rest()
    _, status = os.waitpid(pid, 0)
    reap_orphans()
    code = os.waitstatus_to_exitcode(status)
    send(b"X", b"%d %d" % (128 - code if code < 0 else code, timed_out))


def field(reader: object) -> bytes | None:
    line = reader.readline()  # type: ignore[attr-defined]
    if not line:
        return None
    return reader.read(int(line))  # type: ignore[attr-defined,no-any-return]


def seal() -> bytes:
    """PR_SET_DUMPABLE 0, so the commands (same uid, no capabilities) may neither trace
    this server nor open its pipes: b"sealed" when PR_GET_DUMPABLE then says 0.
    libc's prctl is reached through `_ctypes`: `import ctypes` costs ~3 ms per start."""
    try:
        import _ctypes

        class CInt(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "i"

        class CFunction(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = CInt

        prctl = CFunction(_ctypes.dlsym(_ctypes.dlopen(None, 2), "prctl"))  # type: ignore[arg-type]
        if prctl(4, 0, 0, 0, 0) == 0 and prctl(3, 0, 0, 0, 0) == 0:
            return b"sealed"
    except Exception:  # another Python's internals: not sealed, and the host is told
        pass
    return b""


def main() -> None:
    """Requests: fields of `<length>\\n<bytes>`: the timeout (empty: none), the
    script, the bytes for its stdin (empty: /dev/null), the number of variables,
    then each variable's name and value."""
    if os.getpid() != 1:
        # kill(-1) anywhere else would reach every process the user may signal.
        sys.exit("helios shell: not the init of its own pid namespace; refusing to run")
    reader = sys.stdin.buffer
    send(b"R", seal())  # ready
    while (timeout := field(reader)) is not None:
        script = field(reader) or b""
        data = field(reader) or b""
        env: dict[bytes, bytes] = {}
        for _ in range(int(field(reader) or b"0")):
            name = field(reader) or b""
            env[name] = field(reader) or b""
        run(script, env, float(timeout) if timeout else None, data)


if __name__ == "__main__":
    main()
