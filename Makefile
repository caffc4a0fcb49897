.PHONY: demo test check lint docs clean

# Install and run the example tasks with the oracle in the local sandbox.
demo:
	./scripts/demo.sh

# Install what the tests need (docker.io, bubblewrap, a base image when root) and run them all.
test:
	./scripts/test.sh

# The edit loop: ruff, mypy, and the tests that start no engine and are not slow.
check:
	./scripts/check.sh

# Serve the docs site on http://127.0.0.1:8000 as you edit it (installs the docs extra first if needed).
docs:
	[ -x .venv/bin/mkdocs ] || ./scripts/venv.sh docs
	.venv/bin/mkdocs serve

lint:
	.venv/bin/ruff check src tests benchmarks && .venv/bin/mypy --strict src

clean:
	rm -rf output site .pytest_cache .mypy_cache .ruff_cache
