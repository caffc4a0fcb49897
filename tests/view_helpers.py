"""Run folders for the `helios view` tests, written by hand (hostile and damaged
cases, big runs), a PNG screenshot, and the viewer started as a user starts it."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def record(index: int, **fields: Any) -> dict[str, Any]:
    """A results.jsonl record as a batch writes it (fields override)."""
    name = fields.pop("task_name", f"task-{index:03d}")
    base: dict[str, Any] = {
        "trial_id": f"id{index:06d}", "task_name": name, "task_path": f"/tasks/{name}",
        "attempt": 1, "agent": "tool", "model": "mock/m-1", "provider": "openai",
        "status": "passed", "reward": 1.0, "rewards": {"reward": 1.0}, "error": None,
        "turns": 2, "duration": 1.0 + index, "timings": {},
        "usage": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001},
        "started_at": "2026-11-26T04:00:00+00:00", "finished_at": "2026-11-26T04:00:01+00:00",
        "folder": f"{index + 1:03d}_{name}", "verifier_note": "ok",
    }  # fmt: skip
    base.update(fields)
    return base


def write_run(folder: Path, records: list[dict[str, Any]], *, summary: bool = True,
              kind: str = "batch", model: str = "mock/m-1") -> Path:  # fmt: skip
    """A batch run folder: run.json, results.jsonl, batch_summary.json (when
    `summary`) and, per record, a trial folder with result.json and config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"run_id": "r" + folder.name, "created_at": "2026-11-26T04:00:00+00:00", "kind": kind,
            "agent": "tool", "model": model, "provider": "openai", "n_attempts": 1}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(meta))
    with (folder / "results.jsonl").open("w") as handle:
        for item in records:
            handle.write(json.dumps(item) + "\n")
    for item in records:
        trial = folder / item["folder"]
        (trial / "verifier").mkdir(parents=True, exist_ok=True)
        (trial / "result.json").write_text(json.dumps(item))
        (trial / "config.json").write_text(json.dumps({"task": item["task_name"]}))
        (trial / "verifier" / "test-stdout.txt").write_text(f"verifier of {item['task_name']}\n")
        (trial / "verifier" / "test-stderr.txt").write_text("")
    if summary:
        passed = sum(1 for r in records if r["status"] == "passed")
        document = {"total_tasks": len(records), "passed": passed, "interrupted": False,
                    "pass_rate": passed / len(records) if records else 0.0,
                    "mean_reward_ci95": [0.5, 1.0], "duration_seconds": 12.5,
                    "pass_at_k": {"pass@1": 0.5},
                    "tasks": [{"name": "x"}] * len(records)}  # fmt: skip
        (folder / "batch_summary.json").write_text(json.dumps(document))
    return folder


def png(width: int, height: int, rgb: tuple[int, int, int] = (40, 90, 200)) -> bytes:
    """A plain PNG of one colour."""
    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def trajectory(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema_version": "ATIF-v1.6", "session_id": "s",
            "agent": {"name": "helios-computer", "version": "1", "model_name": "mock/m-1"},
            "steps": steps}  # fmt: skip


def gui_trajectory() -> dict[str, Any]:
    """A computer agent's steps: a screenshot, a click at (120, 80), the next screen,
    a drag along a path."""
    shot = {"type": "image", "source": {"media_type": "image/png", "path": "images/a.png"}}
    shot2 = {"type": "image", "source": {"media_type": "image/png", "path": "images/b.png"}}
    return trajectory([
        {"step_id": 1, "source": "user", "message": [{"type": "text", "text": "Click OK"}, shot]},
        {"step_id": 2, "source": "agent", "message": "I click OK.",
         "reasoning_content": "OK is blue",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "computer",
                         "arguments": {"action": "click", "x": 120, "y": 80}}],
         "observation": {"results": [{"source_call_id": "c1", "content": [shot2]}]},
         "metrics": {"prompt_tokens": 1500, "completion_tokens": 20}},
        {"step_id": 3, "source": "agent", "message": "Now drag.",
         "tool_calls": [{"tool_call_id": "c2", "function_name": "computer",
                         "arguments": {"action": "drag", "path": [[10, 10], [200, 150]]}}],
         "observation": {"results": [{"source_call_id": "c2", "content": "dragged"}]}},
    ])  # fmt: skip


def add_gui_trial(run: Path, item: dict[str, Any]) -> Path:
    """Give the record's trial folder a computer agent's trajectory and screenshots."""
    agent = run / item["folder"] / "agent"
    (agent / "images").mkdir(parents=True, exist_ok=True)
    (agent / "images" / "a.png").write_bytes(png(320, 200))
    (agent / "images" / "b.png").write_bytes(png(320, 200, (220, 220, 220)))
    (agent / "trajectory.json").write_text(json.dumps(gui_trajectory()))
    return agent


def view_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "helios", "view", *args]


