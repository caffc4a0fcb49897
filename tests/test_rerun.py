"""`helios rerun RUN_DIR` and `helios config show RUN_DIR`: a task run again from the
settings its run.json saved, with one warning line per thing that can no longer be
the same; run.json's record of what a rerun needs (`helios.tasks.reproduce`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from helios.engine import store as store_module
from helios.engine.store import RunStore
from helios.tasks.job import JobConfig
from helios.testing.mock_llm import MockLLMServer

from .cli_inprocess import helios_inprocess
from .conftest import helios_cmd

FIXTURES = Path(__file__).parent / "fixtures"
SCRIPT = FIXTURES / "scripted_examples.json"
EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"
KEY = "sk-rerun-test-9f8e7d"
ENV = {"OPENAI_COMPATIBLE_API_KEY": KEY}


def _records(run_dir: Path) -> dict[str, float | None]:
    """Each trial id of a run with its reward."""
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {r["trial_id"]: r["reward"] for r in map(json.loads, lines)}


def _new_runs(parent: Path, *old: Path) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith(("batch_", "run_"))
                  and p not in old)  # fmt: skip


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning not as in the run")]


@pytest.fixture
def scripted() -> Iterator[MockLLMServer]:
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        yield server


def test_a_run_folder_of_before_the_rerun_record_resumes_then_reruns(
    tmp_path: Path, need_bwrap: None
) -> None:
    """A run folder in the format of before this change (no "rerun" record in its
    run.json) still resumes, and reruns with the same trial ids and rewards."""
    shutil.copytree(FIXTURES / "run_before_rerun", tmp_path / "runs")
    run_dir = tmp_path / "runs" / "batch_20261128_152013"
    run_json = run_dir / "run.json"
    recorded = json.loads(run_json.read_text())
    assert "rerun" not in recorded  # today's format
    recorded["task_paths"] = [str(tmp_path / "runs" / "tasks")]
    run_json.write_text(json.dumps(recorded))
    resumed = helios_inprocess("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "(1 already done)" in resumed.stdout
    first = _records(run_dir)
    assert len(first) == 2 and "7a13d4630c96d7e1" in first and set(first.values()) == {1.0}
    again = helios_inprocess("rerun", str(run_dir), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _warnings(again.stdout) == []  # nothing recorded to compare but the version
    (new,) = _new_runs(tmp_path / "runs", run_dir)
    assert _records(new) == first
    saved = json.loads((new / "run.json").read_text())
    assert saved["rerun_of"] == {"run_id": recorded["run_id"]}
    assert set(saved["rerun"]["tasks"]) == {"hello-file", "word-count"}


def test_a_rerun_with_the_scripted_server_gives_the_same_ids_and_rewards(
    tmp_path: Path, scripted: MockLLMServer, need_bwrap: None
) -> None:
    tasks = tmp_path / "tasks"
    for name in ("csv-report", "hello-file"):
        shutil.copytree(EXAMPLES / name, tasks / name)
    url = scripted.openai_base_url
    first = helios_inprocess(
        "batch", "tasks", "--provider", "local", "-m", "openai-compatible/scripted",
        "--base-url", url, "--max-tokens", "1000", "--max-turns", "12", "-n", "1", "-q",
        "-o", "out", cwd=tmp_path, env=ENV,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    (run_dir,) = _new_runs(tmp_path / "out")
    recorded = json.loads((run_dir / "run.json").read_text())
    assert KEY not in json.dumps(recorded)
    assert set(recorded["rerun"]["tasks"]) == {"csv-report", "hello-file"}
    assert recorded["rerun"]["agents"]["tool"]["max_turns"] == 12
    ids = _records(run_dir)
    assert set(ids.values()) == {1.0}

    # the run folder does not choose where the key goes: the endpoint is named again
    refused = helios_inprocess("rerun", str(run_dir), cwd=tmp_path, env=ENV)
    assert refused.returncode == 2 and "--base-url" in refused.stderr
    again = helios_inprocess("rerun", str(run_dir), "--base-url", url, "-o", "again",
                             cwd=tmp_path, env=ENV)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert _warnings(again.stdout) == []
    (rerun_dir,) = _new_runs(tmp_path / "again")
    assert _records(rerun_dir) == ids

    # a changed task file: one line names it, before anything runs
    (tasks / "csv-report" / "NOTES.md").write_text("changed after the run\n")
    changed = helios_inprocess("rerun", str(run_dir), "--base-url", url, "-o", "changed",
                               cwd=tmp_path, env=ENV)  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    (line,) = _warnings(changed.stdout)
    assert "task csv-report: its content changed" in line
    assert changed.stdout.index(line) < changed.stdout.index("Helios batch")
    (changed_dir,) = _new_runs(tmp_path / "changed")
    now = _records(changed_dir)
    assert len(set(now) & set(ids)) == 1  # hello-file's id is kept, csv-report's is not

    # the saved settings as a job file: batch's option names, the key by its variable
    shown = helios_inprocess("config", "show", str(run_dir), cwd=tmp_path, env=ENV)
    assert shown.returncode == 0, shown.stderr
    assert KEY not in shown.stdout
    assert yaml.safe_load(shown.stdout) == {
        "tasks": [str(tasks.absolute())], "pattern": "**/task.toml",
        "models": [{"model": "openai-compatible/scripted", "base_url": url,
                    "api_key_env": "OPENAI_COMPATIBLE_API_KEY", "max_tokens": 1000}],
        "agents": [{"name": "tool", "max_turns": 12}],
        "provider": "local", "n_attempts": 1, "n_concurrent": 1,
    }  # fmt: skip
    # ... which `helios batch --config` runs: the same trials again
    (tmp_path / "shown.yaml").write_text(shown.stdout)
    rerun = helios_inprocess("batch", "--config", "shown.yaml", "-q", "-o", "from-job",
                             cwd=tmp_path, env=ENV)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    (job_dir,) = _new_runs(tmp_path / "from-job")
    assert sorted(_records(job_dir)) == sorted(_records(changed_dir))


def test_config_show_prints_no_secret_and_keeps_the_settings(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": "abc", "helios_version": "0.1.0\n#evil: 1", "kind": "run",
        "task_paths": ["/t/one"], "agent": "tool", "model": "anthropic/claude-x",
        "provider": "docker", "n_attempts": 3, "n_concurrent": 1,
        "base_url": "https://user:hunter2@example.test/v1", "api_key": "sk-never-shown",
        "agent_settings": {"max_turns": 7, "system_prompt": "be\nbrief\x1b[31m"},
        "generation": {"max_tokens": 50, "temperature": 0.5, "reasoning_effort": "low",
                       "openrouter_provider": {"order": ["a", "b"], "sort": "price"}},
    }))  # fmt: skip
    shown = helios_inprocess("config", "show", str(run_dir), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "hunter2" not in shown.stdout and "sk-never-shown" not in shown.stdout
    assert "\x1b" not in shown.stdout and "#evil" not in shown.stdout.splitlines()[0]
    job = yaml.safe_load(shown.stdout)
    [model], [agent] = job["models"], job["agents"]
    assert model["api_key_env"] == "ANTHROPIC_API_KEY" and "api_key" not in model
    assert model["base_url"].startswith("https://")
    assert model["base_url"].endswith("example.test/v1")
    assert agent == {"name": "tool", "system_prompt": "be\nbrief\x1b[31m", "max_turns": 7}
    assert model["openrouter_routing"] == "order=a,b;sort=price"
    assert (job["n_attempts"], model["temperature"], model["reasoning_effort"]) == (3, 0.5, "low")
    # made before the network default was Harbor's: a task's unset network was none
    assert job["network_default"] == "none"
    JobConfig.model_validate(job)  # a job file `helios batch --config` takes


HOSTILE = {
    "task_paths_relative": {"task_paths": ["../../etc"]},
    "task_paths_not_a_list": {"task_paths": "/etc"},
    "task_paths_empty": {"task_paths": []},
    "pattern_leaves": {"task_paths": ["/t"], "pattern": "../../**/task.toml"},
    "rerun_not_an_object": {"task_paths": ["/t"], "rerun": "x"},
    "rerun_tasks_a_list": {"task_paths": ["/t"], "rerun": {"tasks": ["a"]}},
    "temperature_text": {"task_paths": ["/t"], "generation": {"temperature": "hot"}},
    "rerun_models_text": {"task_paths": ["/t"], "rerun": {"models": {"m": "m-1"}}},
    "workers_text": {"task_paths": ["/t"], "workers": "all"},
}
LINES = {
    "task_paths_relative": "[task_paths]: expected an absolute path",
    "task_paths_not_a_list": "[task_paths]: expected a list of task folders",
    "task_paths_empty": "[task_paths]: expected a list of task folders",
    "pattern_leaves": "[pattern]: the pattern '../../**/task.toml' leaves the tasks folder",
    "rerun_not_an_object": "[rerun]: expected an object, got str",
    "rerun_tasks_a_list": "[rerun.tasks]: expected an object of names to hashes",
    "temperature_text": "[generation.temperature]: expected int, got str",
    "rerun_models_text": "[rerun.models]: expected an object of models to the ids reported",
    "workers_text": "[workers]: expected int, got str",
    "huge": "too large to be a run's settings",
    "deep": "cannot read the run's settings",
}


@pytest.mark.parametrize("command", ["rerun", "config show"])
@pytest.mark.parametrize("case", [*HOSTILE, "huge", "deep"])
def test_a_hostile_run_json_is_one_clear_line(tmp_path: Path, command: str, case: str) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    path = run_dir / "run.json"
    if case == "huge":  # sparse: a size past the bound, nothing written
        with path.open("wb") as handle:
            handle.truncate(1 << 30)
    elif case == "deep":
        path.write_text('{"kind": "batch", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        path.write_text(json.dumps({"kind": "batch", **HOSTILE[case]}))
    result = helios_inprocess(*command.split(), str(run_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert LINES[case] in line and "Traceback" not in result.stderr
    assert "internal error" not in line
    assert _new_runs(tmp_path) == []


def test_two_runs_started_in_the_same_second_each_get_their_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name a run folder gets is claimed by its mkdir: a second process that saw it
    free a moment before takes the next one, never the first's folder or an error."""
    taken = tmp_path / "batch_20261128_120000"
    names = iter([taken, tmp_path / "batch_20261128_120000_2"])
    RunStore.create(taken, {"run_id": "first"}).close()
    monkeypatch.setattr(store_module, "new_run_dir", lambda parent, prefix: next(names))
    second = RunStore.create_new(tmp_path, "batch", {"run_id": "second"})
    second.close()
    assert second.run_dir.name == "batch_20261128_120000_2"
    assert json.loads((taken / "run.json").read_text())["run_id"] == "first"


