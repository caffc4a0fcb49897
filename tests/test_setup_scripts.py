"""The test command's setup (`scripts/`): a dockerd killed without its cleanup left
its pid file, and the next dockerd refused to start (a CI run failed so)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "clear-stale-pidfile.sh"


def _clear(pidfile: Path, name: str) -> str:
    done = subprocess.run([str(SCRIPT), str(pidfile), name], capture_output=True, text=True,
                          check=True, timeout=30)  # fmt: skip
    return done.stdout


def test_a_pid_file_of_a_dead_or_other_process_goes_and_a_live_owner_s_stays(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "docker.pid"
    dead = subprocess.Popen(["true"])
    dead.wait()
    pidfile.write_text(f"{dead.pid}\n")
    assert "removing stale" in _clear(pidfile, "dockerd") and not pidfile.exists()
    # a live process, but not the daemon (its pid reused)
    pidfile.write_text(str(os.getpid()))
    _clear(pidfile, "dockerd")
    assert not pidfile.exists()
    # its live owner: kept
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print(); time.sleep(30)"],
                               stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert sleeper.stdout is not None
        sleeper.stdout.readline()  # it runs the program now: its name is the program's
        name = Path(f"/proc/{sleeper.pid}/comm").read_text().strip()
        pidfile.write_text(str(sleeper.pid))
        assert _clear(pidfile, name) == "" and pidfile.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    # empty, or no file at all: nothing to keep, no error
    pidfile.write_text("")
    _clear(pidfile, "dockerd")
    assert not pidfile.exists()
    assert _clear(pidfile, "dockerd") == ""
