"""Harbor's job config read as Helios settings (helios.tasks.harbor_job): what maps, and
each field Helios does not run named in one line; the example files load with Harbor
0.25's own JobConfig, so the field names are Harbor's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helios.errors import InputError
from helios.tasks.harbor_job import load_harbor_job, looks_like_harbor_job, translate_harbor_job

from .harbor_venv import harbor_or_skip

JOBS = Path(__file__).parent / "fixtures" / "harbor_jobs"
HELIOS_AGENTS = ("tool", "computer", "oracle", "nop")


@pytest.fixture(scope="session")
def harbor() -> Path:
    return harbor_or_skip()


def test_a_harbor_job_file_becomes_helios_settings_and_the_rest_is_named() -> None:
    path = JOBS / "full.yaml"
    job = load_harbor_job(path, known_agents=HELIOS_AGENTS)
    assert job.settings == {
        "job_name": "sweep-1",
        "jobs_dir": "results",
        "n_attempts": 3,
        "n_concurrent_trials": 8,
        "timeout_multipliers": {"all": 2.0, "agent": 1.5, "verifier": None,
                                "agent_setup": None, "environment_build": None},
        "quiet": True,
        "provider": "docker",
        "agents": [
            {"name": "tool", "model_name": "anthropic/claude-sonnet-4-5",
             "kwargs": {"max_turns": 40}, "base_url": None},
            {"name": "oracle", "model_name": None, "kwargs": {}, "base_url": None},
        ],
        "datasets": [{"path": "tasks/set-a"}, {"path": "tasks/set-b"}],
        "tasks": [{"path": "tasks/extra/one-task"}],
        "artifacts": ["/app/out.txt", {"source": "/app/logs", "destination": "logs"}],
    }  # fmt: skip
    where = str(path)
    assert job.unsupported == [
        f"{where}: field environment.force_build: not supported by Helios; ignored",
        f"{where}: field agents[2].name: Helios has no agent 'claude-code' "
        "(it has computer, nop, oracle, tool); ignored",
        f"{where}: field datasets[1].task_names: not supported by Helios (it runs every task "
        "under the path); ignored",
        f"{where}: field datasets[2]: the registry dataset 'terminal-bench': Helios runs a "
        "dataset from a folder; give its `path`; ignored",
        f"{where}: field tasks[1]: the task 'https://example.com/tasks.git' from git or a "
        "registry: Helios runs a task from a folder; give its `path`; ignored",
        f"{where}: field retry.max_retries: Helios reruns errored trials with "
        "`--resume RUN --retry-errors` instead; ignored",
        f"{where}: field metrics: not supported by Helios; ignored",
    ]
    # the agent's env (a token) is named by its field, never shown
    assert not any("abc" in line or "SOME_TOKEN" in line for line in job.unsupported)


def test_without_known_agents_every_agent_is_kept_and_its_env_named() -> None:
    job = load_harbor_job(JOBS / "full.yaml")
    assert [a["name"] for a in job.settings["agents"]] == ["tool", "oracle", "claude-code"]
    assert any(line.endswith("field agents[2].env: not supported by Helios; ignored")
               for line in job.unsupported)  # fmt: skip


def test_harbors_older_orchestrator_block_and_json_are_read() -> None:
    job = load_harbor_job(JOBS / "legacy.json")
    assert job.settings["n_concurrent_trials"] == 2 and job.settings["quiet"] is True
    assert job.settings["agents"] == [
        {"name": "nop", "model_name": None, "kwargs": {}, "base_url": None}
    ]
    assert job.settings["datasets"] == [{"path": "tasks"}] and job.unsupported == []


def test_an_empty_job_is_harbors_defaults_and_names_nothing() -> None:
    job = translate_harbor_job({})
    assert job.settings["agents"] == [
        {"name": "oracle", "model_name": None, "kwargs": {}, "base_url": None}
    ]
    assert job.settings["n_attempts"] == 1 and job.settings["n_concurrent_trials"] == 4
    assert job.settings["timeout_multipliers"]["all"] == 1.0
    assert job.settings["provider"] is None and job.unsupported == []
    # fields set to Harbor's own defaults are not named either
    quiet = translate_harbor_job({"debug": False, "metrics": [], "retry": {"max_retries": 0},
                                  "environment": {"type": "docker", "delete": True}})  # fmt: skip
    assert quiet.unsupported == []
    kept = translate_harbor_job({"environment": {"delete": False}, "spam": 1}, source="j.yaml")
    assert kept.unsupported == [
        "j.yaml: field environment.delete: not supported by Helios; ignored",
        "j.yaml: field spam: not a field of Harbor's JobConfig; ignored",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n_attempts: three\n", "[n_attempts]: must be an integer >= 1, not 'three'"),
        ("n_concurrent_trials: 0\n", "[n_concurrent_trials]: must be an integer >= 1, not 0"),
        ("timeout_multiplier: -1\n", "[timeout_multiplier]: must be a number > 0, not -1"),
        ("agents: {name: oracle}\n", "[agents]: must be a list, not dict"),
        ("agents: [{model_name: 5}]\n",
         "[agents[0].model_name]: must be a non-empty string, not 5"),
        ("artifacts: [{destination: x}]\n",
         "[artifacts[0].source]: must be a non-empty string, not None"),
        ("- a list\n", "[(top)]: must be a mapping, not list"),
        ("agents: [\n", "not YAML"),
    ],
    ids=["attempts", "concurrency", "multiplier", "agents", "model", "artifact", "top", "yaml"],
)  # fmt: skip
def test_a_wrong_value_is_one_line_naming_the_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_harbor_job(path)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{path}") and message in line


def test_a_harbor_job_is_told_from_a_helios_one() -> None:
    assert looks_like_harbor_job({"agents": [{"name": "x", "model_name": "m"}]})
    assert looks_like_harbor_job({"n_concurrent_trials": 2})
    assert looks_like_harbor_job({"datasets": [{"path": "tasks"}]})
    assert not looks_like_harbor_job({"tasks": ["examples/tasks"], "models": ["a", "b"]})
    assert not looks_like_harbor_job(["n_concurrent_trials"])


def test_harbor_0_25_loads_the_example_job_files_as_they_are(harbor: Path) -> None:
    """The fields the translator reads are Harbor's: its own JobConfig takes both files."""
    script = (
        "import json, sys, warnings, yaml\n"
        "warnings.simplefilter('ignore')\n"
        "from harbor.models.job.config import JobConfig\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    c = JobConfig.model_validate(yaml.safe_load(open(name)))\n"
        "    out[name] = [c.n_attempts, c.n_concurrent_trials, [a.name for a in c.agents]]\n"
        "print(json.dumps(out))\n"
    )
    files = [str(JOBS / name) for name in
             ("full.yaml", "legacy.json", "examples.yaml", "legacy-examples.json")]  # fmt: skip
    loaded = subprocess.run([str(harbor), "-c", script, *files], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    got = json.loads(loaded.stdout)
    assert got[files[0]] == [3, 8, ["terminus-2", "oracle", "claude-code"]]
    assert got[files[1]] == [1, 2, ["nop"]]
    # the ones tests/test_harbor_job_runs.py runs with `helios batch --config`
    assert got[files[2]] == [2, 2, ["oracle"]] and got[files[3]] == [1, 2, ["nop"]]


def test_harbors_acp_agents_are_helios_acp_agents(tmp_path: Path) -> None:
    """Harbor names an ACP agent `acp:ID[@VERSION]` (its shorthand) or `acp` with
    `kwargs.registry_spec`: both are Helios's `--agent acp:ID`; Harbor's registry-only
    kwargs are named; an installed agent's `kwargs.version` pins its release."""
    from helios.tasks.harbor_job import as_job_config

    (tmp_path / "tasks").mkdir()
    data = {"datasets": [{"path": str(tmp_path / "tasks")}], "agents": [
        {"name": "acp:npm:some-acp-agent@1.2.3", "model_name": "openai/a"},
        {"name": "acp", "model_name": "openai/b",
         "kwargs": {"registry_spec": "claude-code@0.16.1", "permission_mode": "allow",
                    "registry_ref": "v2"}},
        {"name": "acp", "model_name": "openai/c", "kwargs": {"registry_entry_path": "x.json"}},
        {"name": "claude-code", "model_name": "anthropic/m", "kwargs": {"version": "2.0.1"}},
    ]}  # fmt: skip
    job = translate_harbor_job(data, source="j.yaml", known_agents=(*HELIOS_AGENTS, "claude-code"))
    assert [a["name"] for a in job.settings["agents"]] == [
        "acp:npm:some-acp-agent@1.2.3", "acp:claude-code@0.16.1", "claude-code"]
    assert job.unsupported == [
        "j.yaml: field agents[1].kwargs.registry_ref: Helios runs an ACP agent from its "
        "package (acp:ID); ignored",
        "j.yaml: field agents[2].kwargs.registry_entry_path: Helios runs an ACP agent from its "
        "package (acp:ID); ignored",
        "j.yaml: field agents[2].name: Harbor's `acp` agent without `kwargs.registry_spec` "
        "(Helios runs `acp:ID[@VERSION]`); ignored",
    ]
    config = as_job_config(job, "j.yaml")
    assert [(a.name, a.model, a.version) for a in config.agents] == [
        ("acp:npm:some-acp-agent@1.2.3", "openai/a", None),
        ("acp:claude-code@0.16.1", "openai/b", None),
        ("claude-code", "anthropic/m", "2.0.1"),
    ]
    # an ID Helios cannot run: one line naming the file and the agent
    bad = translate_harbor_job({"agents": [{"name": "acp:no-such-agent", "model_name": "m"}]},
                               source="j.yaml", known_agents=HELIOS_AGENTS)  # fmt: skip
    with pytest.raises(InputError, match=r"j.yaml \[agents \(acp:no-such-agent\).name\]: "
                       r"unknown ACP agent 'acp:no-such-agent'"):  # fmt: skip
        as_job_config(bad, "j.yaml")
