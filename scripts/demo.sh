#!/bin/sh
# The main job: install Helios and run the bundled example tasks with the
# oracle agent in the local bubblewrap sandbox (no API key, no Docker).
# Each step is said on a line of its own before it starts.
set -eu
cd "$(dirname "$0")/.."
if command -v bwrap >/dev/null 2>&1; then
    echo "[demo] 1/3 the local sandbox: bubblewrap is $(command -v bwrap)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[demo] 1/3 the local sandbox: installing bubblewrap with apt-get"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap
else
    echo "the local sandbox needs bubblewrap: sudo apt-get install bubblewrap" >&2
    exit 2
fi
echo "[demo] 2/3 the venv: .venv with Helios installed"
./scripts/venv.sh
echo "[demo] 3/3 running: helios batch examples/tasks --provider local --agent oracle $*"
exec .venv/bin/helios batch examples/tasks --provider local --agent oracle "$@"
