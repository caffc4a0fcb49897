"""The README's five-minute tour, run command by command as a newcomer types it, after
`make demo` (whose batch is run first): the scripted model server in the background, a
batch and a run of the example tasks, `helios generate` and `helios export` of the
example prompts, the tool-call example, `helios compare` and `helios view`, then the
real-model example with the scripted server standing in for Anthropic's API.

Each command's exit code must be 0, and what the README says lands where it says."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from .view_helpers import _first_line

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TOUR = "## A five-minute tour, without a key"
PORT = "8765"


def tour_commands() -> list[str]:
    """The tour's shell commands, in order, without their comments."""
    text = README.read_text("utf-8")
    start = text.index(TOUR)
    section = text[start : text.index("\n## ", start + len(TOUR))]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, flags=re.M | re.S)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for b in blocks for line in b.splitlines()]
    return [line for line in lines if line]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
    ends = time.monotonic() + within
    while time.monotonic() < ends:
        assert proc.poll() is None, "the scripted server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the scripted server never listened on {port}")


def _serve(command: str, work: Path, env: dict[str, str], port: str) -> subprocess.Popen[bytes]:
    """The tour's background server, started as the shell would, once it listens."""
    server = subprocess.Popen(["bash", "-c", "exec " + command], cwd=work, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _wait_for_port(int(port), server)
    return server


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A checkout as the tour needs it, and the environment `source .venv/bin/activate` gives:
    `helios` and `python` are this interpreter (with this tree's sources)."""
    work = tmp_path / "helios"
    work.mkdir()
    for name in ("examples", "tests"):
        (work / name).symlink_to(ROOT / name)
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = shlex.quote(sys.executable)
    (bin_dir / "helios").write_text(f'#!/bin/sh\nexec {python} -m helios "$@"\n')
    # a script, not a link: a link to the venv's python would lose the venv
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    for name in ("helios", "python"):
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "PYTHONUNBUFFERED": "1",
        "BROWSER": "true",  # `helios view --open` opens nothing here
        "COLUMNS": "120",
    }
    for key in [k for k in env if k.endswith("_API_KEY") or k.endswith("_BASE_URL")]:
        del env[key]
    return work, env


def test_the_tour_is_what_the_test_runs() -> None:
    commands = tour_commands()
    assert commands[0] == "source .venv/bin/activate"
    assert commands[1].endswith(" &") and "helios.testing.mock_llm" in commands[1]
    assert "kill %1" in commands
    doors = {"helios batch", "helios run", "helios generate", "helios export",
             "examples/toolcalls/text_mode.py", "helios compare", "helios view"}  # fmt: skip
    assert all(any(door in c for c in commands) for door in doors)


@pytest.mark.bwrap
@pytest.mark.slow
def test_the_readme_tour_runs(need_bwrap: None, tmp_path: Path) -> None:
    work, env = _workspace(tmp_path)
    port = str(_free_port())
    # `make demo` first: the oracle's batch, which the tour's compare pairs with its own
    demo = subprocess.run(
        [sys.executable, "-m", "helios", "batch", "examples/tasks", "--provider", "local",
         "--agent", "oracle", "-q"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout + demo.stderr
    server: subprocess.Popen[bytes] | None = None
    server_command = ""
    try:
        for command in tour_commands():
            command = command.replace(PORT, port)
            if command == "source .venv/bin/activate":
                continue  # the environment above
            if command.startswith("export "):
                name, _, value = command[len("export ") :].partition("=")
                env[name] = value
                if name == "ANTHROPIC_API_KEY":  # the real model, played by the scripted server
                    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
                    server = server or _serve(server_command, work, env, port)
                continue
            if command.endswith(" &"):
                server_command = command[:-2]
                server = _serve(server_command, work, env, port)
                continue
            if command == "kill %1":
                assert server is not None
                server.terminate()
                assert server.wait(timeout=15) is not None
                server = None
                continue
            if command.startswith("helios view"):
                proc = subprocess.Popen(["bash", "-c", "exec " + command], cwd=work, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)  # fmt: skip
                with tempfile.TemporaryFile("w+") as errors:
                    for url in _first_line(proc, errors, 60.0):
                        api = url.split("?")[0] + "api/runs"
                        with urllib.request.urlopen(api, timeout=30) as response:
                            runs = json.loads(response.read())
                        assert len(runs["runs"]) >= 3, runs  # the batches and the generate run
                continue
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    finally:
        if server is not None:
            server.kill()
            server.wait()
    # what the tour says lands where it says
    batches = sorted((work / "output").glob("*_*/batch_summary.json"))
    assert len(batches) == 4  # make demo's, the tour's batch and run, the real-model example's
    assert len(list((work / "output").glob("run_*/001_hello-file/result.json"))) == 1
    summaries = [json.loads(path.read_text()) for path in batches]
    # every trial passed: the scripted model solves every example task, as the oracle does
    assert [(s["failed"], s["errored"]) for s in summaries] == [(0, 0)] * len(summaries)
    assert all(s["passed"] > 0 for s in summaries)
    rows = (work / "data" / "tour" / "trajectories.jsonl").read_text().splitlines()
    assert len(rows) == 3
    assert len((work / "data" / "tour" / "export" / "openai.jsonl").read_text().splitlines()) == 3
