"""`helios export RUN --format harbor`: a real task run, exported, loaded by Harbor 0.25's
own models (JobConfig, JobResult, TrialConfig, TrialResult, the ATIF Trajectory) and its
viewer's scanner, in a venv of its own; and the export's hostile cases: a damaged record
line, a link in a trial folder, a key in the environment, an output folder that exists,
a run of the wrong kind."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helios.testing.mock_llm import MockLLMServer

from .cli_inprocess import helios_inprocess
from .conftest import _need
from .harbor_venv import harbor_or_skip

KEY = "sk-harbor-export-7d1c9e4b2a"
MODEL = "openai-compatible/scripted"
#: every instruction: one bash call that writes /app/out.txt, then a last word
SCRIPT = {
    "scenarios": [
        {
            "match": "*",
            "turns": [
                {"tool_calls": [{"name": "bash",
                                 "arguments": {"command": "echo done > /app/out.txt"}}],
                 "text": "Writing it."},
                {"text": "Done."},
            ],
        }
    ]
}  # fmt: skip
#: task -> its verifier: passes (the file the agent wrote), fails (a file nobody
#: writes), writes no reward at all (the trial fails with an error: exception_info)
REWARD = "; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
TASKS = {
    "writes-out": "if [ -f /app/out.txt ]" + REWARD,
    "wants-other": "if [ -f /app/other.txt ]" + REWARD,
    "no-reward": "echo 'forgot the reward'\n",
}
ATTEMPTS = 2

#: run by the Harbor venv's Python on an exported job folder: each file loaded by
#: Harbor's own model, and what the test compares, as JSON
VALIDATE = """
import json, sys
from pathlib import Path
from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.models.trajectories.trajectory import Trajectory
from harbor.viewer.scanner import JobScanner

job = Path(sys.argv[1])
config = JobConfig.model_validate_json((job / "config.json").read_text())
result = JobResult.model_validate_json((job / "result.json").read_text())
trials = {}
for folder in sorted(p for p in job.iterdir() if p.is_dir()):
    TrialConfig.model_validate_json((folder / "config.json").read_text())
    trial = TrialResult.model_validate_json((folder / "result.json").read_text())
    assert trial.trial_name == folder.name
    trials[trial.agent_result.metadata["helios_trial_id"]] = {
        "folder": folder.name,
        "task": trial.task_name,
        "rewards": trial.verifier_result.rewards if trial.verifier_result else None,
        "exception": trial.exception_info.exception_type if trial.exception_info else None,
        "model": trial.agent_info.model_info.name if trial.agent_info.model_info else None,
        "output_tokens": trial.agent_result.n_output_tokens,
        "source": trial.source,
        "trajectory_steps": len(Trajectory.model_validate_json(
            (folder / "agent" / "trajectory.json").read_text()).steps),
    }
