#!/bin/sh
# The whole test suite, from a fresh machine: system dependencies (as root),
# the venv with dev tools, then ruff, mypy --strict and pytest.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup-system.sh
./scripts/venv.sh dev
echo "[test] ruff"
.venv/bin/ruff check src tests benchmarks
echo "[test] mypy --strict src"
.venv/bin/mypy --strict src
echo "[test] pytest"
exec .venv/bin/pytest "$@"
