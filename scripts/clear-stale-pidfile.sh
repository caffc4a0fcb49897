#!/bin/sh
# clear-stale-pidfile.sh PIDFILE NAME
# A daemon killed without its own cleanup (kill -9, or a machine stopped under
# it) leaves its pid file behind, and a new dockerd then refuses to start
# ("pid file found, ensure docker is not running"). Remove PIDFILE only when no
# live process called NAME owns it.
set -eu
pidfile="$1"
name="$2"
[ -f "$pidfile" ] || exit 0
pid="$(cat "$pidfile" 2>/dev/null || true)"
if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = "$name" ]; then
    exit 0
fi
printf '[setup] removing stale %s (pid %s is not a running %s)\n' "$pidfile" "${pid:-?}" "$name"
rm -f "$pidfile"
