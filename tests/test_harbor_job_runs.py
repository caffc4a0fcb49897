"""`helios batch --config` with Harbor's JobConfig as it is: the example job files run,
each field Helios does not run named in one line before the run; each Harbor agent keeps
its own model; a hostile Harbor job is one line per problem."""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer

from .cli_inprocess import helios_inprocess

JOBS = Path(__file__).parent / "fixtures" / "harbor_jobs"
EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"
SCRIPT = Path(__file__).parent / "fixtures" / "scripted_examples.json"
ENV = {"OPENAI_COMPATIBLE_API_KEY": "sk-harbor-job-test"}
ALPHA, BETA = "openai-compatible/alpha", "openai-compatible/beta"


def _examples(root: Path) -> None:
    """The folders the example job files name, relative to where they run (as Harbor)."""
    for name in ("hello-file", "csv-report"):
        shutil.copytree(EXAMPLES / name, root / "examples" / "tasks" / name)
    shutil.copytree(EXAMPLES / "word-count", root / "examples" / "more" / "word-count")


def _records(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _unsupported(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("unsupported ")]


def test_harbors_example_job_runs_as_it_is_with_the_rest_named(
    need_bwrap: None, tmp_path: Path
) -> None:
    _examples(tmp_path)
    shutil.copy(JOBS / "examples.yaml", tmp_path / "job.yaml")
    done = helios_inprocess("batch", "--config", "job.yaml", "--provider", "local", "-q",
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    where = "unsupported job.yaml: field"
    assert _unsupported(done.stderr) == [
        f"{where} environment.force_build: not supported by Helios; ignored",
        f"{where} artifacts: Helios collects the artifacts a task.toml names, not a job's; ignored",
    ]
    # jobs_dir/job_name is the output folder; the datasets' and tasks' paths the tasks
    (run_dir,) = (tmp_path / "jobs" / "examples-oracle").iterdir()
    records = _records(run_dir)
    assert sorted((r["task_name"], r["attempt"]) for r in records) == [
        (t, a) for t in ("csv-report", "hello-file", "word-count") for a in (1, 2)
    ]
    assert {r["agent"] for r in records} == {"oracle"} and all(r["reward"] for r in records)
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["total_trials"] == 6
    # agent_timeout_multiplier: 2.0 scales each agent's timeout, and is recorded
    assert json.loads((run_dir / "run.json").read_text())["timeouts"] == {
        "agent": 2.0, "verifier": 1.0,
    }  # fmt: skip
    trial = next(r for r in records if r["task_name"] == "hello-file")
    config = json.loads((run_dir / str(trial["folder"]) / "config.json").read_text())
    task = tomllib.loads((tmp_path / "examples/tasks/hello-file/task.toml").read_text())
    agent, verifier = task["agent"]["timeout_sec"], task["verifier"]["timeout_sec"]
    assert config["timeouts"] | {"build": 0} == {
        "agent": agent * 2, "verifier": verifier, "build": 0,
    }  # fmt: skip


def test_harbors_older_json_job_runs_and_names_nothing(need_bwrap: None, tmp_path: Path) -> None:
    _examples(tmp_path)
    shutil.copy(JOBS / "legacy-examples.json", tmp_path / "job.json")
    done = helios_inprocess("batch", "-c", "job.json", "--provider", "local", "-o", "out",
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert _unsupported(done.stderr) == []
    (run_dir,) = (tmp_path / "out").iterdir()
    records = _records(run_dir)
    assert {(r["task_name"], r["agent"]) for r in records} == {
        ("hello-file", "nop"), ("csv-report", "nop"),
    }  # fmt: skip


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[MockLLMServer, MockLLMServer]]:
    with MockLLMServer(script=SCRIPT) as alpha, MockLLMServer() as beta:
        yield alpha, beta


def test_harbors_agents_each_run_with_their_own_model(
    need_bwrap: None, tmp_path: Path, servers: tuple[MockLLMServer, MockLLMServer]
) -> None:
    """terminus-2 on two models and the oracle: three trials per task, not the four of
    every model × every agent; the oracle (no model_name) runs once."""
    alpha, beta = servers
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    job = {
        "job_name": "pairs", "n_concurrent_trials": 3,
        "agents": [
            {"name": "terminus-2", "model_name": ALPHA, "base_url": alpha.openai_base_url,
             "kwargs": {"max_turns": 12}},
            {"name": "terminus-2", "model_name": BETA, "base_url": beta.openai_base_url,
             "kwargs": {"max_turns": 12}},
            {"name": "oracle"},
        ],
        "datasets": [{"path": "tasks"}],
    }  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(job))
    done = helios_inprocess("batch", "-c", "job.json", "--provider", "local", cwd=tmp_path,
                            env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert _unsupported(done.stderr) == []
    (run_dir,) = (tmp_path / "jobs" / "pairs").iterdir()
    records = _records(run_dir)
    assert sorted((r["model"], r["agent"], bool(r["reward"])) for r in records) == [
        (ALPHA, "oracle", True), (ALPHA, "tool", True), (BETA, "tool", False),
    ]  # fmt: skip
    run = json.loads((run_dir / "run.json").read_text())
    assert run["pairs"] == [[ALPHA, "tool"], [BETA, "tool"], [ALPHA, "oracle"]]
    # resumed from its folder (the endpoints named by the job again): nothing is left
    again = helios_inprocess("batch", "--resume", str(run_dir), "-c", "job.json",
                             "--provider", "local", cwd=tmp_path, env=ENV)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 (3 already done)" in again.stdout and len(_records(run_dir)) == 3
    # from the folder alone (run.json's pairs), not every model × every agent (4)
    alone = helios_inprocess("batch", "--resume", str(run_dir), "--base-url",
                             alpha.openai_base_url, cwd=tmp_path, env=ENV)  # fmt: skip
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "3 (3 already done)" in alone.stdout and len(_records(run_dir)) == 3
    # the saved config as a Helios job file: the same three trials, each model's endpoint
    shown = helios_inprocess("config", "show", str(run_dir), cwd=tmp_path, env=ENV)
    assert shown.returncode == 0, shown.stderr
    (tmp_path / "shown.yaml").write_text(shown.stdout)
    third = helios_inprocess("batch", "-c", "shown.yaml", "-o", "third", "-q", cwd=tmp_path,
                             env=ENV)  # fmt: skip
    assert third.returncode == 0, third.stdout + third.stderr
    (third_dir,) = (tmp_path / "third").iterdir()

    def trials(folder: Path) -> list[tuple[object, ...]]:
        return sorted((r["trial_id"], r["reward"]) for r in _records(folder))

    assert trials(third_dir) == trials(run_dir)


def test_a_harbor_jobs_acp_agent_runs_as_agent_acp_does(need_bwrap: None, tmp_path: Path) -> None:
    """Harbor's `acp` agent with its `registry_spec`: the test ACP agent (a host file,
    `bin:PATH`) solves hello-file through Helios's ACP client, as `--agent acp:…`."""
    agent = Path(__file__).parent / "data" / "acp_agent.py"
    task = tmp_path / "tasks" / "hello-file"
    shutil.copytree(EXAMPLES / "hello-file", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = false", "allow_internet = true"))
    write = "printf 'Hello, Helios!\\n' > /app/hello.txt"
    script = {"scenarios": [{"match": "*", "turns": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": write}}]},
        {"text": "Done."}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        job = {"job_name": "acp", "datasets": [{"path": "tasks"}], "agents": [
            {"name": "acp", "model_name": "openai-compatible/scripted",
             "base_url": server.openai_base_url, "kwargs": {"registry_spec": f"bin:{agent}"}}]}
        (tmp_path / "job.json").write_text(json.dumps(job))
        done = helios_inprocess("batch", "-c", "job.json", "--provider", "local", "-q",
                                cwd=tmp_path, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert _unsupported(done.stderr) == []
    (run_dir,) = (tmp_path / "jobs" / "acp").iterdir()
    (record,) = _records(run_dir)
    assert (record["agent"], record["reward"]) == (f"acp:bin:{agent}", 1.0), record
    assert '"sessionUpdate": "tool_call"' in (
        run_dir / str(record["folder"]) / "agent" / "acp.log").read_text()


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ('{"datasets": [{"path": "tasks", "task_names": ["a"], "registry": {"x": 1}}],'
         ' "agents": [{"name": "oracle", "extra": {"deep": 1}}]}',
         ["unsupported job.json: field agents[0].extra: not supported by Helios; ignored",
          "unsupported job.json: field datasets[0].task_names: not supported by Helios (it "
          "runs every task under the path); ignored",
          "unsupported job.json: field datasets[0].registry: not supported by Helios (it "
          "runs every task under the path); ignored"]),
        ('{"datasets": [{"name": "terminal-bench", "version": "2.0"}], "tasks": [{"path": "t"}]}',
         ["unsupported job.json: field datasets[0]: the registry dataset 'terminal-bench': "
          "Helios runs a dataset from a folder; give its `path`; ignored"]),
        ('{"n_attempts": "three", "datasets": [{"path": "tasks"}]}',
         ["job.json [n_attempts]: must be an integer >= 1, not 'three'"]),
        ('{"agents": [{"name": "oracle", "kwargs": []}], "datasets": [{"path": "tasks"}]}',
         ["job.json [agents[0].kwargs]: must be a mapping, not list"]),
        ('{"datasets": [{"path": "no/such/tasks"}]}',
         ["job.json [datasets.path]: no such folder: no/such/tasks"]),
        ('{"agents": [{"name": "oracle", "kwargs": {"max_turns": "x"}}], '
         '"datasets": [{"path": "tasks"}]}',
         ["job.json [agents (oracle).kwargs.max_turns]: must be an integer >= 1, not 'x'"]),
    ],
    ids=["unknown-nested", "registry-dataset", "wrong-type", "nested-type", "no-such-path",
         "kwargs-type"],
)  # fmt: skip
def test_a_hostile_harbor_job_is_one_line_each(tmp_path: Path, text: str, lines: list[str]) -> None:
    """Before anything runs: the run stops at its one error (here: exit 2 at the bad value,
    or, with the rest named, at the empty task folder `tasks`/`t` the test gives)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "job.json").write_text(text)
    done = helios_inprocess("batch", "-c", "job.json", "--provider", "local", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    got = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    if lines[0].startswith("unsupported"):
        assert got[:-1] == lines and len(got) == len(lines) + 1  # then: no task found
    else:
        assert len(got) == 1 and lines[0] in got[0], done.stderr


def test_timeout_multipliers_scale_the_agent_and_verifier_phases_and_the_trial_id() -> None:
    """Harbor's rule: a phase's own multiplier, else `timeout_multiplier`; the trial id
    changes only when a timeout does (1.0 keeps the ids of before)."""
    from helios.tasks.phases import TimeoutScale, plan_steps
    from helios.tasks.plan import build_specs
    from helios.tasks.task import load_task

    task = load_task(EXAMPLES / "hello-file", key="hello-file")
    (plain,) = plan_steps(task)
    (scaled,) = plan_steps(task, TimeoutScale(all=3.0, agent=0.5))
    assert scaled.agent_timeout == plain.agent_timeout * 0.5
    assert scaled.verifier.timeout == plain.verifier.timeout * 3.0

    def trial_id(scale: TimeoutScale | None) -> str:
        (spec,) = build_specs([task], n_attempts=1, agent="oracle", agent_settings={},
                              model=None, provider="local", timeouts=scale)  # fmt: skip
        (step,) = spec.body().steps  # the trial runs the scaled plan
        assert step.agent_timeout == plain.agent_timeout * (scale.of(scale.agent) if scale else 1)
        return spec.trial_id

    assert trial_id(TimeoutScale(agent=4.0)) != trial_id(None)
    assert trial_id(None) == trial_id(TimeoutScale()) == trial_id(TimeoutScale(all=1.0))
    assert trial_id(TimeoutScale(verifier=2.0)) != trial_id(None)
    with pytest.raises(ValueError, match="> 0"):
        TimeoutScale(agent=0.0)


def test_a_helios_job_agent_may_carry_its_own_model(tmp_path: Path) -> None:
    """`agents: [{name, model}]`: that agent runs with its model only; listed once per
    model, never twice with one model or both with and without one."""
    from helios.cli.job_options import apply_job
    from helios.errors import InputError
    from helios.tasks.job import load_job
    from helios.tasks.settings import TaskBatchSettings

    def job(agents: str) -> Path:
        path = tmp_path / "job.yaml"
        path.write_text(f"models: [{ALPHA}]\nagents: {agents}\n")
        return path

    path = job(f"[{{name: tool, model: {BETA}}}, {{name: tool, model: {ALPHA}}}, oracle]")
    settings = apply_job(TaskBatchSettings(), load_job(path), lambda _: False, path)
    assert settings.pairs == [(BETA, "tool"), (ALPHA, "tool"), (ALPHA, "oracle"), (BETA, "oracle")]
    assert [m.model for m in settings.models.every()] == [ALPHA, BETA]
    assert [settings.agent, *(a.name for a in settings.other_agents)] == ["tool", "oracle"]
    # -a given: the flags' agents over every model, as before
    flags = apply_job(TaskBatchSettings(), load_job(path), lambda name: name == "agent", path)
    assert flags.pairs is None
    for agents in (f"[{{name: tool, model: {ALPHA}}}, {{name: tool, model: {ALPHA}}}]",
                   f"[tool, {{name: tool, model: {ALPHA}}}]"):  # fmt: skip
        with pytest.raises(InputError, match=r"agents.*tool listed twice"):
            load_job(job(agents))
