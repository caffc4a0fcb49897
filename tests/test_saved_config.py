"""run.json saves the run's config (`config_version`, `config`), and `--resume RUN_DIR`
loads it with one rule and no field list: what a flag changes is kept, the rest is
the run's. A field added to the settings is kept with no other edit; a hostile config
is one line naming the file and the field; no secret is ever saved."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helios.cli import resume as resume_module  # imported before any test patches it
from helios.engine.saved_config import CONFIG_VERSION
from helios.models.retry import RetryPolicy
from helios.models.services import ModelOptions
from helios.tasks import runner as task_runner
from helios.tasks import settings as task_settings
from helios.tasks.settings import TaskBatchSettings

from .cli_inprocess import helios_inprocess

TASKS = Path(__file__).parent / "fixtures" / "run_before_rerun" / "tasks"
KEY = "sk-saved-config-9f8e7d6c"
PASSWORD = "pw-in-the-url-5a4b3c"


def _first_run(tmp_path: Path, settings: TaskBatchSettings) -> Path:
    """A finished oracle run of the two fixture tasks, its last trial forgotten."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS, tasks)
    runner = task_runner.ParallelRunner([tasks], settings=settings)
    asyncio.run(runner.run())
    assert runner.run_dir is not None
    results = runner.run_dir / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:-1]))
    return runner.run_dir


