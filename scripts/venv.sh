#!/bin/sh
# Creates .venv (Python >= 3.11) and installs Helios into it: `venv.sh` for the
# package, `venv.sh docs` for it and the docs tools, `venv.sh dev` for the package plus test and lint tools (and the
# daytona and ray extras, which the tests run, and the docs tools, which build the
# docs site in the tests). It says each step on a line of its own, and pip's own
# lines (what it downloads and installs) show as they come.
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "Helios needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2
    exit 2
fi
if [ -x .venv/bin/python ]; then
    echo "[venv] using .venv ($(.venv/bin/python -V 2>&1))"
else
    echo "[venv] creating .venv with $PYTHON ($("$PYTHON" -V 2>&1))"
    "$PYTHON" -m venv .venv
fi
extra=""
# dev: the test tools, the daytona extra (its SDK runs against a loopback fake),
# Ray, so that the multi-node tests of --executor ray run, and the docs tools
# docs: only the docs tools (`make docs`)
case "${1:-}" in
    dev) extra="[dev,daytona,ray,docs]" ;;
    docs) extra="[docs]" ;;
esac
echo "[venv] installing Helios$extra into .venv (pip install -e .$extra; the first time takes a minute or two)"
# pip's lines stream through; only the ones that repeat what is already there are left out
status=$(mktemp)
trap 'rm -f "$status"' EXIT
{ PYTHONUNBUFFERED=1 .venv/bin/python -m pip install --disable-pip-version-check -e ".$extra" 2>&1; echo $? >"$status"; } \
    | grep --line-buffered -v -e "^Requirement already satisfied" -e "^WARNING: Location" || true
if [ "$(cat "$status")" != 0 ] || ! .venv/bin/python -c 'import helios' 2>/dev/null; then
    echo "[venv] install failed (pip's output above)" >&2
    exit 1
fi
echo "[venv] ready: .venv/bin/helios"
