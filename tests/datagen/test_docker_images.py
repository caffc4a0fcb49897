"""Per-prompt images and working directories with --provider docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import SCRIPT, THINK, hermes_args, read_jsonl, run_generate
from tests.datagen.conftest import write_dataset as write

pytestmark = pytest.mark.usefixtures("need_docker")

WHERE = {"match": "Where", "turns": [{"reasoning": THINK, "tool_calls": [{"name": "terminal",
         "arguments": {"command": "pwd; head -n 1 /etc/os-release"}}]}],
         "final": {"reasoning": THINK, "text": "here"}}  # fmt: skip


def test_row_image_and_cwd_select_the_sandbox_and_a_missing_image_fails_only_its_prompt(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    mock_server.set_script({"scenarios": [WHERE, *SCRIPT["scenarios"]]})
    dataset = write(tmp_path / "p.jsonl", [
        {"prompt": "Where am I?", "image": "debian:bookworm-slim", "cwd": "/work/here"},
        {"prompt": "Where now?", "docker_image": "debian:bookworm-slim"},
        {"prompt": "Task gone: go.", "image": "helios-test-no-such-image:404"},
    ])  # fmt: skip
    result = run_generate(tmp_path, *hermes_args(mock_server, dataset, "img"),
                          "--provider=docker", timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    run = tmp_path / "data" / "img"
    rows = {r["prompt_index"]: r for r in read_jsonl(run / "trajectories.jsonl")}
    assert sorted(rows) == [0, 1]
    first = json.loads(rows[0]["conversations"][3]["value"].split("\n")[1])["content"]
    assert first["output"].splitlines() == ["/work/here", 'PRETTY_NAME="Debian GNU/Linux 12 '
                                            '(bookworm)"']  # fmt: skip
    second = json.loads(rows[1]["conversations"][3]["value"].split("\n")[1])["content"]
    assert second["output"].splitlines()[0] == "/app"
    failures = read_jsonl(run / "failures.jsonl")
    assert [f["prompt_index"] for f in failures] == [2]
    assert failures[0]["error"]["type"] == "ImageUnavailable"
    assert "helios-test-no-such-image:404" in failures[0]["error"]["message"]
