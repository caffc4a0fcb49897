"""A SIGTERM ends Helios within seconds, even while its main thread is stuck in one
long C call that holds off every Python-level signal handler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helios.engine.interrupts import RESPONSE_GRACE

AGENT = '''
import pathlib, time
from helios import toolcalls

class Synth:
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)

class Stuck:
    """Blocks the event loop in C: time.sleep retries after each signal handler."""
    async def run(self, audio):
        pathlib.Path("{marker}").write_text("in")
        time.sleep(600)
        return toolcalls.AgentResponse(tool_calls=[])
'''
SLOW_IMPORT = """
import pathlib, time
pathlib.Path("{marker}").write_text("in")
time.sleep(600)
"""
CONFIG = """
synthesizer: {name: "stuck_agent:Synth"}
agent: stuck_agent:Stuck
runs: 1
tests:
  - id: one
    prompt: "book now"
    expect: [{name: book}]
"""


def _env(tmp_path: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _helios_toolcalls(tmp_path: Path, module: str, code: str) -> subprocess.Popen[bytes]:
    """`helios toolcalls` on CONFIG with its agent from `module` (`code`), started once
    `code` has written the marker."""
    (tmp_path / f"{module}.py").write_text(code.replace("{marker}", str(tmp_path / "marker")))
    (tmp_path / "c.yaml").write_text(textwrap.dedent(CONFIG).replace("stuck_agent", module))
    proc = subprocess.Popen(
        [sys.executable, "-m", "helios", "toolcalls", "--config", str(tmp_path / "c.yaml")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path),
    )  # fmt: skip
    _wait_for(tmp_path / "marker", proc, 60)
    return proc


def test_sigterm_ends_a_run_whose_loop_is_blocked_in_c(tmp_path: Path) -> None:
    proc = _helios_toolcalls(tmp_path, "stuck_agent", AGENT)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=RESPONSE_GRACE + 15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("Helios was still running 20 s after SIGTERM") from None
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert b"no response to SIGTERM" in err
    assert b"Traceback" not in err
    assert took >= RESPONSE_GRACE - 0.5  # the loop got its chance to take the signal


def test_a_second_signal_ends_a_blocked_run_at_once(tmp_path: Path) -> None:
    proc = _helios_toolcalls(tmp_path, "stuck_agent", AGENT)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)  # two different signals: never merged into one
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=RESPONSE_GRACE + 15)
    assert proc.returncode == 130, err
    assert b"second interrupt" in err
    assert time.monotonic() - sent < RESPONSE_GRACE


def test_sigterm_outside_a_run_exits_at_once(tmp_path: Path) -> None:
    """While inputs are read (here: a module import stuck in C), there is nothing in
    flight: exit 130 with one line."""
    proc = _helios_toolcalls(tmp_path, "slow_import", SLOW_IMPORT)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130, err
    assert err.decode().strip() == "interrupted (SIGTERM): exiting"
    assert time.monotonic() - sent < RESPONSE_GRACE


SLEEPING_AGENT = """
import asyncio, pathlib
from helios import toolcalls

class Synth:
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)

class Stuck:
    async def run(self, audio):
        pathlib.Path("{marker}").write_text("in")
        await asyncio.sleep(600)
        return toolcalls.AgentResponse(tool_calls=[])
"""


def test_timeout_s_int_is_one_interrupt(tmp_path: Path) -> None:
    """`timeout -s INT` sends SIGINT to Helios and then to its process group: two
    signals microseconds apart, for one request to stop. Helios stops as after one
    Ctrl-C (its summary line, exit 130), not as after a second one."""
    (tmp_path / "sleeping_agent.py").write_text(
        SLEEPING_AGENT.replace("{marker}", str(tmp_path / "marker"))
    )
    (tmp_path / "c.yaml").write_text(textwrap.dedent(CONFIG).replace("stuck_agent",
                                                                     "sleeping_agent"))  # fmt: skip
    helios = [sys.executable, "-m", "helios", "toolcalls", "--config", str(tmp_path / "c.yaml")]
    # SIGALRM is what `timeout` gets when its time is up: it then signals the child and
    # its group (coreutils' own code path, without waiting for a fixed duration)
    proc = subprocess.Popen(["timeout", "--preserve-status", "-s", "INT", "1000", *helios],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(tmp_path))  # fmt: skip
    _wait_for(tmp_path / "marker", proc, 60)
    proc.send_signal(signal.SIGALRM)
    out, err = proc.communicate(timeout=RESPONSE_GRACE + 40)
    assert b"second interrupt" not in err, err
    assert proc.returncode == 130, (out, err)
    assert b"interrupted" in out + err
