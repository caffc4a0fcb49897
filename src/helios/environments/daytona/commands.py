"""A command through Daytona's toolbox (`process.exec`), with its stdout and
stderr apart.

The toolbox answers a command's output as one text, stdout and stderr mixed.
So the command runs under a small `sh` script that sends its stderr to a file
and, after its stdout, prints a marker (random per call: the command cannot
forge it) and that file: one request per command, split on the host.

A command past its timeout is stopped by the toolbox, which answers 408 (or the
request itself times out): `timed_out`, as the other providers say it.
"""

from __future__ import annotations

import math
import secrets
import shlex

from helios.environments.base import ExecResult

#: seconds added to the request's own timeout over the command's
REQUEST_GRACE = 30


def new_marker() -> str:
    return f"\n--helios-stderr-{secrets.token_hex(12)}--\n"


def wrapped(command: str, marker: str) -> str:
    """`sh -c` of a script running `command` with its stderr kept apart."""
    script = (
        "e=$(mktemp /tmp/.helios-stderr-XXXXXXXX 2>/dev/null) || e=/tmp/.helios-stderr-$$\n"
        f'sh -c {shlex.quote(command)} 2>"$e"\n'
        "c=$?\n"
        f"printf '%s' {shlex.quote(marker)}\n"
        'cat -- "$e" 2>/dev/null; rm -f -- "$e"; exit $c'
    )
    return f"sh -c {shlex.quote(script)}"


def split(output: str, marker: str) -> tuple[str, str]:
    """(stdout, stderr) of a wrapped command's output; all of it is stdout when the
    marker is missing (the script was stopped before it printed it)."""
    out, found, err = output.rpartition(marker)
    if not found:
        return output, ""
    return out, err


def timeout_seconds(timeout: float | None) -> int | None:
    """The toolbox takes whole seconds, at least one."""
    if timeout is None:
        return None
    return max(1, math.ceil(timeout))


def timed_out(output: str = "") -> ExecResult:
    return ExecResult(output, "", 124, timed_out=True)


def is_timeout(error: BaseException) -> bool:
    """The toolbox stopped the command at its timeout (408), or the request timed out."""
    if getattr(error, "status_code", None) == 408:
        return True
    names = {cls.__name__ for cls in type(error).__mro__}
    return "DaytonaTimeoutError" in names


#: every process of the sandbox but pid 1 (Daytona's daemon, whose toolbox runs
#: the commands) and this command's own chain of parents, killed: `kill -9 -1`
#: from the sandbox's `sh` (builtins only)
KILL_ALL = "kill -9 -1"
#: the processes left (pids, one a line), short of pid 1, this command's chain of
#: parents, zombies, and pid 1's own children in its process group (its helpers)
SURVIVORS = r"""
keep=" 1 $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  read -r l < /proc/$p/stat || break
  set -f; set -- ${l##*) }; p=$2
  keep="$keep$p "
done
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  case "$keep" in *" $pid "*) continue;; esac
  read -r l < "$d/stat" 2>/dev/null || continue
  set -f; set -- ${l##*) }
  [ "$1" = Z ] && continue
  [ "$2" = 1 ] && [ "$3" = 1 ] && continue
  echo "$pid"
done
"""
