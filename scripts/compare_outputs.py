"""Same inputs, same outputs: run a fixed set of runs through two versions of Helios
and compare every file they write, byte for byte apart from timings and ids.

    python scripts/compare_outputs.py --base REV    # REV (a git worktree) against this tree
    python scripts/compare_outputs.py               # this tree against itself (the noise)

The set: a task batch with the oracle and one with the tool agent (local sandbox), a
`helios generate` run and a `helios toolcalls` run, all one unit at a time so that
the order of records is fixed, and the model being the scripted server on
127.0.0.1 (one server for both versions, started from this tree). Both versions
read the same copy of the inputs, run with this venv's interpreter and its
dependencies, each from its own `src/`.

What is normalised before comparing: run ids, timestamps, durations and timings
(by key in JSON, by pattern in text), the batch folder's date, and the output and
input folders' paths. Everything else must match. Exit 0 when every file does,
1 with a unified diff of the first differences otherwise.

A refactor that must not change behaviour (issue 20) runs this before it lands.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from helios.testing.mock_llm import MockLLMServer  # noqa: E402

#: JSON keys whose values are timings, clocks or per-run ids
VARYING_KEY = re.compile(
    r"(^|_)(duration|durations|timings|elapsed|seconds|sec|time|times|at|started|finished|"
    r"created|updated|timestamp|run_id|session_id|pid|model_seconds|latency|latency_ms)$"
)
PATTERNS = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?"), "<time>"),
    (re.compile(r"\d{8}_\d{6}"), "<date>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b\d+(\.\d+)?(s|ms| s| ms|sec)\b"), "<secs>"),
]
SCRIPT = {
    "scenarios": [
        {"match": "*", "turns": [{"text": "looking", "tool_calls": [
            {"name": "bash", "arguments": {"command": "ls -1 | sort"}},
        ]}], "final": {"text": "done"}},
    ]
}  # fmt: skip
GENERATE_SCRIPT = {
    "scenarios": [
        {"match": "*", "turns": [{"reasoning": "Let me look.", "text": "working",
                                  "tool_calls": [{"name": "terminal",
                                                  "arguments": {"command": "echo ok"}}]}],
         "final": {"reasoning": "Done thinking.", "text": "done"}},
    ]
}  # fmt: skip
TOOLCALLS_CONFIG = """\
synthesizer: null
agent:
  name: model
  params:
    model: openai-compatible/scripted
    base_url: {url}
    tools:
      - name: book_flight
        parameters: {{type: object, properties: {{to_city: {{type: string}}}}}}
tests:
  - id: flight
    prompt: Book a flight to LA
    expect: [{{name: book_flight, arguments: {{to_city: LA}}}}]
    runs: 3
  - id: miss
    prompt: Nothing to book
    expect: [{{name: book_flight}}]
"""
TOOLCALLS_SCRIPT = {
    "scenarios": [
        {"match": "flight", "turns": [{"tool_calls": [
            {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]},
        {"match": "*", "turns": [{"text": "nothing to do"}]},
    ]
}  # fmt: skip


def prepare_inputs(root: Path) -> dict[str, Path]:
    tasks = root / "tasks"
    shutil.copytree(REPO / "examples" / "tasks", tasks)
    dataset = root / "prompts.jsonl"
    rows = [{"prompt": f"Task {i}: list the files"} for i in range(4)]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {"tasks": tasks, "dataset": dataset}


def run_side(src: Path, out: Path, inputs: dict[str, Path], urls: dict[str, str]) -> list[str]:
    """Every run of the set through the Helios in `src`; returns the failures."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(src), COLUMNS="120", HELIOS_SEARXNG_URL="")
    helios = [sys.executable, "-m", "helios"]
    (out / "toolcalls.yaml").write_text(TOOLCALLS_CONFIG.format(url=urls["toolcalls"]))
    runs = {
        "tasks-oracle": [*helios, "batch", str(inputs["tasks"]), "--provider", "local",
                         "--agent", "oracle", "-n", "1", "--workers", "1",
                         "-o", str(out / "tasks-oracle"), "-q"],
        "tasks-tool": [*helios, "batch", str(inputs["tasks"]), "--provider", "local",
                       "-m", "openai-compatible/scripted", "--base-url", urls["tasks"],
                       "-n", "1", "--workers", "1", "-o", str(out / "tasks-tool"), "-q"],
        "generate": [*helios, "generate", f"--dataset_file={inputs['dataset']}",
                     "--batch_size=2", "--run_name=generate", "--model=mock",
                     f"--base_url={urls['generate']}", "--num_workers=1",
                     "--distribution=terminal_only", "--seed=7"],
        "toolcalls": [*helios, "toolcalls", "--config", str(out / "toolcalls.yaml"),
                      "--max-concurrency", "1", "-o", str(out / "toolcalls"),
                      "--report", str(out / "toolcalls-report.json"), "-q"],
    }  # fmt: skip
    failures = []
    for name, command in runs.items():
        result = subprocess.run(
            command, cwd=out, env=env, capture_output=True, text=True, timeout=600
        )
        (out / f"{name}.stdout").write_text(result.stdout)
        if result.returncode not in (0, 1):  # 1: a batch or toolcalls run with failures
            failures.append(f"{name}: exit {result.returncode}\n{result.stderr[-2000:]}")
    return failures


