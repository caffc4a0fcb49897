.PHONY: demo test check lint clean

# Install and run the example tasks with the oracle in the local sandbox.
demo:
	./scripts/demo.sh

# Install what the tests need (docker.io, bubblewrap, a base image when root) and run them all.
test:
	./scripts/test.sh

# The edit loop: ruff, mypy, and the tests that start no engine and are not slow.
check:
	./scripts/check.sh

lint:
	.venv/bin/ruff check src tests benchmarks && .venv/bin/mypy --strict src

clean:
	rm -rf output .pytest_cache .mypy_cache .ruff_cache
