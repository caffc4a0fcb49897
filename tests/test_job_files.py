"""`helios batch --config JOB` and `-m a,b`: one run over several models and agents.

Two scripted servers play two models: `alpha` solves the example tasks, `beta` only
says "Done." (so its tool trials fail); the oracle passes with either."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer

from .cli_inprocess import helios_inprocess

SCRIPT = Path(__file__).parent / "fixtures" / "scripted_examples.json"
EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"
ENV = {"OPENAI_COMPATIBLE_API_KEY": "sk-job-test"}
ALPHA, BETA = "openai-compatible/alpha", "openai-compatible/beta"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[MockLLMServer, MockLLMServer]]:
    with MockLLMServer(script=SCRIPT) as alpha, MockLLMServer() as beta:
        yield alpha, beta


def _two_task_folders(root: Path) -> None:
    shutil.copytree(EXAMPLES / "hello-file", root / "tasks-a" / "hello-file")
    shutil.copytree(EXAMPLES / "csv-report", root / "tasks-b" / "csv-report")


def _records(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _forget_last(run_dir: Path, n: int) -> None:
    """As if the run had been stopped before its last `n` trials were recorded."""
    results = run_dir / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:-n]))


def _job_yaml(alpha: str, beta: str) -> str:
    return f"""\
tasks: [tasks-a, tasks-b]
models:
  - model: {ALPHA}
    base_url: {alpha}
  - model: {BETA}
    base_url: {beta}
    temperature: 0.5