def normalise_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "<varies>" if VARYING_KEY.search(k) else normalise_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalise_json(v) for v in value]
    if isinstance(value, str):
        return normalise_text(value)
    return value


def normalise_text(text: str) -> str:
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def normalised_files(out: Path, replace: dict[str, str]) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = normalise_text(str(path.relative_to(out)))
        if path.name.endswith((".lock", ".stdout")):
            continue  # the lock holds a pid; the consoles are for reading, not comparing
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            files[rel] = f"<binary {len(data)} bytes>"
            continue
        for old, new in replace.items():
            text = text.replace(old, new)
        files[rel] = _normalised_content(path, text)
    return files


def _normalised_content(path: Path, text: str) -> str:
    try:
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            return "\n".join(json.dumps(normalise_json(r), sort_keys=True) for r in rows)
        if path.suffix == ".json":
            return json.dumps(normalise_json(json.loads(text)), indent=1, sort_keys=True)
    except json.JSONDecodeError:
        pass
    return normalise_text(text)


def compare(before: dict[str, str], after: dict[str, str], shown: int = 5) -> list[str]:
    report = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            report.append(f"only before: {name}")
        elif name not in before:
            report.append(f"only after: {name}")
        elif before[name] != after[name]:
            diff = difflib.unified_diff(
                before[name].splitlines(), after[name].splitlines(),
                f"before/{name}", f"after/{name}", lineterm="", n=1,
            )  # fmt: skip
            report.append("\n".join(list(diff)[:40]) if len(report) < shown else name)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the git revision to compare with (default: this tree)")
    parser.add_argument("--keep", action="store_true", help="keep the output folders")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helios-compare-"))
    worktree: Path | None = None
    try:
        inputs = prepare_inputs(work / "inputs")
        sources = {"after": REPO / "src"}
        if args.base:
            worktree = work / "base"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q",
                            str(worktree), args.base], check=True)  # fmt: skip
            sources["before"] = worktree / "src"
        else:
            sources["before"] = REPO / "src"
        results: dict[str, dict[str, str]] = {}
        with MockLLMServer(script=SCRIPT) as tasks_server, \
             MockLLMServer(script=GENERATE_SCRIPT) as generate_server, \
             MockLLMServer(script=TOOLCALLS_SCRIPT) as toolcalls_server:  # fmt: skip
            urls = {"tasks": tasks_server.openai_base_url,
                    "generate": generate_server.openai_base_url,
                    "toolcalls": toolcalls_server.openai_base_url}  # fmt: skip
            for side in ("before", "after"):
                out = work / "out"  # one path for both, so paths inside files match
                out.mkdir()
                failures = run_side(sources[side], out, inputs, urls)
                if failures:
                    print(f"{side}: a run failed:\n" + "\n".join(failures), file=sys.stderr)
                    return 2
                results[side] = normalised_files(out, {str(work): "<work>"})
                shutil.move(out, work / f"out-{side}")
        report = compare(results["before"], results["after"])
        total = len(set(results["before"]) | set(results["after"]))
        print(f"{total} files compared, {len(report)} differ "
              f"({args.base or 'this tree'} -> this tree)")  # fmt: skip
        for entry in report:
            print(entry)
        if args.keep:
            print(f"outputs kept in {work}")
        return 1 if report else 0
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(worktree)], check=False)  # fmt: skip
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