scanner = JobScanner(job.parent)
assert job.name in scanner.list_jobs()
assert scanner.get_job_config(job.name) is not None
assert scanner.get_job_result(job.name) is not None
viewed = scanner.list_trials(job.name)
assert all(scanner.get_trial_result(job.name, name) for name in viewed)
print(json.dumps({
    "job_name": config.job_name,
    "n_attempts": config.n_attempts,
    "agents": [[a.name, a.model_name] for a in config.agents],
    "datasets": [str(d.path) for d in config.datasets],
    "id": str(result.id),
    "n_total_trials": result.n_total_trials,
    "finished": result.finished_at is not None,
    "completed": result.stats.n_completed_trials,
    "errored": result.stats.n_errored_trials,
    "output_tokens": result.stats.n_output_tokens,
    "evals": {key: {"n_trials": e.n_trials, "n_errors": e.n_errors, "metrics": e.metrics,
                    "pass_at_k": {str(k): v for k, v in e.pass_at_k.items()}}
              for key, e in result.stats.evals.items()},
    "trials": trials,
    "viewed_trials": len(viewed),
}))
"""


def _write_task(root: Path, name: str, check: str) -> None:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 60\n'
        "[environment]\ncpus = 1\nmemory_mb = 256\n"
    )
    (task / "instruction.md").write_text("Write /app/out.txt.\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + check)


@pytest.fixture(scope="module")
def helios_run(tmp_path_factory: pytest.TempPathFactory, bwrap_available: bool) -> Path:
    """A finished `helios batch` of the tool agent against the scripted model server:
    3 tasks x 2 attempts, on the local sandbox."""
    _need("HELIOS_REQUIRE_BWRAP", bwrap_available, "bubblewrap")
    root = tmp_path_factory.mktemp("harbor")
    for name, check in TASKS.items():
        _write_task(root / "tasks", name, check)
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        result = helios_inprocess(
            "batch", str(root / "tasks"), "-m", MODEL, "--base-url", server.openai_base_url,
            "--provider", "local", "-k", str(ATTEMPTS), "-n", "4", "-q", "-o", "runs",
            cwd=root, env={"OPENAI_COMPATIBLE_API_KEY": KEY},
        )  # fmt: skip
    assert result.returncode in (0, 1), result.stdout + result.stderr
    (run_dir,) = (root / "runs").iterdir()
    return run_dir


@pytest.fixture
def run_copy(helios_run: Path, tmp_path: Path) -> Path:
    """A copy of the run that a test may damage."""
    copy = tmp_path / helios_run.name
    shutil.copytree(helios_run, copy, symlinks=True)
    return copy


@pytest.fixture(scope="session")
def harbor() -> Path:
    """The Python of a venv with Harbor 0.25 from PyPI (built once, cached)."""
    return harbor_or_skip()


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def _export(run_dir: Path, *args: str, env: dict[str, str | None] | None = None
            ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return helios_inprocess("export", str(run_dir), "--format", "harbor", *args,
                            cwd=run_dir.parent, env=env)  # fmt: skip


def _files(folder: Path) -> Iterator[Path]:
    return (path for path in folder.rglob("*") if path.is_file() or path.is_symlink())


@pytest.mark.timeout(1500)  # the first run builds the Harbor venv (pip, a minute or two)
def test_harbor_0_25_loads_the_export_and_its_numbers_are_the_runs(
    helios_run: Path, harbor: Path, tmp_path: Path
) -> None:
    job = tmp_path / "jobs" / "my-job"
    result = _export(helios_run, "-o", str(job))
    assert result.returncode == 0, result.stderr
    assert f"{len(TASKS) * ATTEMPTS} trials → " in result.stdout
    loaded = subprocess.run([str(harbor), "-c", VALIDATE, str(job)], capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    got = json.loads(loaded.stdout)
    records = {r["trial_id"]: r for r in _records(helios_run)}
    run_json = json.loads((helios_run / "run.json").read_text())

    assert got["job_name"] == "my-job" and got["n_attempts"] == ATTEMPTS
    assert got["agents"] == [[run_json["agent"], MODEL]]
    assert got["datasets"] == [str(helios_run.parent.parent / "tasks")]
    assert got["id"].replace("-", "") == run_json["run_id"]
    assert got["finished"] and got["n_total_trials"] == got["completed"] == len(records) == 6
    # a trial with a Helios error is a trial with Harbor's exception_info
    with_error = {tid for tid, r in records.items() if r["error"] or r["agent_error"]}
    assert {r["task_name"] for tid, r in records.items() if tid in with_error} == {"no-reward"}
    assert got["errored"] == len(with_error) == ATTEMPTS
    assert got["output_tokens"] == sum(r["usage"]["output_tokens"] for r in records.values()) > 0
    (key,) = got["evals"]
    assert key == f"{run_json['agent']}__{MODEL}__tasks"
    stats = got["evals"][key]
    rewards = [r["reward"] for r in records.values()]
    assert stats["metrics"] == [{"mean": pytest.approx(sum(rewards) / len(rewards))}]
    assert stats["n_errors"] == ATTEMPTS and stats["n_trials"] == 4  # no-reward has none
    assert stats["pass_at_k"]["1"] == pytest.approx(1 / 3)

    # Harbor's viewer lists every trial, and its Trajectory model loads each trajectory
    assert got["viewed_trials"] == len(records)
    assert set(got["trials"]) == set(records)
    for trial_id, trial in got["trials"].items():
        record = records[trial_id]
        assert trial["task"] == record["task_name"] and trial["model"] == MODEL
        assert trial["source"] == "tasks"
        assert trial["output_tokens"] == record["usage"]["output_tokens"]
        assert trial["trajectory_steps"] >= 3  # the instruction, the bash call, the last word
        if record["task_name"] == "no-reward":
            assert trial["rewards"] is None and trial["exception"] == record["error"]["type"]
        else:
            assert trial["rewards"] == record["rewards"] and trial["exception"] is None
        # the trajectory and the verifier's files come along, byte for byte
        helios_trial = helios_run / record["folder"]
        harbor_trial = job / trial["folder"]
        for name in ("agent/trajectory.json", "verifier/test-stdout.txt"):
            assert (harbor_trial / name).read_bytes() == (helios_trial / name).read_bytes()


def test_a_damaged_record_line_is_named_and_the_rest_exports(run_copy: Path) -> None:
    lines = (run_copy / "results.jsonl").read_text().splitlines(keepends=True)
    lines.insert(1, '{"trial_id": "cut-off\n')
    (run_copy / "results.jsonl").write_text("".join(lines))
    result = _export(run_copy, "-o", str(run_copy.parent / "out"))
    assert result.returncode == 0, result.stderr
    assert "6 trials → " in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "results.jsonl" in line]
    assert len(warnings) == 1 and "results.jsonl:2: not JSON; skipped" in warnings[0]
    assert len([p for p in (run_copy.parent / "out").iterdir() if p.is_dir()]) == 6


def test_a_link_in_a_trial_folder_is_never_followed_or_copied(run_copy: Path) -> None:
    outside = run_copy.parent / "outside"
    outside.mkdir()
    (outside / "private.txt").write_text("PRIVATE-CONTENT-OUTSIDE\n")
    first = _records(run_copy)[0]
    agent = run_copy / first["folder"] / "agent"
    (agent / "leak.txt").symlink_to(outside / "private.txt")
    (agent / "leak-dir").symlink_to(outside)
    (run_copy / first["folder"] / "artifacts").symlink_to(outside)
    out = run_copy.parent / "out"
    result = _export(run_copy, "-o", str(out))
    assert result.returncode == 0, result.stderr
    names = {path.name for path in out.rglob("*")}
    assert not names & {"leak.txt", "leak-dir", "private.txt", "artifacts"}
    assert not any(path.is_symlink() for path in out.rglob("*"))
    assert not any(b"PRIVATE-CONTENT" in path.read_bytes() for path in _files(out))
    said = result.stderr.replace("\n", " ")
    assert said.count("a link; not copied") == 3 and "leak.txt" in said


def test_a_key_in_the_environment_never_reaches_the_export(run_copy: Path) -> None:
    secret = "sk-only-in-the-export-env-41f0a9"
    first = _records(run_copy)[0]
    # a log that echoed the key, a second one with it across the 1 MiB read boundary,
    # and a record whose note quotes it
    agent = run_copy / first["folder"] / "agent"
    (agent / "echo.log").write_text(f"using key {secret} now\n")
    (agent / "big.log").write_bytes(b"a" * ((1 << 20) - 7) + secret.encode() + b"z")
    records = (
        (run_copy / "results.jsonl")
        .read_text()
        .replace('"verifier_note": null', f'"verifier_note": "key {secret}"', 1)
    )
    (run_copy / "results.jsonl").write_text(records)
    out = run_copy.parent / "out"
    result = _export(run_copy, "-o", str(out), env={"MY_SERVICE_API_KEY": secret})
    assert result.returncode == 0, result.stderr
    exported = list(_files(out))
    assert exported and not any(secret.encode() in path.read_bytes() for path in exported)
    trial = next(path.parent.parent for path in out.glob("*/agent/echo.log"))
    assert (trial / "agent" / "echo.log").read_text() == "using key [REDACTED] now\n"
    assert (trial / "agent" / "big.log").read_bytes().endswith(b"a[REDACTED]z")


def test_an_existing_output_is_refused_and_force_replaces_it_whole(run_copy: Path) -> None:
    out = run_copy.parent / "out"
    assert _export(run_copy, "-o", str(out)).returncode == 0
    (out / "mine.txt").write_text("keep me\n")
    again = _export(run_copy, "-o", str(out))
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"error: {out} exists; give --force to replace it, or another -o"
    ]
    assert (out / "mine.txt").is_file()
    forced = _export(run_copy, "-o", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert not (out / "mine.txt").exists() and (out / "result.json").is_file()
    # no temporary or old folder left beside it
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(["out", run_copy.name])
    # never inside the run (a trial's folder would copy itself), nor over it
    for inside in (run_copy / "001_no-reward" / "x", run_copy, run_copy.parent):
        refused = _export(run_copy, "-o", str(inside), "--force")
        assert refused.returncode == 2 and refused.stderr.startswith("error: "), refused
        assert len(refused.stderr.strip().splitlines()) == 1
    assert (run_copy / "results.jsonl").is_file()
    # the default place: RUN/export/harbor/<RUN's name>
    default = _export(run_copy)
    assert default.returncode == 0, default.stderr
    assert (run_copy / "export" / "harbor" / run_copy.name / "config.json").is_file()


def test_a_run_of_another_kind_is_refused_in_one_line(tmp_path: Path) -> None:
    generate = tmp_path / "gen"
    (generate / ".helios").mkdir(parents=True)
    (generate / ".helios" / "run.json").write_text('{"kind": "generate"}')
    refused = helios_inprocess("export", str(generate), "--format", "harbor", cwd=tmp_path)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "is a `helios generate` run; --format harbor exports a task run" in line
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "run.json").write_text('{"kind": "batch"}')
    wrong = helios_inprocess("export", str(batch), "--format", "openai", cwd=tmp_path)
    assert wrong.returncode == 2
    (line,) = wrong.stderr.strip().splitlines()
    assert "exports as a Harbor job folder (--format harbor), not as openai" in line
    assert not (batch / "export").exists() and not (generate / "export").exists()


#: what the old-run test reads back with Harbor's models
OLD_RUN_SCRIPT = """
import json, sys
from pathlib import Path
from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult
from harbor.models.trial.result import TrialResult