agents: [tool, oracle]
provider: local
output: out
max_tokens: 1000
max_turns: 12
"""


def test_a_job_file_runs_every_model_and_agent_on_every_task_then_resumes(
    need_bwrap: None, tmp_path: Path, servers: tuple[MockLLMServer, MockLLMServer]
) -> None:
    alpha, beta = servers
    _two_task_folders(tmp_path)
    (tmp_path / "job.yaml").write_text(_job_yaml(alpha.openai_base_url, beta.openai_base_url))
    done = helios_inprocess("batch", "--config", "job.yaml", "-n", "2", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    records = _records(run_dir)
    combos = {(r["task_name"], r["model"], r["agent"]) for r in records}
    assert combos == {(t, m, a) for t in ("hello-file", "csv-report") for m in (ALPHA, BETA)
                      for a in ("tool", "oracle")}  # fmt: skip
    assert len({r["trial_id"] for r in records}) == len({r["folder"] for r in records}) == 8
    assert "001_hello-file__beta__tool" in {r["folder"] for r in records}
    # beta's tool trials went to beta's endpoint, and failed
    assert {(r["model"], r["agent"]) for r in records if not r["reward"]} == {(BETA, "tool")}
    summary = json.loads((run_dir / "batch_summary.json").read_text())
    assert summary["total_tasks"] == 2 and summary["total_trials"] == 8
    by_model, by_agent = summary["by_model"], summary["by_agent"]
    assert (by_model[ALPHA]["passed"], by_model[BETA]["passed"]) == (4, 2)
    assert by_model[BETA]["trials"] == 4 and by_model[BETA]["pass_rate"] == 0.5
    assert (by_agent["tool"]["passed"], by_agent["oracle"]["passed"]) == (2, 4)
    assert "By model and agent" in done.stdout
    # stopped midway: a resume with the job runs only the three trials not recorded
    first = {r["trial_id"] for r in records}
    _forget_last(run_dir, 3)
    forgotten = first - {r["trial_id"] for r in _records(run_dir)}
    again = helios_inprocess("batch", "--resume", str(run_dir), "--config", "job.yaml",
                             cwd=tmp_path, env=ENV)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "8 (5 already done)" in again.stdout
    assert {r["trial_id"] for r in _records(run_dir)} == first and len(_records(run_dir)) == 8
    assert {r["trial_id"] for r in _records(run_dir)[5:]} == forgotten
    # without the job, the folder does not choose the endpoints: one line says how
    alone = helios_inprocess("batch", "--resume", str(run_dir), cwd=tmp_path, env=ENV)
    assert alone.returncode == 2 and "run.json [base_url]" in alone.stderr


def test_m_a_b_is_the_job_file_and_resumes_from_the_run_alone(
    need_bwrap: None, tmp_path: Path, servers: tuple[MockLLMServer, MockLLMServer]
) -> None:
    alpha, _ = servers
    _two_task_folders(tmp_path)
    url = alpha.openai_base_url
    (tmp_path / "job.toml").write_text(
        f'tasks = ["tasks-a", "tasks-b"]\nmodels = ["{ALPHA}", "{BETA}"]\n'
        'agents = [{name = "tool"}, {name = "oracle"}]\nprovider = "local"\noutput = "job"\n'
    )
    by_job = helios_inprocess("batch", "-c", "job.toml", "--base-url", url, "-q", cwd=tmp_path,
                              env=ENV)  # fmt: skip
    assert by_job.returncode == 0, by_job.stdout + by_job.stderr
    shutil.rmtree(tmp_path / "tasks-a")  # the flags' run names one task folder per argument...
    shutil.copytree(tmp_path / "tasks-b", tmp_path / "all" / "tasks-b")
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "all" / "tasks-a" / "hello-file")
    flags = ("all", "-m", f"{ALPHA},{BETA}", "-a", "tool,oracle", "--provider", "local",
             "--base-url", url, "-o", "flags", "-q")  # fmt: skip
    by_flags = helios_inprocess("batch", *flags, cwd=tmp_path, env=ENV)
    assert by_flags.returncode == 0, by_flags.stdout + by_flags.stderr
    (job_run,) = (tmp_path / "job").iterdir()
    (flags_run,) = (tmp_path / "flags").iterdir()

    def trials(run_dir: Path) -> set[tuple[object, ...]]:
        return {(r["trial_id"], r["folder"], r["model"], r["agent"]) for r in _records(run_dir)}

    assert trials(job_run) == trials(flags_run) and len(trials(flags_run)) == 8
    # resumed from its folder alone (the endpoint named again): only what is left runs
    _forget_last(flags_run, 3)
    again = helios_inprocess("batch", "--resume", str(flags_run), "--base-url", url,
                             cwd=tmp_path, env=ENV)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "8 (5 already done)" in again.stdout
    assert trials(flags_run) == trials(job_run)


GOOD = "tasks: [t]\nmodels: [openai/gpt-4.1-mini]\n"


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("job.yaml", GOOD + "agents:\n  - name: tool\n    turns: 3\n",
         "job.yaml:5 [agents[0].turns]: unknown field"),
        ("job.yaml", GOOD + "n_attempts: many\n", "job.yaml:3 [n_attempts]: Input should be"),
        ("job.yaml", "tasks: [t]\nmodels:\n  - model: a\n    base_url: [x]\n",
         "job.yaml:4 [models[0].base_url]: Input should be a valid string"),
        ("job.yaml", "tasks: [t\n", "job.yaml:2: not valid YAML"),
        ("job.yaml", "models: [a, a]\n", "job.yaml:1 [models]: a listed twice"),
        ("job.yaml", "models:\n  - model: m\n    api_key_env: sk-123\n",
         "job.yaml:3 [models[0].api_key_env]: expected the NAME of an environment variable"),
        ("job.toml", 'tasks = ["t"]\nn_concurrent = 0\n',
         "job.toml:2 [n_concurrent]: Input should be greater than or equal to 1"),
        ("job.toml", 'tasks = ["t"]\nprovider = = 3\n', "job.toml:2: not valid TOML"),
        ("job.json", '{"tasks": ["t"],\n "provider": 3}', "job.json:2 [provider]: Input should be"),
        ("job.json", '{"tasks": }', "job.json:1: not valid JSON"),
        ("job.txt", "tasks: [t]\n", "job.txt: a job file is .yaml, .yml, .toml, .json"),
        ("job.yaml", None, "job.yaml: no such job file"),
    ],
    ids=["unknown-field", "wrong-type", "nested-type", "broken-yaml", "twice",
         "key-not-name", "toml-range", "broken-toml", "json-type", "broken-json", "suffix",
         "missing"],
)  # fmt: skip
def test_a_bad_job_file_is_one_line_naming_the_file_and_field(
    tmp_path: Path, name: str, text: str | None, where: str
) -> None:
    if text is not None:
        (tmp_path / name).write_text(text)
    done = helios_inprocess("batch", "--config", name, cwd=tmp_path, env=ENV)
    assert done.returncode == 2, done.stdout + done.stderr
    assert where in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_job_names_its_key_by_variable_and_a_missing_one_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "job.yaml").write_text("tasks: [t]\nmodels:\n  - model: openai/x\n"
                                       "    api_key_env: HELIOS_TEST_NO_SUCH_KEY\n")  # fmt: skip
    done = helios_inprocess("batch", "-c", "job.yaml", cwd=tmp_path,
                            env={"HELIOS_TEST_NO_SUCH_KEY": None})  # fmt: skip
    assert done.returncode == 2
    assert "[models[0].api_key_env]: the variable HELIOS_TEST_NO_SUCH_KEY is not set" in done.stderr


#: the trial ids a run of one model and one agent had before runs over several
#: existed (computed with the code of commit eb03e91): its resumes must still match
SINGLE_MODEL_IDS = {"a374241b36a3afc3", "5022b202fc8c08f1"}


def test_a_single_model_job_keeps_the_trial_ids_of_before(
    need_bwrap: None, tmp_path: Path, servers: tuple[MockLLMServer, MockLLMServer]
) -> None:
    _, beta = servers
    task = tmp_path / "tasks" / "echo"
    (task / "tests").mkdir(parents=True)
    toml = '[agent]\ntimeout_sec = 60.0\n[environment]\ndocker_image = "debian:bookworm-slim"\n'
    (task / "task.toml").write_text('version = "1.0"\n' + toml)
    (task / "instruction.md").write_text("Write hi to /app/hi.txt\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    (tmp_path / "job.json").write_text(json.dumps({
        "tasks": ["tasks"], "models": [{"model": "openai-compatible/scripted",
                                        "base_url": beta.openai_base_url}],
        "agents": ["tool"], "n_attempts": 2, "provider": "local", "output": "out",
        # the task leaves its network unset, which meant none before the default was
        # Harbor's (public): with that meaning, its ids are those of before
        "network_default": "none",
    }))  # fmt: skip
    done = helios_inprocess("batch", "-c", "job.json", "-q", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    records = _records(run_dir)
    assert {r["trial_id"] for r in records} == SINGLE_MODEL_IDS
    assert {r["folder"] for r in records} == {"001_echo/attempt_001", "001_echo/attempt_002"}


def test_each_model_has_its_own_endpoint_and_limiter_and_one_total_counts_them(
    servers: tuple[MockLLMServer, MockLLMServer],
) -> None:
    """The model services of a run over several models, here and in a worker's copy:
    a trial's model answers from its own endpoint; every call counts in one total."""
    import asyncio

    from helios.models.base import Message
    from helios.models.services import ModelOptions

    alpha, beta = servers
    options = ModelOptions(model=ALPHA, base_url=alpha.openai_base_url, api_key="k", others=[
        ModelOptions(model=BETA, base_url=beta.openai_base_url, api_key="k"),
    ])  # fmt: skip
    parent = options.open()
    for services in (parent, parent.detached()):
        heard: list[int] = []
        services.on_call = lambda s=services, h=heard: h.append(s.totals.calls)
        mine = services.for_model(BETA)
        assert mine is not services and mine.spec.base_url == beta.openai_base_url
        assert services.for_model(ALPHA) is services and services.for_model(None) is services
        assert mine.limiter is not services.limiter
        before = int(beta.stats["requests"])
        asyncio.run(mine.generate([Message("user", "hi")], []))
        asyncio.run(services.close())
        assert int(beta.stats["requests"]) == before + 1
        assert services.totals.calls == 1 and heard == [1]
        assert services.totals.cost_usd is None  # no price for either model
    with pytest.raises(Exception, match="no model 'openai-compatible/gamma' in this run"):
        parent.for_model("openai-compatible/gamma")