def _slow_tasks(root: Path) -> Path:
    """Two oracle tasks, one that takes a few seconds: time to stop a run mid-way."""
    tasks = root / "tasks"
    shutil.copytree(EXAMPLES / "hello-file", tasks / "hello-file")
    shutil.copytree(EXAMPLES / "hello-file", tasks / "slow-hello")
    solve = tasks / "slow-hello" / "solution" / "solve.sh"
    first, rest = solve.read_text().split("\n", 1)
    solve.write_text(f"{first}\nsleep 3\n{rest}")
    return tasks


def _wait_for(condition: object, what: str, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while not condition():  # type: ignore[operator]
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_reruns_at_once_get_their_own_folders_and_a_killed_one_resumes(
    tmp_path: Path, need_bwrap: None
) -> None:
    _slow_tasks(tmp_path)
    first = helios_inprocess("batch", "tasks", "-a", "oracle", "--provider", "local", "-n", "2",
                             "-q", "-o", "out", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (run_dir,) = _new_runs(tmp_path / "out")
    ids = _records(run_dir)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    command = helios_cmd("rerun", str(run_dir), "-q")
    procs = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
        for _ in range(2)
    ]  # fmt: skip
    # the second is killed (-9, with its sandboxes) once its run has started
    _wait_for(lambda: len(_new_runs(tmp_path / "out", run_dir)) == 2, "both new run folders")
    _wait_for(lambda: all((p / "run.json").is_file() for p in _new_runs(tmp_path / "out", run_dir)),
              "both run.json")  # fmt: skip
    os.killpg(procs[1].pid, signal.SIGKILL)
    _, err = procs[0].communicate(timeout=120)
    procs[1].wait(timeout=30)
    assert procs[0].returncode == 0, err
    assert procs[1].returncode == -signal.SIGKILL
    (finished,) = [p for p in _new_runs(tmp_path / "out", run_dir) if _records_or_none(p) == ids]
    (left,) = [p for p in _new_runs(tmp_path / "out", run_dir) if p != finished]
    assert _records_or_none(left) != ids  # killed before its slow trial was recorded
    resumed = helios_inprocess("batch", "--resume", str(left), "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _records(left) == ids


def _records_or_none(run_dir: Path) -> dict[str, float | None] | None:
    try:
        return _records(run_dir)
    except FileNotFoundError:
        return None


def test_a_task_folder_replaced_by_a_symlink_is_named_not_a_traceback(
    tmp_path: Path, need_bwrap: None
) -> None:
    tasks = tmp_path / "tasks"
    for name in ("hello-file", "word-count"):
        shutil.copytree(EXAMPLES / name, tasks / name)
    first = helios_inprocess("batch", "tasks", "-a", "oracle", "--provider", "local", "-q",
                             "-o", "out", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (run_dir,) = _new_runs(tmp_path / "out")
    elsewhere = tmp_path / "elsewhere" / "hello-file"
    shutil.move(tasks / "hello-file", elsewhere)
    (elsewhere / "instruction.md").write_text("Create /app/hello.txt, changed.\n")
    (tasks / "hello-file").symlink_to(elsewhere)
    again = helios_inprocess("rerun", str(run_dir), "-q", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    lines = _warnings(again.stdout)
    assert lines and any("hello-file" in line for line in lines)
    assert all(len(line) < 300 for line in lines) and "Traceback" not in again.stderr


def test_the_differences_name_each_task_image_and_version_once(tmp_path: Path) -> None:
    from helios.tasks.plan import load_tasks
    from helios.tasks.reproduce import MAX_LINES, differences, rerun_record

    tasks_dir = tmp_path / "tasks"
    for name in ("hello-file", "word-count"):
        shutil.copytree(EXAMPLES / name, tasks_dir / name)
    tasks = load_tasks(sorted(tasks_dir.iterdir())).tasks
    images = {"debian:bookworm-slim": "sha256:" + "a" * 64, "gone:1": None}
    record = rerun_record(tasks, images=images, agents={})
    assert differences(record, tasks, images, helios_version=None) == []
    record["tasks"]["word-count"] = "0" * 64
    record["tasks"]["old-task"] = "1" * 64
    del record["tasks"]["hello-file"]
    now = {"debian:bookworm-slim": "sha256:" + "b" * 64}
    version, checksum = __import__("helios").__version__, tasks[1].checksum[:12]
    a, b = "a" * 12, "b" * 12
    assert differences(record, tasks, now, helios_version="0.0.1") == [
        f"Helios {version} now, 0.0.1 in the run",
        f"task word-count: its content changed (hash 000000000000 now {checksum})",
        "task old-task: gone (not found, or no longer valid)",
        "task hello-file: new (not in the run)",
        f"image debian:bookworm-slim: its digest changed (sha256:{a} now sha256:{b})",
    ]
    many = {"tasks": {f"t{i}": "2" * 64 for i in range(500)}}
    lines = differences(many, tasks, {}, helios_version=None)
    assert len(lines) == MAX_LINES and lines[-1] == f"and {502 - MAX_LINES + 1} more difference(s)"


def test_the_digest_of_a_ready_image_is_the_engines_and_unknown_when_absent(
    need_docker: None,
) -> None:
    import asyncio

    from helios.environments.docker.cli import image_digests

    digests = asyncio.run(image_digests(["debian:bookworm-slim", "helios-absent:none", "x:1"], 2))
    assert str(digests["debian:bookworm-slim"]).startswith("sha256:")
    assert digests["helios-absent:none"] is None and digests["x:1"] is None  # past the limit


def test_a_ready_image_is_recorded_by_digest_and_a_changed_one_is_named(
    tmp_path: Path, need_docker: None
) -> None:
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLES / "hello-file", task, ignore=shutil.ignore_patterns("environment"))
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace(
        "[environment]\n", '[environment]\ndocker_image = "debian:bookworm-slim"\n'))  # fmt: skip
    first = helios_inprocess("batch", "tasks", "-a", "oracle", "-q", "-o", "out", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (run_dir,) = _new_runs(tmp_path / "out")
    recorded = json.loads((run_dir / "run.json").read_text())
    digest = recorded["rerun"]["images"]["debian:bookworm-slim"]
    assert digest.startswith("sha256:")
    # as if the tag had moved since: the rerun names it (and still runs)
    recorded["rerun"]["images"]["debian:bookworm-slim"] = "sha256:" + "0" * 64
    (run_dir / "run.json").write_text(json.dumps(recorded))
    again = helios_inprocess("rerun", str(run_dir), "-q", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _warnings(again.stdout) == [
        "warning not as in the run: image debian:bookworm-slim: its digest changed "
        f"(sha256:{'0' * 12} now {digest[:19]})"
    ]


@pytest.mark.parametrize("settings", [{"max_turns": "x"}, {"toolsets": 5}], ids=["turns", "tools"])
def test_agent_settings_the_agent_refuses_are_one_line(tmp_path: Path, settings: dict) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({
        "kind": "batch", "task_paths": [str(tmp_path)], "agent": "tool",
        "model": "openai-compatible/x", "agent_settings": settings,
    }))  # fmt: skip
    result = helios_inprocess("rerun", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "[agent_settings]: not settings of the tool agent" in line


def test_a_model_call_notes_the_model_id_the_provider_reported() -> None:
    """The id a response names (a dated snapshot for an alias) reaches the call's
    usage and the trial's, survives a record's round trip, and stays bounded; a
    usage with no model call dumps as before."""
    import asyncio

    from helios.models.base import Message
    from helios.models.services import open_model_services
    from helios.usage import MAX_ID_CHARS, MAX_REPORTED, Usage

    async def ask(server: MockLLMServer) -> Usage:
        services = open_model_services("openai-compatible/scripted", api_key=KEY,
                                       base_url=server.openai_base_url)  # fmt: skip
        usage = Usage()
        try:
            await services.generate([Message("user", "hello")], [], usage=usage)
        finally:
            await services.close()
        assert services.totals.reported_models == usage.reported_models
        return usage

    reported = "scripted-2026-01-01"
    script = {"scenarios": [{"match": "*", "turns": []}]}
    with MockLLMServer(script=script, require_key=KEY, reported_model=reported) as server:
        usage = asyncio.run(ask(server))
    assert usage.reported_models == {"openai-compatible/scripted": [reported]}
    again = Usage.model_validate_json(usage.model_dump_json())
    assert again.reported_models == usage.reported_models
    assert "reported_models" not in Usage().model_dump()
    hostile = Usage.model_validate({"reported_models": {"m": [f"{i}" * 999 for i in range(50)]}})
    assert len(hostile.reported_models["m"]) == MAX_REPORTED
    assert all(len(i) == MAX_ID_CHARS for i in hostile.reported_models["m"])


def test_a_run_records_the_reported_model_ids_and_a_rerun_names_a_changed_one(
    tmp_path: Path, need_bwrap: None
) -> None:
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    snapshot = {"openai-compatible/scripted": ["scripted-2026-01-01"]}
    with MockLLMServer(script=SCRIPT, require_key=KEY,
                       reported_model="scripted-2026-01-01") as server:  # fmt: skip
        url = server.openai_base_url
        first = helios_inprocess(
            "batch", "tasks", "--provider", "local", "-m", "openai-compatible/scripted",
            "--base-url", url, "--max-tokens", "1000", "-q", "-o", "out", cwd=tmp_path, env=ENV,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        (run_dir,) = _new_runs(tmp_path / "out")
        saved = json.loads((run_dir / "run.json").read_text())
        assert saved["rerun"]["models"] == snapshot
        version = __import__("helios").__version__
        assert saved["rerun"]["agents"]["tool"]["package"] == f"helios {version}"
        summary = (run_dir / "batch_summary.json").read_text()
        assert json.loads(summary)["usage"]["reported_models"] == snapshot
        assert KEY not in json.dumps(saved) + summary

        # the same snapshot: nothing to name
        same = helios_inprocess("rerun", str(run_dir), "--base-url", url, "-o", "same",
                                cwd=tmp_path, env=ENV)  # fmt: skip
        assert same.returncode == 0, same.stderr
        assert _warnings(same.stdout) == []

        # the provider moved the alias to another snapshot, and the agent is another
        # version than the run's: each named in one line (the model's at the end)
        server.reported_model = "scripted-2026-02-02"
        saved["rerun"]["agents"]["tool"]["version"] = "0.9"
        (run_dir / "run.json").write_text(json.dumps(saved))
        changed = helios_inprocess("rerun", str(run_dir), "--base-url", url, "-o", "changed",
                                   cwd=tmp_path, env=ENV)  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    agent, model = _warnings(changed.stdout)
    assert agent == "warning not as in the run: agent tool: version 1.0 now, 0.9 in the run"
    assert model == ("warning not as in the run: model openai-compatible/scripted: the "
                     "provider reported scripted-2026-02-02 now, scripted-2026-01-01 in the run")
    assert changed.stdout.index(agent) < changed.stdout.index("Helios batch")
    assert changed.stdout.index(model) > changed.stdout.index("Helios batch")
    assert KEY not in changed.stdout + changed.stderr
    (new,) = _new_runs(tmp_path / "changed")
    now = json.loads((new / "run.json").read_text())["rerun"]["models"]
    assert now == {"openai-compatible/scripted": ["scripted-2026-02-02"]}


def test_a_resume_adds_to_the_reported_model_ids_run_json_holds(tmp_path: Path) -> None:
    from helios.engine.reported_models import record_models

    run_dir = tmp_path / "r"
    store = RunStore.create(run_dir, {"run_id": "x", "rerun": {"models": {"m": ["m-1"]}}})
    try:
        assert record_models(run_dir, {"m": ["m-2"], "n": ["n-1"]}) == {
            "m": ["m-1", "m-2"], "n": ["n-1"]}  # fmt: skip
    finally:
        store.close()
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["rerun"]["models"] == {"m": ["m-1", "m-2"], "n": ["n-1"]}
    assert saved["run_id"] == "x"


def test_a_plugin_agent_is_recorded_with_its_package_and_a_new_one_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from helios.agents import registry
    from helios.tasks.reproduce import agents_record, differences

    class FakeEntryPoint:
        name, value = "echo", "echo_agents.agent:EchoAgent"
        dist = SimpleNamespace(name="echo-agents", version="2.3.1")

    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEntryPoint()])
    identity = {"name": "echo", "version": "1.0", "settings": {}}
    record = {"agents": agents_record({"echo": identity})}
    assert record["agents"]["echo"]["package"] == "echo-agents 2.3.1"
    assert differences(record, [], {}, helios_version=None, agents={"echo": identity}) == []
    FakeEntryPoint.dist = SimpleNamespace(name="echo-agents", version="2.4.0")
    assert differences(record, [], {}, helios_version=None, agents={"echo": identity}) == [
        "agent echo: echo-agents 2.4.0 now, echo-agents 2.3.1 in the run"
    ]
