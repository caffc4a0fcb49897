"""`helios export` in its three formats (loaded back with `datasets`), and a generate run
that offers the web toolset against loopback search and pages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from helios.testing.web_server import WebTestServer
from tests.datagen.conftest import (
    SCRIPT,
    THINK,
    cli_env,
    hermes_args,
    read_jsonl,
    run_generate,
    write_dataset,
)

pytestmark = pytest.mark.usefixtures("need_bwrap")


def _export(cwd: Path, run: Path, fmt: str) -> Path:
    result = subprocess.run([sys.executable, "-m", "helios", "export", str(run), "--format", fmt],
                            cwd=cwd, env=cli_env(), capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    name = {"sharegpt": "sharegpt.jsonl", "openai": "openai.jsonl", "parquet": "sharegpt.parquet"}
    path = run / "export" / name[fmt]
    assert f"→ {path}" in result.stdout.replace("\n", "")  # where the CLI says it wrote
    return path


@pytest.fixture
def run(tmp_path: Path, mock_server: MockLLMServer) -> Path:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go.", "Plain 3"])
    run_generate(tmp_path, *hermes_args(mock_server, dataset, "x"), "--keep_no_reasoning",
                 check=True)  # fmt: skip
    return tmp_path / "data" / "x"


def test_openai_export_has_structured_tool_calls(tmp_path: Path, run: Path) -> None:
    rows = read_jsonl(_export(tmp_path, run, "openai"))
    assert len(rows) == 3
    messages = rows[0]["messages"]
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    call = messages[1]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "terminal"
    assert json.loads(call["function"]["arguments"]) == {"command": "echo ok"}
    assert messages[2]["tool_call_id"] == call["id"]
    assert json.loads(messages[2]["content"]) == {"output": "ok", "exit_code": 0, "error": None}
    assert messages[1]["content"] == f"<think>\n{THINK}\n</think>\nworking"
    assert all(set(m) == {"role", "content", "tool_calls", "tool_call_id"} for m in messages)
    assert rows[0]["tools"][0]["function"]["name"] == "terminal"


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "parquet"])
def test_exports_load_with_datasets_as_one_schema(tmp_path: Path, run: Path, fmt: str) -> None:
    datasets = pytest.importorskip("datasets")
    path = _export(tmp_path, run, fmt)
    loader = "parquet" if fmt == "parquet" else "json"
    data = datasets.load_dataset(loader, data_files=str(path), split="train",
                                 cache_dir=str(tmp_path / "hf"))  # fmt: skip
    assert data.num_rows == 3
    features = data.features
    if fmt == "openai":
        message = features["messages"].feature
        assert set(message) == {"role", "content", "tool_calls", "tool_call_id"}
        assert "Json" not in repr(message)  # a real struct, the same for every message
    else:
        assert list(features) == list(read_jsonl(run / "trajectories.jsonl")[0])
        assert set(features["tool_stats"]) >= {"terminal", "patch", "web_search"}
        assert "Json" not in repr(features)


def test_export_of_a_folder_without_trajectories_exits_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "helios", "export", str(tmp_path)],
                            env=cli_env(), capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2 and "trajectories.jsonl" in result.stderr


WEB = {"match": "Research", "turns": [
    {"reasoning": THINK, "tool_calls": [{"name": "web_search", "arguments": {"query": "helios"}}]},
    {"reasoning": THINK, "tool_calls": [{"name": "web_extract",
                                         "arguments": {"urls": ["PAGE"]}}]}],
    "final": {"reasoning": THINK, "text": "found it"}}  # fmt: skip


def test_generate_offers_the_web_toolset_when_configured(
    tmp_path: Path, mock_server: MockLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WebTestServer() as web:
        assert isinstance(web, WebTestServer)
        script = json.loads(json.dumps(WEB).replace("PAGE", web.page_url("article")))
        mock_server.set_script({"scenarios": [script, *SCRIPT["scenarios"]]})
        dataset = write_dataset(tmp_path / "p.jsonl", ["Research helios", "Task 1: go."])
        args = [a for a in hermes_args(mock_server, dataset, "w") if "distribution" not in a]
        env = {"HELIOS_SEARXNG_URL": web.searxng_url, "HELIOS_WEB_ALLOW_PRIVATE": "1"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        result = subprocess.run([sys.executable, "-m", "helios", "generate", *args,
                                 "--distribution=terminal_web"], cwd=tmp_path,
                                env={**cli_env(), **env}, capture_output=True, text=True,
                                timeout=180)  # fmt: skip
        assert result.returncode == 0, result.stderr
    rows = {r["prompt_index"]: r for r in read_jsonl(tmp_path / "data/w/trajectories.jsonl")}
    research = rows[0]
    assert research["toolsets_used"] == ["terminal", "file", "web"]
    assert research["tool_stats"]["web_search"] == {"count": 1, "success": 1, "failure": 0}
    assert research["tool_stats"]["web_extract"] == {"count": 1, "success": 1, "failure": 0}
    extracted = json.loads(research["conversations"][5]["value"].split("\n")[1])["content"]
    assert "# Batch runners" in extracted["results"][0]["content"]


def test_without_web_configuration_default_skips_web_with_one_warning(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go."])
    args = [a for a in hermes_args(mock_server, dataset, "d") if "distribution" not in a]
    result = run_generate(tmp_path, *args, check=True)
    assert result.stderr.count("toolset 'web' skipped") == 1  # a warning: on stderr
    assert "toolset 'web' skipped" not in result.stdout
    for row in read_jsonl(tmp_path / "data/d/trajectories.jsonl"):
        assert row["toolsets_used"] == ["terminal", "file"]
