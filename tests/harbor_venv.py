"""A venv with Harbor from PyPI, for the tests that load Helios's Harbor export with
Harbor's own models (tests/test_harbor_export.py).

Harbor needs Python >= 3.12, which need not be the Python that runs Helios's tests: any
found on the PATH, under pyenv, or named by HELIOS_HARBOR_PYTHON is used. The venv is
built once and kept under the user's cache folder (XDG_CACHE_HOME, else ~/.cache),
keyed by the Harbor release; a lock file makes a second process (an xdist worker, a
second test run) wait for the first one's build instead of building beside it, and a
marker file written last tells a finished venv from one whose build was cut.

`python tests/harbor_venv.py` builds it ahead of the tests (scripts/test.sh does).
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: the Harbor release the export is checked against (helios.results.harbor_export)
HARBOR_VERSION = "0.25"
HARBOR_SPEC = f"harbor=={HARBOR_VERSION}.*"
MIN_PYTHON = (3, 12)
#: written last: the venv is whole
COMPLETE = ".complete"


def _is_recent(python: str) -> bool:
    try:
        result = subprocess.run(
            [python, "-c", f"import sys; sys.exit(sys.version_info < {MIN_PYTHON!r})"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def find_python() -> str | None:
    """A Python >= 3.12 on this machine, or None."""
    candidates: list[str] = []
    if os.environ.get("HELIOS_HARBOR_PYTHON"):
        candidates.append(os.environ["HELIOS_HARBOR_PYTHON"])
    if sys.version_info >= MIN_PYTHON:
        candidates.append(sys.executable)
    for name in ("python3.13", "python3.12", "python3.14"):
        found = shutil.which(name)
        if found:
            candidates.append(found)
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"]
    for root in filter(None, roots):
        candidates += sorted(glob.glob(f"{root}/versions/3.1[2-9]*/bin/python3"), reverse=True)
    for python in dict.fromkeys(candidates):
        if _is_recent(python):
            return python
    return None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "helios-tests"


def harbor_python(python: str, root: Path | None = None) -> Path:
    """The Python of the cached Harbor venv, built with `python` if it is not there
    (RuntimeError, with pip's last lines, when the build fails)."""
    root = cache_root() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"harbor-{HARBOR_VERSION}"
    with (root / f"harbor-{HARBOR_VERSION}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / COMPLETE).is_file():
            return venv / "bin" / "python"
        shutil.rmtree(venv, ignore_errors=True)  # a build that was cut
        steps = (
            [python, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", HARBOR_SPEC],
            [str(venv / "bin" / "python"), "-c", "import harbor.models.job.result"],
        )
        for step in steps:
            try:
                result = subprocess.run(step, capture_output=True, text=True, timeout=1200)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise RuntimeError(f"{' '.join(step)} failed: {exc}") from None
            if result.returncode != 0:
                tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
                raise RuntimeError(f"{' '.join(step)} failed:\n{tail}")
        (venv / COMPLETE).write_text(HARBOR_SPEC + "\n")
        return venv / "bin" / "python"


def harbor_or_skip() -> Path:
    """For a test fixture: the Harbor venv's Python; the test skips only when this
    machine has no Python >= 3.12 (a failed build fails it)."""
    import pytest

    python = find_python()
    if python is None:
        pytest.skip("no Python >= 3.12 here for Harbor")
    return harbor_python(python)


if __name__ == "__main__":
    found = find_python()
    if found is None:
        print("[harbor-venv] no Python >= 3.12 here: the Harbor export tests will skip")
        sys.exit(0)
    print(f"[harbor-venv] {harbor_python(found)}")
