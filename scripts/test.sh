#!/bin/sh
# The whole test suite, from a fresh machine: system dependencies (as root),
# the venv with dev tools, then ruff, mypy --strict and pytest on
# HELIOS_TEST_WORKERS workers (4: much of the time is spent waiting on docker, so
# more workers than the 2 cores pays; tests/conftest.py keeps a module that shares
# fixtures on one worker). Extra arguments go to pytest.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup-system.sh
./scripts/venv.sh dev
# Harbor from PyPI in a venv of its own (Python >= 3.12), cached: the Harbor export
# tests load Helios's export with Harbor's own models
.venv/bin/python tests/harbor_venv.py
# the installed agents' packages (npm), cached: tests/test_installed_agents.py runs them
PYTHONPATH=src .venv/bin/python tests/agent_installs.py
echo "[test] ruff"
.venv/bin/ruff check src tests benchmarks
echo "[test] mypy --strict src"
.venv/bin/mypy --strict src
# Helios's modules compiled once, here: where PYTHONDONTWRITEBYTECODE is set (as on CI
# machines), each of the suite's hundreds of helios processes (the CLI's, workers, Ray's)
# would compile them again, about 0.3 s of CPU each. compileall writes them regardless.
.venv/bin/python -m compileall -q src
echo "[test] pytest"
# the slowest tests are listed at the end, so a suite near its time bound shows why
exec .venv/bin/pytest -n "${HELIOS_TEST_WORKERS:-4}" --dist load --durations=25 "$@"
