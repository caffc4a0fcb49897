#!/bin/sh
# Creates .venv (Python >= 3.11) and installs Helios into it: `venv.sh` for the
# package, `venv.sh dev` for the package plus test and lint tools (and the
# daytona and ray extras, which the tests run).
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "Helios needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2
    exit 2
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
extra=""
# dev: the test tools, the daytona extra (its SDK runs against a loopback fake) and
# Ray, so that the multi-node tests of --executor ray run
[ "${1:-}" = "dev" ] && extra="[dev,daytona,ray]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extra" 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/python -c 'import helios' || { echo "install failed" >&2; exit 1; }
