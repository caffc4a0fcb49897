#!/bin/sh
# The edit loop (make check): ruff, mypy --strict, and the tests that start no
# engine and are not slow, on every core. It needs no root, docker or bwrap;
# `make test` runs the whole suite. Extra arguments go to pytest.
set -eu
cd "$(dirname "$0")/.."
[ -x .venv/bin/pytest ] || ./scripts/venv.sh dev
echo "[check] ruff"
.venv/bin/ruff check src tests benchmarks
echo "[check] mypy --strict src"
.venv/bin/mypy --strict src
# Helios's modules compiled once, here: where PYTHONDONTWRITEBYTECODE is set (as on CI
# machines), each of the suite's hundreds of helios processes (the CLI's, workers, Ray's)
# would compile them again, about 0.3 s of CPU each. compileall writes them regardless.
.venv/bin/python -m compileall -q src
echo "[check] pytest (not docker, bwrap, desktop, ray or slow)"
exec .venv/bin/pytest -n "${HELIOS_TEST_WORKERS:-auto}" --dist load \
    -m "not docker and not bwrap and not desktop and not ray and not slow" "$@"
