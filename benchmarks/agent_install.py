"""What installing an installed agent costs a batch: the first trial installs it,
the ones after find it in the cache.

A batch of N trials of Claude Code (the real client, from npm) on the local
sandbox (or docker), one at a time, against Helios's scripted Anthropic server on
loopback, on a task without network (the agent reaches the server through the
trial's egress proxy), with an empty agent cache (a temporary folder, unless
--cache names one). Each trial's `agent/install.json` says what its install cost
and how the install reached the sandbox. On docker the first trial also builds
the image derived from the task's with the install in it (its environment phase),
unless an earlier run did (`--fresh-image` removes it first).

    .venv/bin/python benchmarks/agent_install.py [--trials 3] [--cache DIR]
    .venv/bin/python benchmarks/agent_install.py --provider docker --fresh-image

Prints, per trial, the install seconds (0 when cached), the seconds spent putting
the install into the sandbox (0 when bound or in the image), and the environment
and agent phases' seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
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
    parser.add_argument("--provider", default="local", choices=["local", "docker"])
    parser.add_argument("--fresh-image", action="store_true",
                        help="docker: remove the derived agent images first")  # fmt: skip
    args = parser.parse_args()
    if args.fresh_image:
        _remove_agent_images()
    with tempfile.TemporaryDirectory(prefix="helios-agent-install-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)  # the sandbox's users read the install from the cache in it
        os.environ["HELIOS_AGENT_CACHE"] = str(args.cache or work / "cache")
        task = work / "tasks" / "hello-file"
        shutil.copytree(EXAMPLE, task)
        toml = task / "task.toml"
        toml.write_text(toml.read_text().replace("memory_mb = 512", "memory_mb = 1536"))
        with MockLLMServer(script=SCRIPT) as server:
            runner = ParallelRunner(
                [task], n_concurrent=1, n_attempts=args.trials, provider=args.provider,
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
            placing = install["place_seconds"] if install.get("placed") == "uploaded" else 0.0
            timings = result["timings"]
            rows.append((result["finished_at"], install["seconds"], placing,
                         timings["environment"], timings["agent"], result["reward"]))  # fmt: skip
        for n, (_, install_s, upload_s, env_s, agent_s, reward) in enumerate(sorted(rows), 1):
            print(f"trial {n}: install {install_s:6.2f} s   upload {upload_s:5.2f} s   "
                  f"environment phase {env_s:6.2f} s   agent phase {agent_s:6.2f} s   "
                  f"reward {reward}")  # fmt: skip


def _remove_agent_images() -> None:
    from helios.environments.docker.agent_image import LABEL_AGENT_INSTALL

    found = subprocess.run(["docker", "images", "-q", "--filter", f"label={LABEL_AGENT_INSTALL}"],
                           capture_output=True, text=True).stdout.split()  # fmt: skip
    if found:
        subprocess.run(["docker", "rmi", "-f", *sorted(set(found))], capture_output=True)


if __name__ == "__main__":
    main()
