"""The Hermes command line against the scripted server: the four files, field by field.

The run whose files are read is one process of the CLI, shared by the module; the other
invocations run in-process (`generate_inprocess`): the same command and exit code."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.datagen.conftest import (
    SCRIPT,
    THINK,
    generate_inprocess,
    hermes_args,
    read_jsonl,
    reference,
    run_generate,
    write_dataset,
)

pytestmark = pytest.mark.usefixtures("need_bwrap")

HERMES_TOOLS = {"terminal", "read_file", "write_file", "patch", "search_files", "web_search",
                "web_extract"}  # fmt: skip


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Hermes run (the CLI in a process of its own, as a user runs it) that the four
    tests of its files read: each only reads them."""
    tmp_path = tmp_path_factory.mktemp("finished")
    prompts = [f"Task {i}: run a command, then finish." for i in range(5)]
    dataset = write_dataset(tmp_path / "prompts.jsonl", prompts)
    with MockLLMServer(script=SCRIPT) as server:
        result = run_generate(tmp_path, *hermes_args(server, dataset, "bench2"), check=True)
    assert "5 rows" in result.stdout.replace("\n", " ") or "5 in trajectories" in result.stdout
    return tmp_path / "data" / "bench2"


def test_rows_have_hermes_schema_field_by_field(finished_run: Path) -> None:
    ref = reference("row")
    rows = read_jsonl(finished_run / "trajectories.jsonl")
    assert sorted(r["prompt_index"] for r in rows) == [0, 1, 2, 3, 4]
    for row in rows:
        assert list(row) == list(ref)  # the same keys, in Hermes's order
        assert list(row["metadata"]) == list(ref["metadata"])
        assert row["metadata"]["model"] == "mock"
        datetime.fromisoformat(row["metadata"]["timestamp"])
        assert row["metadata"]["batch_num"] == row["prompt_index"] // 2
        assert row["completed"] is True and row["partial"] is False
        assert row["api_calls"] == 5  # four terminal turns and the answer
        assert row["toolsets_used"] == ["terminal", "file"]
        assert set(row["tool_stats"]) == set(ref["tool_stats"]) == HERMES_TOOLS
        assert row["tool_stats"]["terminal"] == {"count": 4, "success": 4, "failure": 0}
        assert row["tool_stats"]["patch"] == {"count": 0, "success": 0, "failure": 0}
        assert row["tool_error_counts"] == dict.fromkeys(row["tool_stats"], 0)


