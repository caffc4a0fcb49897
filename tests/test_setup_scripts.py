"""The test command's setup (`scripts/`): a dockerd killed without its cleanup left
its pid file, and the next dockerd refused to start (a CI run failed so)."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
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


PLUGINS = SCRIPT.with_name("install-docker-plugins.sh")


def _install(dest: Path, mirror: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLUGINS), str(dest)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DEBIAN_MIRROR": mirror})  # fmt: skip


def test_a_plugin_deb_whose_sha256_differs_from_the_pin_is_not_installed(tmp_path: Path) -> None:
    """Debian's docker-compose and docker-buildx .debs are pinned: a mirror that
    serves other bytes installs nothing, and says why."""

    class Junk(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"not a deb")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Junk)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = _install(tmp_path / "plugins", f"http://127.0.0.1:{server.server_port}/debian")
    finally:
        server.shutdown()
    assert done.returncode != 0, done
    assert "sha256 mismatch for docker-compose 2.26.1-4" in done.stdout, done.stdout
    assert "/pool/main/d/docker-compose/docker-compose_2.26.1-4_amd64.deb" in done.stdout
    assert not (tmp_path / "plugins" / "docker-compose").exists()


def test_plugins_that_answer_are_left_alone(tmp_path: Path) -> None:
    dest = tmp_path / "plugins"
    dest.mkdir()
    for name in ("compose", "buildx"):
        plugin = dest / f"docker-{name}"
        plugin.write_text('#!/bin/sh\necho \'{"SchemaVersion":"0.1.0"}\'\n')
        plugin.chmod(0o755)
    done = _install(dest, "http://127.0.0.1:9/nothing-listens-here")
    assert done.returncode == 0, done
    assert "fetching" not in done.stdout
