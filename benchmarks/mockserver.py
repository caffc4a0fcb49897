"""The benchmarks' model server: Helios's scripted server in its own process
(`python -m helios.testing.mock_llm`), so its CPU is never the harness's.

Each workload gets a fresh server with its own script: `turns - 1` calls of one
tool, then `submit` (or a final text, for workloads whose agent ends on text).
It speaks OpenAI Chat Completions and Anthropic Messages, streamed when the
client asks; latency and jitter are the server's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def tool_script(turns: int, tool: str, arguments: dict[str, Any], *, end: str = "submit",
                text: str = "working", submit: dict[str, Any] | None = None
                ) -> dict[str, Any]:  # fmt: skip
    """`turns - 1` calls of `tool`, then `submit` (end="submit") or a final text."""
    call = {"name": tool, "arguments": arguments}
    steps: list[dict[str, Any]] = [{"text": text, "tool_calls": [call]} for _ in range(turns - 1)]
    if end == "submit":
        steps.append({"tool_calls": [{"name": "submit", "arguments": submit or {}}]})
        return {"scenarios": [{"match": "", "turns": steps}]}
    return {"scenarios": [{"match": "", "turns": steps, "final": {"text": "done"}}]}


@dataclass
class MockServer:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.base_url}/v1"

    def served(self) -> int:
        """Model replies served so far (the real number of model turns)."""
        with urllib.request.urlopen(f"{self.base_url}/_stats", timeout=30) as response:
            return int(json.loads(response.read())["served_ok"])

    def cpu_seconds(self) -> float:
        """The server process's CPU so far (user + system), from /proc."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(workdir: Path, script: dict[str, Any], latency_ms: float, jitter_ms: float = 0.0
          ) -> MockServer:  # fmt: skip
    workdir.mkdir(parents=True, exist_ok=True)
    script_file = workdir / "script.json"
    script_file.write_text(json.dumps(script))
    port_file = workdir / "port"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "helios.testing.mock_llm", "--port", "0",
         "--script", str(script_file), "--latency-ms", str(latency_ms),
         "--jitter-ms", str(jitter_ms), "--port-file", str(port_file),
         "--no-strict-history"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the mock model server did not start")
        time.sleep(0.02)
    return MockServer(proc, int(port_file.read_text().strip()))
