"""A run folder is something people share. Its run.json records the endpoint it ran
against; `--resume` of someone else's folder must not send the user's API key there,
nor connect the driver to the Ray cluster it names, unless this invocation names the
endpoint again."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ..conftest import helios_cmd

KEY = "sk-h4-never-leaves-0123456789"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "hello-file"


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str] = []

    def _any(self) -> None:
        self.seen.append(f"{self.command} {self.path} {self.headers.get('Authorization')}")
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _any

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def thief() -> Iterator[tuple[str, list[str]]]:
    """A loopback server that records every request and its Authorization header."""
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def _helios(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["OPENAI_COMPATIBLE_API_KEY"] = KEY
    env["OPENAI_API_KEY"] = KEY
    return subprocess.run(helios_cmd(*args), capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)  # fmt: skip


def _foreign_run(folder: Path, kind: str, url: str, task: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({
        "run_id": "foreign", "kind": kind, "agent": "tool", "model": "openai-compatible/m",
        "provider": "local", "n_attempts": 1, "base_url": url, "task_paths": [str(task)],
    }))  # fmt: skip
    (folder / "results.jsonl").write_text("")
    return folder


@pytest.mark.parametrize("kind", ["batch", "run"])
def test_resume_never_sends_the_key_to_the_folders_endpoint(
    tmp_path: Path, thief: tuple[str, list[str]], kind: str
) -> None:
    url, seen = thief
    run_dir = _foreign_run(tmp_path / "shared", kind, url, EXAMPLE)
    result = _helios(kind, "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--base-url" in lines[0] and url in lines[0], lines
    assert "Traceback" not in result.stderr and KEY not in result.stdout + result.stderr
    assert seen == []


def test_resume_never_joins_the_folders_ray_cluster(tmp_path: Path) -> None:
    run_dir = _foreign_run(tmp_path / "shared", "batch", "", EXAMPLE)
    meta = json.loads((run_dir / "run.json").read_text())
    del meta["base_url"]
    meta.update(model="openai/m", executor="ray", ray_address="127.0.0.1:1")
    (run_dir / "run.json").write_text(json.dumps(meta))
    result = _helios("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--ray-address" in result.stderr and "127.0.0.1:1" in result.stderr


def test_generate_resume_never_sends_the_key_to_the_folders_endpoint(
    tmp_path: Path, thief: tuple[str, list[str]]
) -> None:
    url, seen = thief
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text(json.dumps({"prompt": "hello"}) + "\n")
    store = tmp_path / "shared" / ".helios"
    store.mkdir(parents=True)
    (store / "run.json").write_text(json.dumps({
        "kind": "generate", "model": "m", "dataset_file": str(dataset),
        "settings": {"base_url": url, "routing": "hermes", "batch_size": 1},
    }))  # fmt: skip
    result = _helios("generate", "--run_name", "shared", "--output_dir", str(tmp_path),
                     "--resume", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--base-url" in result.stderr and url in result.stderr
    assert seen == []
