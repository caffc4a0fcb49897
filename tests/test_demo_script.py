"""`make demo` says what it is doing: scripts/demo.sh and scripts/venv.sh print one line per
step (the sandbox, the venv, the install, the run) and let pip's own lines through, where
they used to run `pip -q` in silence for most of a minute.

The scripts run from a copy of the checkout whose `.venv` holds stand-ins for python and
helios (they record how they were called), so no package is downloaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PYTHON_STUB = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls.txt"
case "$1" in
    -V) echo "Python 3.11.9" ;;
    -m) echo "Requirement already satisfied: rich in ./site-packages"
        echo "Collecting aiohttp>=3.11 (from helios-harness==0.1.0)"
        echo "Successfully installed helios-harness-0.1.0"
        exit "${PIP_STATUS:-0}" ;;
esac
exit 0
"""
HELIOS_STUB = """#!/bin/sh
echo "helios called with: $*"
"""


def _checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "checkout"
    (work / "scripts").mkdir(parents=True)
    for name in ("demo.sh", "venv.sh"):
        shutil.copy2(ROOT / "scripts" / name, work / "scripts" / name)
    venv = work / ".venv" / "bin"
    venv.mkdir(parents=True)
    tools = tmp_path / "tools"
    tools.mkdir()
    for path, text in ((venv / "python", PYTHON_STUB), (venv / "helios", HELIOS_STUB),
                       (tools / "bwrap", "#!/bin/sh\nexit 0\n")):  # fmt: skip
        path.write_text(text)
        path.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "PYTHON": sys.executable}
    return work, env


def test_make_demo_says_each_step_and_shows_pips_lines(tmp_path: Path) -> None:
    work, env = _checkout(tmp_path)
    done = subprocess.run([str(work / "scripts" / "demo.sh"), "-n", "4"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    expected = [
        "[demo] 1/3 the local sandbox: bubblewrap is",
        "[demo] 2/3 the venv:",
        "[venv] using .venv (Python 3.11.9)",
        "[venv] installing Helios into .venv",
        "Collecting aiohttp",  # pip's own lines come through, as they come
        "Successfully installed helios-harness",
        "[venv] ready: .venv/bin/helios",
        "[demo] 3/3 running: helios batch examples/tasks --provider local --agent oracle -n 4",
        "helios called with: batch examples/tasks --provider local --agent oracle -n 4",
    ]
    at = [next(i for i, line in enumerate(lines) if line.startswith(e)) for e in expected]
    assert at == sorted(at), done.stdout
    assert "Requirement already satisfied" not in done.stdout  # what is there is not repeated
    pip = next(c for c in (work / ".venv" / "bin" / "calls.txt").read_text().splitlines()
               if c.startswith("-m pip install"))  # fmt: skip
    assert " -q" not in f" {pip}" and pip.endswith("-e .")


def test_a_failed_install_stops_the_demo_with_one_line(tmp_path: Path) -> None:
    work, env = _checkout(tmp_path)
    done = subprocess.run([str(work / "scripts" / "demo.sh")], cwd=work,
                          env={**env, "PIP_STATUS": "1"}, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert "[venv] install failed (pip's output above)" in done.stderr
    assert "helios called" not in done.stdout


def test_venv_dev_installs_the_docs_tools(tmp_path: Path) -> None:
    # CI builds the docs (tests/test_docs.py) with what `venv.sh dev` installs
    work, env = _checkout(tmp_path)
    done = subprocess.run([str(work / "scripts" / "venv.sh"), "dev"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (work / ".venv" / "bin" / "calls.txt").read_text()
    assert "-m pip install --disable-pip-version-check -e .[dev,daytona,ray,docs]" in calls
