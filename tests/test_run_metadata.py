"""Every door's `run.json` starts the same way (`engine.store.run_metadata`): a uuid4
run id, the Helios version, the HELIOS_* settings that were set (a URL without its
password) and the host's facts; a task batch's resume refuses a setting that
changes results."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from helios.testing.mock_llm import MockLLMServer

from .conftest import helios_cmd

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "pw-9f3c1e"
SEARXNG = f"http://ada:{PASSWORD}@127.0.0.1:9/"


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and not k.startswith("HELIOS_")}  # fmt: skip
    return subprocess.run(
        helios_cmd(*args), cwd=cwd, env={**base, "COLUMNS": "200", **env},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _head_of(run_json: Path) -> dict[str, Any]:
    data = json.loads(run_json.read_text())
    assert re.fullmatch(r"[0-9a-f]{32}", data["run_id"]), data["run_id"]
    assert set(data["host"]) == {"python", "platform", "machine", "cpus"}
    assert data["helios_version"]
    return data  # type: ignore[no-any-return]


def _no_password_in(folder: Path) -> None:
    leaks = [p for p in folder.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert leaks == []


def test_a_batch_records_its_settings_and_resume_checks_those_that_change_results(
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(REPO / "examples" / "tasks" / "hello-file", tasks / "hello-file")
    batch = ("batch", str(tasks), "--provider", "local", "--agent", "oracle", "-o", "out")
    env = {"HELIOS_DOCKER_NETWORK": "bridge", "HELIOS_SEARXNG_URL": SEARXNG,
           "HELIOS_LOCAL_SHELL": "python"}  # fmt: skip
    first = _run(*batch, cwd=tmp_path, **env)
    assert first.returncode == 0, first.stdout + first.stderr
    (run,) = (tmp_path / "out").iterdir()
    data = _head_of(run / "run.json")
    assert data["kind"] == "batch"
    assert data["helios_settings"] == {
        "HELIOS_DOCKER_NETWORK": "bridge",
        "HELIOS_LOCAL_SHELL": "python",
        "HELIOS_SEARXNG_URL": "http://127.0.0.1:9/",
    }
    # HELIOS_LOCAL_SHELL changes how, not what: it is not part of the identity
    assert data["result_settings"] == {
        "HELIOS_DOCKER_NETWORK": "bridge", "HELIOS_SEARXNG_URL": "http://127.0.0.1:9/",
    }  # fmt: skip
    _no_password_in(run)

    resume = ("batch", str(tasks), "--provider", "local", "--agent", "oracle",
              "--resume", str(run))  # fmt: skip
    other = _run(*resume, cwd=tmp_path, HELIOS_SEARXNG_URL=SEARXNG)
    assert other.returncode == 2, other.stdout + other.stderr
    assert "result_settings" in other.stdout + other.stderr
    assert "HELIOS_DOCKER_NETWORK" in other.stdout + other.stderr
    same = _run(*resume, cwd=tmp_path, **{**env, "HELIOS_LOCAL_SHELL": "0"})
    assert same.returncode == 0, same.stdout + same.stderr
    forced = _run(*resume, "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stdout + forced.stderr


def test_generate_and_toolcalls_runs_start_their_run_json_the_same_way(tmp_path: Path) -> None:
    script = {"scenarios": [{"match": "*", "turns": [{"reasoning": "think", "text": "ok"}],
                             "final": {"reasoning": "think", "text": "done"}}]}  # fmt: skip
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"prompt": "say ok"}) + "\n")
    with MockLLMServer(script=script, reported_model="scripted-2026-01-01") as server:
        generate = _run(
            "generate", "--dataset_file=prompts.jsonl", "--run_name=gen", "--batch_size=1",
            "--model=mock",
            f"--base_url={server.openai_base_url}", "--distribution=terminal_only",
            cwd=tmp_path, HELIOS_SEARXNG_URL=SEARXNG,
        )  # fmt: skip
        assert generate.returncode == 0, generate.stdout + generate.stderr
        config = tmp_path / "tc.yaml"
        config.write_text(
            "synthesizer: null\n"
            "agent: {name: model, params: {model: openai-compatible/scripted, "
            f"base_url: '{server.openai_base_url}'}}}}\n"
            "tests:\n  - {id: t, prompt: hi, expect: []}\n"
        )
        toolcalls = _run("toolcalls", "--config", str(config), "-o", "tc", cwd=tmp_path,
                         HELIOS_SEARXNG_URL=SEARXNG)  # fmt: skip
        assert toolcalls.returncode in (0, 1), toolcalls.stdout + toolcalls.stderr
    runs = [tmp_path / "data" / "gen" / ".helios" / "run.json",
            next((tmp_path / "tc").glob("toolcalls_*/run.json"))]  # fmt: skip
    for path in runs:
        data = _head_of(path)
        assert data["helios_settings"] == {"HELIOS_SEARXNG_URL": "http://127.0.0.1:9/"}
    assert [json.loads(p.read_text())["kind"] for p in runs] == ["generate", "toolcalls"]
    # each names the model id the provider answered with (a rerun compares them)
    reported = [json.loads(p.read_text())["rerun"]["models"] for p in runs]
    assert reported == [{"openai-compatible/mock": ["scripted-2026-01-01"]},
                        {"openai-compatible/scripted": ["scripted-2026-01-01"]}]  # fmt: skip
    _no_password_in(tmp_path / "data")
    _no_password_in(tmp_path / "tc")
