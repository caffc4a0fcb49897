"""What installing an installed agent costs a batch: the first trial installs it,
the ones after find it in the cache.

A batch of N trials of Claude Code (the real client, from npm) on the local
sandbox, one at a time, against Helios's scripted Anthropic server on loopback,
with an empty agent cache (a temporary folder, unless --cache names one). Each
trial's `agent/install.json` says what its install cost.

    .venv/bin/python benchmarks/agent_install.py [--trials 3] [--cache DIR]

Prints, per trial, the install seconds (0 when cached) and the agent phase's seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

from helios import ParallelRunner
from helios.testing.mock_llm import MockLLMServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tasks" / "hello-file"
WRITE = "printf 'Hello, Helios!\\n' > /app/hello.txt"
SCRIPT = {"scenarios": [{"match": "*", "turns": [
    {"tool_calls": [{"name": "Bash", "arguments": {"command": WRITE, "description": "write"}}]},
    {"text": "Done."}]}]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--cache", type=Path, help="the agent cache (default: a new empty one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helios-agent-install-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)  # the sandbox's users read the install from the cache in it
        os.environ["HELIOS_AGENT_CACHE"] = str(args.cache or work / "cache")
        task = work / "tasks" / "hello-file"
        shutil.copytree(EXAMPLE, task)
        toml = task / "task.toml"
        text = toml.read_text().replace("allow_internet = false", "allow_internet = true")
        toml.write_text(text.replace("memory_mb = 512", "memory_mb = 1536"))
        with MockLLMServer(script=SCRIPT) as server:
            runner = ParallelRunner(
                [task], n_concurrent=1, n_attempts=args.trials, provider="local",
                model="anthropic/claude-scripted", agent="claude-code",
                base_url=server.anthropic_base_url, api_key="sk-bench-key-0123456789",
                output_dir=str(work / "out"), show_progress=False,
            )  # fmt: skip
            batch = asyncio.run(runner.run())
        assert batch.output_dir is not None
        print(f"{batch.passed} of {args.trials} trials passed")
        rows = []
        for result_file in sorted(batch.output_dir.rglob("result.json")):
            result = json.loads(result_file.read_text())
            install = json.loads((result_file.parent / "agent" / "install.json").read_text())
            rows.append((result["finished_at"], install["seconds"], result["timings"]["agent"],
                         result["reward"]))  # fmt: skip
        for n, (_, install_s, agent_s, reward) in enumerate(sorted(rows), 1):
            print(f"trial {n}: install {install_s:6.2f} s   agent phase {agent_s:6.2f} s   "
                  f"reward {reward}")  # fmt: skip


if __name__ == "__main__":
    main()
