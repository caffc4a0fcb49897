"""The persistent shell's server: runs *inside* a local sandbox, one per sandbox
(and user and network), and runs the commands the host sends it one at a time.

It is started by bwrap as `python3 -I -S -c <this file's text>` with the host's
system Python (read-only in the sandbox), so nothing the agent can write is on
its import path. It imports only the standard library and must stay runnable
by any Python 3.9+ (`os.pidfd_open`).

Wire format (see `_shell.py`, the host side):
- host → server: `<n>\\n` then n bytes of JSON: {"script", "env", "timeout"};
- server → host: frames of 1 type byte + 4-byte big-endian length + payload:
  `R` ready (once), `O` stdout bytes, `E` stderr bytes, `X` the end: JSON
  {"code", "timed_out"}.

Per command, as a one-shot bwrap exec would:
- `sh -c script` with exactly the given environment, stdin empty (/dev/null),
  its own session; the server's own pipes are never inherited;
- when it exits (or its timeout passes) every other process of the sandbox is
  killed (`kill(-1)`), so no process outlives its command, and the output ends
  when that command's does. The server is the pid namespace's init (bwrap's
  `--as-pid-1`), so nothing inside can kill it, and it reaps the orphans;
- a command killed by signal N reports 128 + N, as a shell would.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Any

#: after the command's exit (or its timeout), how long leftover output may drain
DRAIN_SECONDS = 2.0


def send(kind: bytes, data: bytes) -> None:
    view = memoryview(kind + len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(1, view) :]


def kill_the_rest() -> None:
    """Every process of this pid namespace but this server (its pid 1)."""
    for _ in range(2):
        try:
            os.kill(-1, signal.SIGKILL)
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


def run(request: dict[str, Any]) -> None:
    timeout = request.get("timeout")
    proc = subprocess.Popen(
        ["sh", "-c", request["script"]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=request["env"],
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, b"O")
    selector.register(proc.stderr, selectors.EVENT_READ, b"E")
    pidfd = os.pidfd_open(proc.pid)
    selector.register(pidfd, selectors.EVENT_READ, None)
    now = time.monotonic()
    deadline = None if timeout is None else now + float(timeout)
    drain: float | None = None
    timed_out = exited = False
    streams = 2
    # Until the command has exited and its output has ended (or its time is up):
    # a command may close its output before it exits, and must not be killed then.
    while streams or not exited:
        limits = [t for t in (deadline, drain) if t is not None]
        wait = None if not limits else max(0.0, min(limits) - time.monotonic())
        for key, _ in selector.select(wait):
            if key.data is None:
                # The command is done: nothing it started may outlive it.
                selector.unregister(pidfd)
                exited = True
                kill_the_rest()
                deadline, drain = None, time.monotonic() + DRAIN_SECONDS
                continue
            chunk = os.read(key.fd, 65536)
            if chunk:
                send(key.data, chunk)
            else:
                selector.unregister(key.fileobj)
                streams -= 1
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            timed_out = True
            kill_the_rest()
            deadline, drain = None, now + DRAIN_SECONDS
        if drain is not None and now >= drain:
            break
    selector.close()
    os.close(pidfd)
    kill_the_rest()
    code = proc.wait()
    reap_orphans()
    proc.stdout.close()
    proc.stderr.close()
    result = {"code": 128 - code if code < 0 else code, "timed_out": timed_out}
    send(b"X", json.dumps(result).encode())


def main() -> None:
    try:  # other processes of the sandbox (same uid) may not open our pipes via /proc
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass
    reader = sys.stdin.buffer
    send(b"R", b"")  # ready
    while True:
        line = reader.readline()
        if not line:
            return
        run(json.loads(reader.read(int(line))))


if __name__ == "__main__":
    main()