@contextlib.contextmanager
def view_server(*args: str, within: float = 60.0, cwd: Path | None = None) -> Iterator[str]:
    """`helios view ARGS` as a user runs it; yields the URL of its first line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile("w+") as errors:  # not a pipe nobody reads (it could fill)
        proc = subprocess.Popen(view_cmd(*args), stdout=subprocess.PIPE, stderr=errors,
                                text=True, env=env, cwd=cwd)  # fmt: skip
        yield from _first_line(proc, errors, within)


@contextlib.contextmanager
def view_in_process(folder: Path, host: str = "127.0.0.1") -> Iterator[str]:
    """`helios view FOLDER [--host HOST]`'s server (`helios.view.server.serve`, as the
    CLI calls it) on a thread of this process; yields its URL. For the browser tests,
    which check the pages, not the CLI (tests/test_view_api.py starts that): a
    subprocess's interpreter and imports are about 1.2 s of CPU per test. An error
    the server logged (a handler's traceback) fails the test, as in `view_server`."""
    import asyncio
    import io
    import logging

    from helios.view.server import serve

    errors: list[logging.LogRecord] = []

    class _Errors(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR or record.exc_info:
                errors.append(record)

    class _FirstLine(io.StringIO):
        def write(self, text: str) -> int:
            if not first and text.strip():
                first.append(text.strip())
                ready.set()
            return len(text)

    first: list[str] = []
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    task: list[asyncio.Task[None]] = []

    def main() -> None:
        task.append(loop.create_task(serve([folder], host=host, out=_FirstLine())))
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task[0])
        ready.set()

    handler = _Errors()
    logging.getLogger().addHandler(handler)
    thread = threading.Thread(target=main, name="helios-view-test", daemon=True)
    thread.start()
    try:
        ready.wait(60)
        assert first and first[0].startswith("http://"), (
            f"the view server gave no URL: {task[0].exception() if task and task[0].done() else ''}"
        )
        yield first[0]
    finally:
        if task:
            loop.call_soon_threadsafe(task[0].cancel)
        thread.join(30)
        loop.close()
        logging.getLogger().removeHandler(handler)
    assert not errors, [record.getMessage() for record in errors]


def _first_line(proc: subprocess.Popen[str], errors: IO[str], within: float) -> Iterator[str]:
    assert proc.stdout is not None
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(within)
    try:
        assert first and first[0].startswith("http://"), (
            f"helios view printed no URL within {within:g}s: {first} {proc.poll()}"
        )
        yield first[0].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        errors.seek(0)
        logged = errors.read()
        assert "Traceback" not in logged, logged


def write_generate_run(folder: Path, *, hostile: str = "") -> Path:
    """A `helios generate` run folder: Hermes rows in batch_0.jsonl, the engine's
    records in .helios/ (one ok, one discarded, one failed)."""
    store = folder / ".helios"
    store.mkdir(parents=True)
    meta = {"run_id": "g", "created_at": "2026-11-26T04:00:00+00:00", "kind": "generate",
            "model": "mock/m-1", "agent": None}  # fmt: skip
    (store / "run.json").write_text(json.dumps(meta))
    row = {"prompt_index": 0, "conversations": [
        {"from": "system", "value": "You have tools."},
        {"from": "human", "value": "List the files " + hostile},
        {"from": "gpt", "value": "<think>look</think><tool_call>{\"name\": \"terminal\"}"
                                 "</tool_call>"},
        {"from": "tool", "value": "a.txt " + hostile},
        {"from": "gpt", "value": "One file: a.txt"},
    ], "tool_stats": {"terminal": {"count": 1, "success": 1, "failure": 0}}}  # fmt: skip
    data = (json.dumps(row) + "\n").encode()
    (folder / "batch_0.jsonl").write_bytes(data)
    common = {"toolsets": ["terminal"], "api_calls": 2, "tokens_in": 300, "tokens_out": 40,
              "cost_usd": 0.002, "duration": 3.5, "batch_num": 0}  # fmt: skip
    records = [
        {"trial_id": "p0", "status": "ok", "prompt_key": "k0", "prompt_index": 0, **common,
         "tool_stats": row["tool_stats"], "file": "batch_0.jsonl", "offset": 0,
         "length": len(data)},
        {"trial_id": "p1", "status": "discarded", "prompt_key": "k1", "prompt_index": 1,
         **common, "reason": "no_reasoning"},
        {"trial_id": "p2", "status": "error", "prompt_key": "k2", "prompt_index": 2, **common,
         "error": {"type": "RateLimitError", "message": "429 " + hostile}},
    ]  # fmt: skip
    (store / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def write_toolcalls_run(folder: Path, *, hostile: str = "") -> Path:
    """A toolcalls report folder: one run that matched, one with a wrong argument."""
    folder.mkdir(parents=True)
    meta = {"run_id": "t", "created_at": "2026-11-26T04:00:00+00:00", "kind": "toolcalls",
            "model": "mock/m-1"}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(meta))
    weather = {"name": "get_weather", "arguments": {"city": "Paris"}}
    wrong = {"name": "get_weather", "arguments": {"city": "Lyon " + hostile}}

    def run(index: int, actual: dict[str, Any], matched: bool) -> dict[str, Any]:
        return {"trial_id": f"t{index}", "status": "passed" if matched else "failed",
                "test_id": "weather", "prompt": "Weather in Paris? " + hostile,
                "run_index": index, "duration": 0.5, "retries": 0, "usage": None,
                "passed": matched, "match_rate": 1.0 if matched else 0.0,
                "eval_result": {"passed": matched, "expected": [weather], "actual": [actual],
                                "matches": [{"expected": weather, "actual": actual,
                                             "matched": matched,
                                             "details": "" if matched else "city differs"}],
                                "error": None}}  # fmt: skip

    records = [run(0, weather, True), run(1, wrong, False)]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "toolcalls_summary.json").write_text(json.dumps({"total": 2, "passed": 1}))
    return folder