job = Path(sys.argv[1])
config = JobConfig.model_validate_json((job / "config.json").read_text())
result = JobResult.model_validate_json((job / "result.json").read_text())
trials = {}
for path in sorted(job.glob("*/result.json")):
    t = TrialResult.model_validate_json(path.read_text())
    trials[t.trial_name] = {
        "steps": [
            [s.step_name, s.verifier_result.rewards if s.verifier_result else None,
             s.exception_info.exception_type if s.exception_info else None]
            for s in t.step_results or []
        ],
        "exception": t.exception_info.exception_type if t.exception_info else None,
        "rewards": t.verifier_result.rewards if t.verifier_result else None,
        "finished": t.finished_at is not None,
        "provider": t.agent_info.model_info.provider,
        "env": t.config.environment.type,
    }
out = {"n_attempts": config.n_attempts, "errored": result.stats.n_errored_trials}
print(json.dumps({**out, "trials": trials}, default=str))
"""


def _record(trial_id: str, attempt: int, **fields: Any) -> str:
    from helios.tasks.results import TrialResult

    base: dict[str, Any] = {
        "trial_id": trial_id, "task_name": "steps", "task_path": "/tasks/steps",
        "attempt": attempt, "agent": "tool", "model": "anthropic/claude-x", "provider": "docker",
        "status": "passed", "reward": 1.0, "rewards": {"reward": 1.0},
        "started_at": "2026-01-02T03:04:05", "finished_at": "not a time",
        "folder": f"001_steps/attempt_00{attempt}",
    }  # fmt: skip
    return TrialResult.model_validate({**base, **fields}).model_dump_json() + "\n"


def test_an_old_run_folder_with_steps_and_errors_loads_in_harbor(
    tmp_path: Path, harbor: Path
) -> None:
    """A run.json with no settings (an older Helios), a multi-step trial, an errored one
    and times Harbor cannot read: the export still loads, with what can be known."""
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "run.json").write_text('{"kind": "batch"}')
    steps = [
        {"name": "build", "status": "passed", "reward": 1.0, "rewards": {"reward": 1.0}},
        {"name": "test", "status": "failed", "reward": 0.0,
         "error": {"type": "RewardFileMissing", "message": "no reward"}},
        {"name": "ship", "status": "not_run"},
    ]  # fmt: skip
    error = {"type": "SandboxStartError", "message": "no docker", "infrastructure": True}
    (run / "results.jsonl").write_text(
        _record("aaaa", 1, steps=steps, status="failed", reward=0.5, rewards={})
        + _record("bbbb", 2, status="error", reward=0.0, rewards={}, error=error)
    )
    (run / "001_steps" / "attempt_001" / "steps" / "build" / "agent").mkdir(parents=True)
    (run / "001_steps" / "attempt_001" / "steps" / "build" / "agent" / "log.txt").write_text("hi")
    out = tmp_path / "out"
    result = _export(run, "-o", str(out))
    assert result.returncode == 0, result.stderr
    # the second trial's folder was never written: named, and its result still exported
    assert "'001_steps/attempt_002' is not a folder inside the run" in result.stderr
    script = OLD_RUN_SCRIPT
    loaded = subprocess.run([str(harbor), "-c", script, str(out)], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    got = json.loads(loaded.stdout)
    assert got["n_attempts"] == 2 and got["errored"] == 1
    multi, errored = got["trials"]["steps__aaaa"], got["trials"]["steps__bbbb"]
    assert multi["steps"] == [
        ["build", {"reward": 1.0}, None],
        ["test", {"reward": 0.0}, "RewardFileMissing"],
        ["ship", None, None],
    ]
    assert multi["rewards"] == {"reward": 0.5} and multi["exception"] is None
    assert errored["rewards"] is None and errored["exception"] == "SandboxStartError"
    assert not multi["finished"]  # "not a time" is left out, not guessed
    assert multi["provider"] == "anthropic" and multi["env"] == "docker"
    assert (out / "steps__aaaa" / "steps" / "build" / "agent" / "log.txt").read_text() == "hi"
