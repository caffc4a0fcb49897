"""The agent's pages stop with the agent.

The browser is a desktop service: it outlives the agent so that the tests can read
the desktop, and so would every page the agent loaded in it, timers included (a
page could retitle its window while the tests read it). `freeze_pages` stops
(SIGSTOP) Chromium's renderer processes, where pages' scripts run, and leaves the
browser process itself alone: the windows, their titles and their pixels stay
readable by the tests, exactly as the agent left them. `thaw_pages` lets them run
again (SIGCONT) for the next step's agent of a task with several steps.
"""

from __future__ import annotations

from helios.environments.base import Environment
from helios.environments.desktop.services import SERVICE_BROWSER
from helios.errors import EnvironmentExecError

#: Every process whose argv holds Chromium's renderer flag gets SIGSTOP (or, to thaw,
#: SIGCONT), in passes until one finds none left to signal (a renderer started
#: meanwhile is caught by the next). Shell builtins only (`read` skips the NULs of
#: /proc/<pid>/cmdline; `kill`): no program of the image that a root agent may have
#: replaced runs. The flag is spelled in two parts so that this script's own `sh`
#: (whose argv holds the script) never matches; it spares itself by its pid anyway.
_SIGNAL = r"""
flag="--type=""renderer"
pass=0
while :; do
  pass=$((pass + 1)); found=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = $$ ] && continue
    l=
    read -r l 2>/dev/null <"$d/cmdline" || [ -n "$l" ] || continue
    case $l in *"$flag"*) ;; *) continue;; esac
    l=
    read -r l 2>/dev/null <"$d/stat" || [ -n "$l" ] || continue
    state=${l##*) }; state=${state%% *}
    case $state in Z|X|"") continue;; esac
    case $state in T|t) [ "$sig" = STOP ] && continue;; *) [ "$sig" = CONT ] && continue;; esac
    kill -"$sig" "$p" 2>/dev/null && found=$((found + 1))
  done
  [ $found = 0 ] && break
  [ $pass -lt 50 ] || { echo "renderers still changing after $pass passes"; exit 3; }
done
"""
FREEZE = "sig=STOP\n" + _SIGNAL
THAW = "sig=CONT\n" + _SIGNAL
#: seconds the freeze may take
FREEZE_TIMEOUT = 60.0


async def freeze_pages(env: Environment) -> bool:
    """Stop the scripts of every page in the sandbox's browser (its renderers), if
    Helios's browser service runs there. True if it did. Call it after the agent's
    processes are stopped and before the tests run; `EnvironmentExecError` if the
    pages could not be stopped."""
    if not await env.service_running(SERVICE_BROWSER):
        return False
    await _signal(env, FREEZE, "stop")
    return True


async def thaw_pages(env: Environment) -> None:
    """Let the pages stopped by `freeze_pages` run again (the next agent's turn)."""
    if await env.service_running(SERVICE_BROWSER):
        await _signal(env, THAW, "resume")


async def _signal(env: Environment, script: str, what: str) -> None:
    result = await env.exec(script, cwd="/", timeout=FREEZE_TIMEOUT)
    if not result.ok:
        said = " ".join((result.stdout + result.stderr).split())[-200:] or "no answer"
        raise EnvironmentExecError(f"could not {what} the agent's pages: {said}")