def _oracle(**fields: Any) -> dict[str, Any]:
    return dict(agent="oracle", provider="local", n_concurrent=1, show_progress=False, **fields)


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[TaskBatchSettings]:
    """The settings each ParallelRunner the CLI makes is given."""
    seen: list[TaskBatchSettings] = []
    original = task_runner.ParallelRunner.__init__

    def init(self: task_runner.ParallelRunner, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        seen.append(self.settings)

    monkeypatch.setattr(task_runner.ParallelRunner, "__init__", init)
    return seen


def test_resume_keeps_settings_no_field_list_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need_bwrap: None
) -> None:
    """The sandbox starts and the model's retry policy (no flag, no hand-kept resume
    list ever carried them) come back from the saved config."""
    policy = RetryPolicy(max_attempts=4, base_delay=0.5)
    run_dir = _first_run(tmp_path, TaskBatchSettings(
        **_oracle(output_dir=tmp_path / "out", max_starts=3, pattern="*/task.toml"),
        models=ModelOptions(retry_policy=policy),
    ))  # fmt: skip
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["config_version"] == CONFIG_VERSION
    assert saved["config"]["settings"]["max_starts"] == 3
    seen = _capture(monkeypatch)
    resumed = helios_inprocess("batch", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    (settings,) = seen
    assert settings.max_starts == 3 and settings.models.retry_policy == policy
    assert (settings.agent, settings.provider, settings.n_concurrent) == ("oracle", "local", 1)
    assert settings.pattern == "*/task.toml"
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == summary["total_trials"] == 2
    # a flag given again is applied (-n does not change results: no refusal)
    again = helios_inprocess("batch", "--resume", str(run_dir), "-q", "-n", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert seen[-1].n_concurrent == 2 and seen[-1].max_starts == 3


@dataclass
class _Extended(TaskBatchSettings):
    """The settings with one more field, as a later change would add it."""

    canary: str = "the default"


def test_a_field_added_to_the_settings_is_kept_by_resume_with_no_other_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need_bwrap: None
) -> None:
    monkeypatch.setattr(task_settings, "TaskBatchSettings", _Extended)
    monkeypatch.setattr(resume_module, "TaskBatchSettings", _Extended)
    run_dir = _first_run(tmp_path, _Extended(**_oracle(output_dir=tmp_path / "out"),
                                             canary="the run's"))  # fmt: skip
    assert json.loads((run_dir / "run.json").read_text())["config"]["settings"]["canary"] == (
        "the run's"
    )
    seen = _capture(monkeypatch)
    resumed = helios_inprocess("batch", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    (settings,) = seen
    assert isinstance(settings, _Extended) and settings.canary == "the run's"


def test_no_secret_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need_bwrap: None
) -> None:
    shutil.copytree(TASKS, tmp_path / "tasks")
    url = f"http://someone:{PASSWORD}@127.0.0.1:9/v1"
    result = helios_inprocess(
        "batch", "tasks", "-a", "oracle", "--provider", "local", "-n", "1", "-q", "-o", "out",
        "-m", "openai-compatible/x", "--base-url", url, "--api-key", KEY, cwd=tmp_path,
        env={"OPENAI_COMPATIBLE_API_KEY": KEY, "OPENAI_API_KEY": KEY},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["config"]["settings"]["models"]["base_url"] == "http://127.0.0.1:9/v1"
    assert saved["config"]["api_key_env"] == {}  # the oracle uses no model: no key read
    assert "api_key" not in json.dumps(saved["config"]["settings"])
    for path in run_dir.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert KEY.encode() not in text and PASSWORD.encode() not in text, path


def _new_format_run(tmp_path: Path) -> Path:
    """A run folder whose run.json holds a valid saved config (written by hand: these
    tests stop before anything runs)."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({
        "kind": "batch", "config_version": 1,
        "config": {"tasks": [str(TASKS)], "settings": {"n_concurrent": 1, "agent": "oracle"}},
    }))  # fmt: skip
    return run_dir


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"n_concurrent": "lots"}, "[config.settings.n_concurrent]: expected int, got str"),
        ({"n_attempts": True}, "[config.settings.n_attempts]: expected int, got bool"),
        ({"colour": "red"}, "[config.settings.colour]: unknown field of TaskBatchSettings"),
        (
            {"models": {"generation": {"max_tokens": [1]}}},
            "[config.settings.models.generation.max_tokens]: expected int, got list",
        ),
        (
            {"models": {"others": [{"modle": "x"}]}},
            "[config.settings.models.others[0].modle]: unknown field of ModelOptions",
        ),
        ({"executor": "cloud"}, "[config.settings.executor]: expected one of local, ray"),
        ({"agent_settings": _nested(200)}, "nested deeper than"),
        ({"other_agents": [{"name": "nop"}] * 250_000}, "values: not a run's settings"),
        ({"n_concurrent": 0}, "[config.settings]: not valid: -n and -k must be at least 1"),
    ],
    ids=[
        "wrong-type",
        "bool-for-int",
        "unknown-key",
        "nested-type",
        "nested-unknown",
        "literal",
        "deep",
        "huge",
        "invalid-value",
    ],
)
def test_a_hostile_saved_config_is_one_clear_line(
    tmp_path: Path, change: dict[str, Any], line: str
) -> None:
    run_dir = _new_format_run(tmp_path)
    path = run_dir / "run.json"
    data = json.loads(path.read_text())
    data["config"]["settings"].update(change)
    path.write_text(json.dumps(data))
    result = helios_inprocess("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr and line in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"config_version": "one"}, "[config_version]: expected a positive int"),
        ({"config_version": 99}, "[config_version]: config version 99 was written by a newer"),
        ({"config": [1]}, "[config]: expected an object, got list"),
        ({"config": {"settings": "x"}}, "[config.settings]: expected an object, got str"),
        ({"config": {"tasks": [1], "settings": {}}}, "[config.tasks]: expected a list"),
    ],
    ids=["version-type", "version-newer", "config-list", "settings-str", "tasks"],
)
def test_a_hostile_config_head_is_one_clear_line(
    tmp_path: Path, data: dict[str, Any], line: str
) -> None:
    run_dir = _new_format_run(tmp_path)
    path = run_dir / "run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **data}))
    result = helios_inprocess("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2 and line in result.stderr and str(path) in result.stderr
    assert "Traceback" not in result.stderr


def test_an_endpoint_in_the_saved_config_must_be_named_again(tmp_path: Path) -> None:
    """Even one only the config holds (another model's): the folder never chooses
    where the key goes."""
    run_dir = _new_format_run(tmp_path)
    path = run_dir / "run.json"
    data = json.loads(path.read_text())
    data["config"]["settings"]["models"] = {
        "model": "openai-compatible/a", "others": [
            {"model": "openai-compatible/b", "base_url": "http://elsewhere.example/v1"}],
    }  # fmt: skip
    path.write_text(json.dumps(data))
    result = helios_inprocess("batch", "--resume", str(run_dir), cwd=tmp_path)
    assert result.returncode == 2
    assert "[base_url]: this run was started with --base-url http://elsewhere.example/v1" in (
        result.stderr
    )