@pytest.mark.parametrize(
    ("recorded", "line"),
    [
        ({"models": "a,b"}, "[models]: expected list, got str"),
        ({"models": [{"model": 3}]}, "[models[0]]: expected {model, generation}"),
        ({"agents": [{"name": "tool", "settings": []}]}, "[agents[0]]: expected {name, settings}"),
        ({"models": [{"model": "a"}, {"model": "b"}], "model_base_urls": ["http://e.test", None]},
         "[models[0]]: this run's model a was started with its own endpoint"),
    ],
    ids=["models-type", "model-entry", "agent-entry", "endpoint"],
)  # fmt: skip
def test_a_hostile_run_over_several_models_is_one_line(
    tmp_path: Path, recorded: dict[str, object], line: str
) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"kind": "batch", **recorded}))
    done = helios_inprocess("batch", "--resume", str(run_dir), cwd=tmp_path, env=ENV)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{run_dir / 'run.json'} {line}" in done.stderr, done.stderr


def test_each_task_source_may_have_its_own_pattern(need_bwrap: None, tmp_path: Path) -> None:
    for name in ("hello-file", "csv-report", "word-count"):
        shutil.copytree(EXAMPLES / name, tmp_path / "tasks" / name)
    (tmp_path / "job.yaml").write_text(
        "tasks:\n  - {path: tasks, pattern: 'hello-*/task.toml'}\n"
        "  - {path: tasks, pattern: 'word-*/task.toml'}\n"
        "agents: [oracle]\nprovider: local\noutput: out\npattern: 'csv-*/task.toml'\n"
    )
    done = helios_inprocess("batch", "-c", "job.yaml", "-q", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert sorted(r["task_name"] for r in _records(run_dir)) == ["hello-file", "word-count"]


def test_a_job_names_and_tags_its_run_and_a_flag_wins(need_bwrap: None, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    (tmp_path / "job.yaml").write_text(
        "tasks: [tasks]\nagents: [oracle]\nprovider: local\noutput: out\n"
        "name: nightly\ntags: {suite: smoke, owner: ci}\n"
    )
    done = helios_inprocess("batch", "-c", "job.yaml", "-q", "--tag", "owner=me",
                            cwd=tmp_path, env=ENV)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert run_dir.name.startswith("nightly_")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["name"] == "nightly" and meta["tags"] == {"suite": "smoke", "owner": "me"}
    (tmp_path / "bad.yaml").write_text("tasks: [tasks]\nagents: [oracle]\ntags: {'a b': x}\n")
    bad = helios_inprocess("batch", "-c", "bad.yaml", cwd=tmp_path, env=ENV)
    assert bad.returncode == 2
    assert "bad.yaml" in bad.stderr and "[tags]" in bad.stderr, bad.stderr


def test_a_rerun_of_a_run_over_several_models_and_agents_is_the_same_run(
    need_bwrap: None, tmp_path: Path, servers: tuple[MockLLMServer, MockLLMServer]
) -> None:
    """`helios rerun` starts from the saved config: every model and agent, their
    settings, the run's name: the same trial ids and rewards (one endpoint for both
    models, which --base-url names again)."""
    alpha, _ = servers
    _two_task_folders(tmp_path)
    url = alpha.openai_base_url
    (tmp_path / "job.yaml").write_text(_job_yaml(url, url) + "name: sweep\n")
    done = helios_inprocess("batch", "--config", "job.yaml", "-q", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    again = helios_inprocess("rerun", str(run_dir), "-q", "--base-url", url, "-o", "again",
                             cwd=tmp_path, env=ENV)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    (new_dir,) = (tmp_path / "again").iterdir()
    assert new_dir.name.startswith("sweep_")

    def trials(folder: Path) -> list[tuple[object, ...]]:
        return sorted((r["trial_id"], r["model"], r["agent"], r["reward"])
                      for r in _records(folder))  # fmt: skip

    assert len(trials(run_dir)) == 8 and trials(new_dir) == trials(run_dir)
    meta = json.loads((new_dir / "run.json").read_text())
    assert meta["rerun_of"]["run_id"] == json.loads((run_dir / "run.json").read_text())["run_id"]
    # the saved config as a job file (`helios config show`) runs the same run again
    shown = helios_inprocess("config", "show", str(run_dir), cwd=tmp_path, env=ENV)
    assert shown.returncode == 0, shown.stderr
    assert "sk-job-test" not in shown.stdout
    (tmp_path / "shown.yaml").write_text(shown.stdout)
    third = helios_inprocess("batch", "-c", "shown.yaml", "-q", "-o", "third", cwd=tmp_path,
                             env=ENV)  # fmt: skip
    assert third.returncode == 0, third.stdout + third.stderr
    (third_dir,) = (tmp_path / "third").iterdir()
    assert trials(third_dir) == trials(run_dir)


def test_a_job_gives_an_agent_its_prompt_text_and_settings_and_a_model_its_routing(
    need_bwrap: None, tmp_path: Path
) -> None:
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    (tmp_path / "job.yaml").write_text(
        "tasks: [tasks]\nprovider: local\noutput: out\n"
        "models: [{model: openrouter/x/y, base_url: 'http://127.0.0.1:9/v1',"
        " openrouter_routing: 'order=a,b;sort=price'}]\n"
        "agents: [{name: oracle, system_prompt: 'Be brief.', settings: {max_turns: 3}}]\n"
    )
    done = helios_inprocess("batch", "-c", "job.yaml", "-q", cwd=tmp_path,
                            env={"OPENROUTER_API_KEY": "sk-or-test"})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["agent_settings"] == {"system_prompt": "Be brief.", "max_turns": 3}
    generation = meta["config"]["settings"]["models"]["generation"]
    assert generation["openrouter_provider"] == {"order": ["a", "b"], "sort": "price"}
    assert "sk-or-test" not in (run_dir / "run.json").read_text()


def test_a_job_sets_the_network_default_which_run_json_keeps(
    need_bwrap: None, tmp_path: Path
) -> None:
    """`network_default: none` in a job file (as `--network-default none`): recorded in
    run.json's config and identity, so a resume of the run alone keeps it."""
    shutil.copytree(EXAMPLES / "hello-file", tmp_path / "tasks" / "hello-file")
    toml = tmp_path / "tasks" / "hello-file" / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = false\n", ""))  # unset
    (tmp_path / "job.yaml").write_text(
        "tasks: [tasks]\nagents: [oracle]\nprovider: local\noutput: out\nnetwork_default: none\n"
    )
    done = helios_inprocess("batch", "-c", "job.yaml", "-q", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["config"]["settings"]["network_default"] == "none"
    # "none" is what a run made before the setting meant: its identity has no key
    assert "network_default" not in meta
    _forget_last(run_dir, 1)
    again = helios_inprocess("batch", "--resume", str(run_dir), "-q", cwd=tmp_path, env=ENV)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(_records(run_dir)) == 1
    # the public default is another run: its identity says so, and its trial's id differs
    # (the task leaves its network unset)
    public = helios_inprocess("batch", "tasks", "-a", "oracle", "--provider", "local", "-q",
                              "-o", "public", cwd=tmp_path, env=ENV)  # fmt: skip
    assert public.returncode == 0, public.stdout + public.stderr
    (public_dir,) = (tmp_path / "public").iterdir()
    assert json.loads((public_dir / "run.json").read_text())["network_default"] == "public"
    ((before,), (now,)) = ([r["trial_id"] for r in _records(d)] for d in (run_dir, public_dir))
    assert before != now
    bad = helios_inprocess("run", "tasks/hello-file", "-a", "oracle", "--network-default",
                           "closed", cwd=tmp_path, env=ENV)  # fmt: skip
    assert bad.returncode == 2 and "--network-default" in bad.stderr, bad.stderr