def test_conversation_turns_match_the_hermes_reference(finished_run: Path) -> None:
    ref = reference("row")["conversations"]
    row = next(r for r in read_jsonl(finished_run / "trajectories.jsonl") if r["prompt_index"] == 0)
    turns = row["conversations"]
    assert [t["from"] for t in turns] == ["system", "human"] + ["gpt", "tool"] * 4 + ["gpt"]
    system, ref_system = turns[0]["value"], ref[0]["value"]
    head, tail = ref_system.split("<tools>\n")[0], ref_system.split("\n</tools>\n")[1]
    assert system.startswith(head + "<tools>\n") and system.endswith("\n</tools>\n" + tail)
    listed = json.loads(system[len(head) + len("<tools>\n") : -len("\n</tools>\n" + tail)])
    assert [t["name"] for t in listed] == ["terminal", "read_file", "write_file", "patch",
                                           "search_files"]  # fmt: skip
    assert all(set(t) == {"name", "description", "parameters"} for t in listed)
    terminal = next(t for t in listed if t["name"] == "terminal")["parameters"]
    assert terminal["required"] == ["command"] and "timeout" in terminal["properties"]
    assert turns[1] == ref[1]  # the prompt, verbatim
    assert turns[2] == ref[2]  # <think> + content + <tool_call>
    assert turns[-1] == ref[-1]  # the answer
    response = turns[3]["value"]
    assert response.startswith("<tool_response>\n") and response.endswith("\n</tool_response>")
    body = json.loads(response.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>"))
    ref_body = json.loads(ref[3]["value"].split("\n")[1])
    assert list(body) == list(ref_body) and body["content"] == ref_body["content"]
    assert THINK not in system  # the ephemeral prompt and reasoning never leak into turn 0


def test_checkpoint_and_statistics_have_hermes_fields(finished_run: Path) -> None:
    checkpoint = json.loads((finished_run / "checkpoint.json").read_text())
    ref = reference("checkpoint")
    assert list(checkpoint) == list(ref)
    assert checkpoint["run_name"] == "bench2"
    assert checkpoint["completed_prompts"] == [0, 1, 2, 3, 4]
    assert set(checkpoint["batch_stats"]) == {"0", "1", "2"}
    for entry in checkpoint["batch_stats"].values():
        assert list(entry) == list(next(iter(ref["batch_stats"].values())))
    assert checkpoint["batch_stats"]["2"]["processed"] == 1
    datetime.fromisoformat(checkpoint["last_updated"])

    stats = json.loads((finished_run / "statistics.json").read_text())
    ref_stats = reference("statistics")
    assert list(stats)[: len(ref_stats)] == list(ref_stats)
    assert stats["total_prompts"] == 5 and stats["total_batches"] == 3
    assert stats["batch_size"] == 2 and stats["model"] == "mock"
    assert stats["distribution"] == "terminal_only"
    assert stats["tool_statistics"] == {
        "terminal": {
            "count": 20,
            "success": 20,
            "failure": 0,
            "success_rate": 100.0,
            "failure_rate": 0.0,
        }
    }
    assert stats["reasoning_statistics"] == {"total_assistant_turns": 25,
                                             "turns_with_reasoning": 25,
                                             "turns_without_reasoning": 0}  # fmt: skip
    assert stats["failed_prompts"] == 0 and stats["discarded_prompts"] == 0
    assert stats["bad_input_lines"] == 0 and stats["trajectories_written"] == 5
    assert isinstance(stats["duration_seconds"], float)
    # the model id the provider reported (the mock server names the one asked for)
    assert stats["usage"]["reported_models"] == {"openai-compatible/mock": ["mock"]}
    saved = json.loads((finished_run / ".helios" / "run.json").read_text())
    assert saved["rerun"]["models"] == {"openai-compatible/mock": ["mock"]}


def test_batch_files_hold_each_row_once(finished_run: Path) -> None:
    merged = (finished_run / "trajectories.jsonl").read_text().splitlines()
    batches = sorted(finished_run.glob("batch_*.jsonl"))
    assert [p.name for p in batches] == ["batch_0.jsonl", "batch_1.jsonl", "batch_2.jsonl"]
    in_batches = [line for p in batches for line in p.read_text().splitlines()]
    assert sorted(in_batches) == sorted(merged)
    assert len(read_jsonl(finished_run / "batch_2.jsonl")) == 1


def test_bad_lines_are_warned_with_file_and_line_and_counted(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", [
        "Task a: go.", "RAW:{not json", {"text": "no prompt"}, {"prompt": 7}, {"prompt": "  "},
        {"prompt": "Task b: go.", "cwd": "relative/dir"}, "Task c: go.",
    ])  # fmt: skip
    result = generate_inprocess(tmp_path, *hermes_args(mock_server, dataset, "bad"), check=True)
    for line, field in ((2, ""), (3, " [prompt]"), (4, " [prompt]"), (5, " [prompt]"),
                        (6, " [cwd]")):  # fmt: skip
        assert f"p.jsonl:{line}{field}:" in result.stderr  # warnings: not the output
    assert "p.jsonl:" not in result.stdout
    stats = json.loads((tmp_path / "data/bad/statistics.json").read_text())
    assert stats["bad_input_lines"] == 5 and stats["total_prompts"] == 2
    assert stats["trajectories_written"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch_size=2", "--run_name=x"], "--dataset_file"),
        (["--dataset_file=missing.jsonl", "--batch_size=2", "--run_name=x"], "not found"),
        (["--dataset_file=empty.jsonl", "--batch_size=2", "--run_name=x"], "no valid prompt"),
        (["--dataset_file=ok.jsonl", "--batch_size=0", "--run_name=x"], "batch_size"),
        (
            ["--dataset_file=ok.jsonl", "--batch_size=2", "--run_name=x", "--distribution=nope"],
            "unknown distribution",
        ),
        (
            [
                "--dataset_file=ok.jsonl",
                "--batch_size=2",
                "--run_name=x",
                "--distribution=browser_only",
            ],
            "browser",
        ),
        (
            [
                "--dataset_file=ok.jsonl",
                "--batch_size=2",
                "--run_name=x",
                "--reasoning_effort=huge",
            ],
            "reasoning effort",
        ),
        (
            ["--dataset_file=ok.jsonl", "--batch_size=2", "--run_name=x", "--no_such_flag"],
            "No such option",
        ),
        (
            ["--dataset_file=ok.jsonl", "--batch_size=2", "--run_name=x", "--distribution=minimal"],
            "web",
        ),
        (
            ["--dataset_file=ok.jsonl", "--batch_size=2", "--run_name=x", "--provider=cloud"],
            "unknown provider",
        ),
    ],
)
def test_bad_invocations_exit_2_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "empty.jsonl").write_text("\n{broken\n")
    write_dataset(tmp_path / "ok.jsonl", ["Task: go."])
    result = generate_inprocess(tmp_path, *args, "--base_url=http://127.0.0.1:9/v1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_an_existing_run_is_refused_before_the_dataset_is_read(tmp_path: Path) -> None:
    (tmp_path / "data" / "x" / ".helios").mkdir(parents=True)
    (tmp_path / "data" / "x" / ".helios" / "run.json").write_text("{}")
    # the dataset has no valid line: the run folder is what is said first, unread
    (tmp_path / "broken.jsonl").write_text("{broken\n" * 1000)
    result = generate_inprocess(tmp_path, "--dataset_file=broken.jsonl", "--batch_size=1",
                                "--run_name=x", "--base_url=http://127.0.0.1:9/v1")  # fmt: skip
    assert result.returncode == 2
    assert "already holds a run" in result.stderr and "no valid prompt" not in result.stderr
    assert "broken.jsonl:" not in result.stdout + result.stderr


def test_openrouter_without_a_key_exits_2_before_any_work(tmp_path: Path) -> None:
    write_dataset(tmp_path / "ok.jsonl", ["Task: go."])
    result = generate_inprocess(
        tmp_path, "--dataset_file=ok.jsonl", "--batch_size=1", "--run_name=x"
    )
    assert result.returncode == 2
    assert "OPENROUTER_API_KEY" in result.stderr
    assert not (tmp_path / "data" / "x").exists()


def test_list_distributions_needs_nothing_else(tmp_path: Path) -> None:
    result = generate_inprocess(tmp_path, "--list_distributions")
    assert result.returncode == 0
    for name in ("default", "terminal_only", "terminal_web", "development", "research"):
        assert name in result.stdout
    assert "web toolset unavailable here" in result.stdout
    assert "browser_only" not in result.stdout


def test_dash_spellings_work_too(tmp_path: Path, mock_server: MockLLMServer) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go."])
    result = generate_inprocess(
        tmp_path, "--dataset-file", str(dataset), "--batch-size", "1", "--run-name", "dash",
        "--model", "mock", "--base-url", mock_server.openai_base_url, "--num-workers", "2",
        "--distribution", "terminal_only", "--max-turns", "3", "--output-dir", "out",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    row = read_jsonl(tmp_path / "out/dash/trajectories.jsonl")[0]
    assert row["api_calls"] == 3 and row["completed"] is False  # stopped by --max-turns


def test_request_carries_the_model_verbatim_and_no_token_limit(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go."])
    generate_inprocess(tmp_path, *hermes_args(mock_server, dataset, "req"),
                       "--ephemeral_system_prompt=SECRET FRAMING", check=True)  # fmt: skip
    body = mock_server.requests[0].body
    assert body["model"] == "mock"
    assert "max_tokens" not in body and "max_completion_tokens" not in body
    assert body["messages"][0] == {"role": "system", "content": "SECRET FRAMING"}
    assert "SECRET FRAMING" not in (tmp_path / "data/req/trajectories.jsonl").read_text()
