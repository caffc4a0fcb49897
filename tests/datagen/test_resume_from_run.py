"""`helios generate --resume --run_name NAME` alone: the rest comes from the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import hermes_args, read_jsonl, run_generate, write_dataset

pytestmark = pytest.mark.usefixtures("need_bwrap")


def test_resume_takes_the_dataset_model_and_endpoint_from_the_run(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(4)])
    run_generate(tmp_path, *hermes_args(mock_server, dataset, "r"), "--max_samples=2", check=True)
    stored = json.loads((tmp_path / "data/r/.helios/run.json").read_text())
    assert stored["settings"]["base_url"] == mock_server.openai_base_url
    assert "api_key" not in json.dumps(stored["settings"])
    requests = int(mock_server.stats["requests"])
    # the endpoint is never taken from the folder alone: it chooses where the key goes
    refused = run_generate(tmp_path, "--run_name=r", "--resume")
    assert refused.returncode == 2 and "--base-url" in refused.stderr
    assert int(mock_server.stats["requests"]) == requests
    # no dataset, batch size or model: they come from the run
    url = f"--base_url={mock_server.openai_base_url}"
    result = run_generate(tmp_path, "--run_name=r", "--resume", url, check=True)
    assert "2 already done" in result.stdout
    assert int(mock_server.stats["requests"]) > requests  # the 2 new prompts ran
    rows = read_jsonl(tmp_path / "data/r/trajectories.jsonl")
    assert sorted(int(r["prompt_index"]) for r in rows) == [0, 1, 2, 3]
    assert f"mock @ {mock_server.openai_base_url}" in result.stdout  # the run's, in the header
    # a flag given again wins over the run's value (all is done: nothing is sent)
    other = run_generate(tmp_path, "--run_name=r", "--resume", "--base_url=http://127.0.0.1:9/v1",
                         check=True)  # fmt: skip
    assert "mock @ http://127.0.0.1:9/v1" in other.stdout


def test_resume_of_a_run_that_does_not_exist_needs_the_flags(tmp_path: Path) -> None:
    result = run_generate(tmp_path, "--run_name=nothing", "--resume")
    assert result.returncode == 2 and "--dataset_file, --batch_size required" in result.stderr


def test_a_hostile_value_in_the_run_json_is_one_clear_line(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 0: go."])
    run_generate(tmp_path, *hermes_args(mock_server, dataset, "r"), check=True)
    path = tmp_path / "data/r/.helios/run.json"
    stored = json.loads(path.read_text())
    saved = stored["config"]
    saved["settings"]["batch_size"] = "many"
    path.write_text(json.dumps(stored))
    result = run_generate(tmp_path, "--run_name=r", "--resume")
    assert result.returncode == 2, result.stderr
    line = "data/r/.helios/run.json [config.settings.batch_size]: expected int, got str"
    assert line in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    # a run.json of before config_version: its flat settings, checked as before
    del stored["config_version"], stored["config"]
    stored["settings"]["batch_size"] = "many"
    path.write_text(json.dumps(stored))
    result = run_generate(tmp_path, "--run_name=r", "--resume")
    assert result.returncode == 2, result.stderr
    assert "data/r/.helios/run.json [batch_size]: not a valid value: 'many'" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    stored["settings"] = "not an object"
    path.write_text(json.dumps(stored))
    result = run_generate(tmp_path, "--run_name=r", "--resume")
    assert result.returncode == 2 and "[settings]: expected dict, got str" in result.stderr


def test_resume_loads_the_saved_config(tmp_path: Path, mock_server: MockLLMServer) -> None:
    """With config_version, a resume reads run.json's `config` alone: the flat keys of
    before (`settings`, `dataset_file`) are not needed."""
    dataset = write_dataset(tmp_path / "p.jsonl", [f"Task {i}: go." for i in range(3)])
    args = hermes_args(mock_server, dataset, "r")
    run_generate(tmp_path, *args, "--max_samples=1", "--max_turns=7", check=True)
    path = tmp_path / "data/r/.helios/run.json"
    stored = json.loads(path.read_text())
    assert stored["config_version"] == 1
    saved = stored["config"]["settings"]
    assert saved["max_turns"] == 7 and saved["batch_size"] == 2
    assert "max_samples" not in saved and "api_key" not in json.dumps(stored)
    for flat in ("settings", "dataset_file", "model", "distribution"):
        del stored[flat]
    path.write_text(json.dumps(stored))
    url = f"--base_url={mock_server.openai_base_url}"
    result = run_generate(tmp_path, "--run_name=r", "--resume", url, check=True)
    assert "1 already done" in result.stdout and "2 prompts each" in result.stdout
    assert f"{saved['model']} @ {mock_server.openai_base_url}" in result.stdout
    rows = read_jsonl(tmp_path / "data/r/trajectories.jsonl")
    assert sorted(int(r["prompt_index"]) for r in rows) == [0, 1, 2]


FIXTURE = Path(__file__).parents[1] / "fixtures" / "generate_before_config"


def test_a_run_of_before_config_version_still_resumes(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    """tests/fixtures/generate_before_config: a run folder as Helios wrote it before
    run.json saved its config (2 of 3 prompts done): a resume reads its flat keys."""
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "data/r/.helios/run.json"
    stored = json.loads(path.read_text())
    assert "config_version" not in stored  # the format of before
    stored["dataset_file"] = str(tmp_path / "prompts.jsonl")
    path.write_text(json.dumps(stored))
    url = f"--base_url={mock_server.openai_base_url}"
    result = run_generate(tmp_path, "--run_name=r", "--resume", url, check=True)
    assert "2 already done" in result.stdout
    rows = read_jsonl(tmp_path / "data/r/trajectories.jsonl")
    assert sorted(int(r["prompt_index"]) for r in rows) == [0, 1, 2]
