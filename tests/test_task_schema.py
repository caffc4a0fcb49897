"""Harbor's task.toml schema 1.0–1.4: what loads, what is refused with one line,
what is named unsupported or unknown (no sandbox needed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from helios.agents.computer.agent import ComputerAgent
from helios.agents.installed.claude_code import ClaudeCodeAgent
from helios.agents.nop import NopAgent
from helios.agents.oracle import OracleAgent
from helios.agents.registry import agent_class
from helios.agents.tool_agent import ToolAgent
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.environments.null import NullEnvironment
from helios.errors import InputError, TaskFormatError
from helios.tasks.features import agent_limits, features_used, unsupported
from helios.tasks.phases import plan_steps
from helios.tasks.plan import build_specs, load_tasks, refuse_for_agents
from helios.tasks.rewards import combine, meets_min_reward
from helios.tasks.runner import ParallelRunner
from helios.tasks.summary import BatchResult, UnsupportedTask, build_batch_result, summary_document
from helios.tasks.task import load_task

from .harbor_tasks import step, task, write

FULL_TOML = """
schema_version = "1.4"
source = "harbor"
multi_step_reward_strategy = "final"
artifacts = ["/app/out.txt", { source = "/app/dir", destination = "d", exclude = ["*.o"] }]
[task]
name = "helios/full"
version = "1.0.0"
description = "every field"
authors = [{ name = "A", email = "a@example.com" }]
keywords = ["x"]
[metadata]
anything = { goes = ["here"] }
[agent]
timeout_sec = 30
user = "agent"
network_mode = "no-network"
[verifier]
timeout_sec = 40
user = 1000
env = { V = "1" }
environment_mode = "separate"
network_mode = "no-network"
[verifier.environment]
docker_image = "debian:bookworm-slim"
cpus = 2
memory_mb = 1024
network_mode = "no-network"
[solution.env]
S = "1"
[environment]
build_timeout_sec = 100
cpus = 1
memory_mb = 512
storage_mb = 1024
gpus = 0
network_mode = "no-network"
workdir = "/work"
env = { E = "${NOT_SET:-fallback}" }
[environment.healthcheck]
command = "true"
interval_sec = 1
timeout_sec = 2
start_period_sec = 3
start_interval_sec = 0.5
retries = 4
[[steps]]
name = "one"
min_reward = { reward = 1.0, style = 0.5 }
artifacts = ["/app/step.txt"]
[steps.agent]
timeout_sec = 10
[steps.verifier]
timeout_sec = 20
[steps.healthcheck]
command = "test -f /app/ready"
"""


def _full(tmp_path: Path) -> Path:
    folder = task(tmp_path, "full", FULL_TOML, solve=None, test=None, instruction=None)
    step(folder, "one", solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    return folder


def test_every_harbor_field_loads_and_resolves(tmp_path: Path) -> None:
    loaded = load_task(_full(tmp_path))
    config = loaded.config
    assert config.schema_version == "1.4" and config.task is not None
    assert config.task.authors[0].email == "a@example.com"
    assert loaded.unknown_keys == ()
    assert loaded.workdir == "/work"
    spec = loaded.sandbox_spec()
    assert spec.network is False and spec.env == {"E": "fallback"}
    assert spec.healthcheck is not None and spec.healthcheck.retries == 4
    assert spec.healthcheck.start_interval == 0.5
    (plan,) = plan_steps(loaded)
    assert (plan.name, plan.agent_timeout, plan.agent_user) == ("one", 10, "agent")
    assert plan.verifier.timeout == 20 and plan.verifier.user == 1000
    assert plan.verifier.env == {"V": "1"} and plan.solution_env == {"S": "1"}
    assert plan.verifier.sandbox is not None and plan.verifier.sandbox.cpus == 2
    assert plan.verifier.sandbox.image == "debian:bookworm-slim"
    assert [a.source for a in plan.artifacts] == ["/app/out.txt", "/app/dir", "/app/step.txt"]
    assert plan.min_reward == {"reward": 1.0, "style": 0.5}
    assert plan.healthcheck is not None and plan.healthcheck.command == "test -f /app/ready"
    used = set(features_used(loaded))
    assert {"multi-step", "agent user", "separate verifier", "artifacts", "healthcheck"} <= used
    assert unsupported(loaded, DockerEnvironment) == []


def test_unknown_keys_are_named_metadata_is_free(tmp_path: Path) -> None:
    toml = """
    version = "1.0"
    colour = "blue"
    [agent]
    usr = "agent"
    [metadata]
    whatever = 1
    [environment]
    networkmode = "public"
    """
    loaded = load_task(task(tmp_path, "typo", toml))
    assert loaded.config.schema_version == "1.0"
    assert sorted(loaded.unknown_keys) == ["agent.usr", "colour", "environment.networkmode"]


def test_one_unknown_keys_warning_per_batch(tmp_path: Path) -> None:
    for index in range(3):
        task(tmp_path, f"t{index}", f'[agent]\nusr = "x"\n[environment]\nodd{index % 2} = 1\n')
    loaded = load_tasks(sorted(tmp_path.iterdir()))
    assert loaded.unknown_keys == {"agent.usr": 3, "environment.odd0": 2, "environment.odd1": 1}
    buffer = io.StringIO()
    runner = ParallelRunner(
        tmp_path, agent="oracle", provider="local", output_dir=tmp_path / "out",
        console=Console(file=buffer, width=300),
    )  # fmt: skip
    runner._plan()
    warnings = [line for line in buffer.getvalue().splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert "agent.usr (3 tasks)" in warnings[0] and "environment.odd1 (1 task)" in warnings[0]


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ("[environment]\ngpus = 1\n", "environment.gpus"),
        ('[environment]\ngpu_types = ["H100"]\n', "environment.gpu_types"),
        ('[environment.tpu]\ntype = "v6e"\ntopology = "2x4"\n', "environment.tpu"),
        ('[environment]\nos = "Windows"\n', "environment.os"),
        ('[environment.env]\nKEY = "${OPENAI_API_KEY}"\n', "environment.env.KEY"),
        ('schema_version = "2.0"\n', "schema_version"),
    ],
)
def test_unsupported_fields_are_named(tmp_path: Path, toml: str, field: str) -> None:
    folder = task(tmp_path, "needs", toml)
    loaded = load_tasks([folder], DockerEnvironment)
    assert loaded.tasks == [] and loaded.invalid == []
    (skipped,) = loaded.unsupported
    assert f"unsupported: {field} (" in skipped.error
    assert "\n" not in skipped.error and str(folder) in skipped.error


def test_compose_runs_on_docker_and_is_unsupported_on_local(tmp_path: Path) -> None:
    from helios.environments.local import LocalEnvironment

    folder = task(tmp_path, "compose", "", dockerfile=None)
    write(folder / "environment" / "docker-compose.yaml", "services:\n  main: {}\n")
    loaded = load_tasks([folder], DockerEnvironment)
    assert loaded.invalid == [] and loaded.unsupported == [] and len(loaded.tasks) == 1
    compose = folder / "environment" / "docker-compose.yaml"
    assert loaded.tasks[0].sandbox_spec().compose_file == compose
    local = load_tasks([folder], LocalEnvironment)
    assert "unsupported: environment/docker-compose.yaml" in local.unsupported[0].error


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('[[verifier.collect]]\ncommand = "dump"\nservice = "db"\n', "verifier.collect"),
        ('artifacts = [{ source = "/log", service = "api" }]\n', "artifacts[0].service"),
    ],
)
def test_compose_fields_run_on_docker_only(tmp_path: Path, toml: str, field: str) -> None:
    from helios.environments.local import LocalEnvironment

    folder = task(tmp_path, "needs", toml)
    assert len(load_tasks([folder], DockerEnvironment).tasks) == 1
    (skipped,) = load_tasks([folder], LocalEnvironment).unsupported
    assert f"unsupported: {field} (the local provider cannot run compose" in skipped.error


def test_a_compose_yml_is_material_not_a_compose_task(tmp_path: Path) -> None:
    # Harbor's docker provider reads environment/docker-compose.yaml only
    folder = task(tmp_path, "material", "")
    write(folder / "environment" / "docker-compose.yml", "services:\n  db: {}\n")
    loaded = load_tasks([folder], DockerEnvironment)
    assert loaded.unsupported == [] and loaded.tasks[0].sandbox_spec().compose_file is None


@pytest.mark.parametrize("name", ["docker-compose.yml", "compose.yaml", "compose.yml"])
def test_other_compose_names_are_material(tmp_path: Path, name: str) -> None:
    """Harbor's docker provider reads only environment/docker-compose.yaml: a task
    that ships another compose name next to its Dockerfile is a plain task."""
    folder = task(tmp_path, "material", "")
    write(folder / "environment" / name, "services:\n  main: {}\n")
    loaded = load_tasks([folder], DockerEnvironment)
    assert loaded.unsupported == [] and loaded.invalid == []
    assert [t.name for t in loaded.tasks] == ["material"]
    # without a Dockerfile it is no compose task either: the message names Harbor's file
    bare = task(tmp_path, "bare", "", dockerfile=None)
    write(bare / "environment" / name, "services:\n  main: {}\n")
    (invalid,) = load_tasks([bare]).invalid
    assert "environment/Dockerfile" in invalid.error


def test_skills_and_mcp_limit_only_the_agents_that_cannot_take_them(tmp_path: Path) -> None:
    toml = ('[environment]\nskills_dir = "/skills"\n'
            '[[environment.mcp_servers]]\nname = "m"\nurl = "http://x/sse"\n')  # fmt: skip
    folder = task(tmp_path, "offers", toml)
    loaded = load_tasks([folder], DockerEnvironment)
    assert loaded.unsupported == [] and [t.name for t in loaded.tasks] == ["offers"]
    (offers,) = loaded.tasks
    assert {"skills_dir", "mcp_servers"} <= set(features_used(offers))
    assert agent_limits(offers, OracleAgent) == agent_limits(offers, NopAgent) == []
    # the tool agent and Claude Code take skills and MCP servers over stdio and HTTP;
    # an ACP agent takes stdio MCP servers, not an HTTP one (nor skills)
    assert agent_limits(offers, ToolAgent) == agent_limits(offers, ClaudeCodeAgent) == []
    acp = "acp:claude-code"
    limits = agent_limits(offers, agent_class(acp))
    assert [u.field for u in limits] == ["environment.skills_dir",
                                         "environment.mcp_servers[0].url"]  # fmt: skip
    assert f"the {acp} agent reaches MCP servers over stdio only" in str(limits[1])
    # an agent that takes neither: both named
    both = agent_limits(offers, ComputerAgent)
    assert [u.field for u in both] == ["environment.skills_dir", "environment.mcp_servers"]
    assert "the computer agent takes no skills" in str(both[0])
    # planned per agent: the oracle runs it, the ACP agent's trials are refused
    specs = build_specs(loaded.tasks, n_attempts=1, agent="oracle", agent_settings={},
                        model=None, provider="docker")  # fmt: skip
    specs += build_specs(loaded.tasks, n_attempts=1, agent=acp, agent_settings={},
                         model="anthropic/claude-sonnet-4-5", provider="docker")  # fmt: skip
    kept, refused = refuse_for_agents(specs, f"oracle, {acp}")
    assert [s.agent for s in kept] == ["oracle"]
    (skipped,) = refused
    assert f"environment.mcp_servers[0].url (the {acp} agent reaches" in skipped.error
    assert (skipped.agent, skipped.trials) == (acp, 1)
    # a run's plan: the oracle's has the task; the ACP agent's has nothing to run
    buffer = io.StringIO()
    oracle = ParallelRunner(folder, agent="oracle", provider="local",
                            output_dir=tmp_path / "out", console=Console(file=buffer))  # fmt: skip
    assert len(oracle._plan()) == 1 and oracle.unsupported == []
    other = ParallelRunner(folder, agent=acp, model="anthropic/claude-sonnet-4-5",
                           provider="local", output_dir=tmp_path / "out",
                           console=Console(file=buffer))  # fmt: skip
    with pytest.raises(InputError, match=f"the {acp} agent reaches MCP servers over stdio"):
        other._plan()


def test_limits_that_depend_on_the_provider(tmp_path: Path) -> None:
    switch = load_task(task(tmp_path, "switch", '[agent]\nnetwork_mode = "no-network"\n'))
    (docker_limit,) = unsupported(switch, DockerEnvironment)
    assert docker_limit.field == "agent.network_mode"
    assert unsupported(switch, LocalEnvironment) == []
    same = load_task(task(tmp_path, "same", '[agent]\nnetwork_mode = "public"\n'))
    assert unsupported(same, DockerEnvironment) == []  # no change from the baseline: a no-op
    # with the run's default "none", the same phases judge the other way
    assert unsupported(load_task(same.path, network_default=False), DockerEnvironment)
    assert unsupported(load_task(switch.path, network_default=False), DockerEnvironment) == []
    # Harbor's npm-dynamic-e-v-diff: environment unset, verifier no-network: a switch
    ev = load_task(task(tmp_path, "ev", '[verifier]\nnetwork_mode = "no-network"\n'))
    assert [u.field for u in unsupported(ev, DockerEnvironment)] == ["verifier.network_mode"]
    assert plan_steps(ev)[0].verifier.network is False
    user = load_task(task(tmp_path, "user", '[agent]\nuser = "agent"\n'))
    assert [u.field for u in unsupported(user, NullEnvironment)] == ["agent.user"]
    assert unsupported(user, DockerEnvironment) == unsupported(user, LocalEnvironment) == []


@pytest.mark.parametrize(
    ("toml", "field", "words"),
    [
        ('[agent]\nuser = "a b; rm -rf /"\n', "agent.user", "user name or a uid"),
        ("[verifier]\nuser = true\n", "verifier.user", "user name or a uid"),
        ('[environment]\nworkdir = "relative"\n', "environment.workdir", "absolute"),
        ('[environment]\nworkdir = "/a/../../b"\n', "environment.workdir", ".."),
        (
            '[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 2\n',
            "verifier",
            "conflicts",
        ),
        ('artifacts = [{ source = "/x", destination = "/abs" }]\n', "artifacts", "relative"),
        (
            'artifacts = [{ source = "/x", destination = "manifest.json" }]\n',
            "artifacts",
            "reserved",
        ),
        ('[environment]\nmemory = "lots"\n', "environment", "invalid size"),
        ('[[steps]]\nname = "../up"\n', "steps.name", "folder name"),
        ('[[steps]]\nname = "a"\n[[steps]]\nname = "A"\n', "", "two steps are named"),
    ],
)
def test_bad_fields_get_one_line(tmp_path: Path, toml: str, field: str, words: str) -> None:
    folder = task(tmp_path, "bad", toml)
    with pytest.raises(TaskFormatError) as info:
        load_task(folder)
    message = str(info.value)
    assert words in message and "\n" not in message and str(folder / "task.toml") in message
    assert (info.value.field or "").startswith(field)


def test_layout_of_steps_and_separate_verifiers(tmp_path: Path) -> None:
    no_folder = task(tmp_path, "nofolder", '[[steps]]\nname = "one"\n', instruction=None)
    with pytest.raises(TaskFormatError, match="steps/one/"):
        load_task(no_folder)
    no_test = task(tmp_path, "notest", '[[steps]]\nname = "one"\n', test=None)
    step(no_test, "one", solve=None, test=None)
    with pytest.raises(TaskFormatError, match=r"test\.sh"):
        load_task(no_test)
    shared_test = task(tmp_path, "fallback", '[[steps]]\nname = "one"\n', instruction=None)
    step(shared_test, "one", solve=None, test=None)
    assert load_task(shared_test).instruction == ""  # the task's tests/test.sh serves the step
    no_image = task(tmp_path, "noimage", "[verifier.environment]\ncpus = 2\n")
    with pytest.raises(TaskFormatError, match="docker_image or tests/Dockerfile"):
        load_task(no_image)
    write(no_image / "tests" / "Dockerfile", "FROM debian:bookworm-slim\nCOPY . /tests/\n")
    built = load_task(no_image)
    verifier = plan_steps(built)[0].verifier
    assert verifier.sandbox is not None and verifier.sandbox.build_context == built.tests_dir
    assert verifier.sandbox.context_hash == built.tests_hashes["tests"]


def test_legacy_spellings_and_network_baseline(tmp_path: Path) -> None:
    old = load_task(task(tmp_path, "old", '[environment]\nmemory = "4G"\nstorage = "10G"\n'))
    assert (old.config.environment.memory_mb, old.config.environment.storage_mb) == (4096, 10240)
    assert old.sandbox_spec().network is True  # unset: public, as in Harbor
    closed = load_task(old.path, network_default=False)  # a run's `--network-default none`
    assert closed.sandbox_spec().network is False and closed.checksum == old.checksum
    assert load_task(task(tmp_path, "off", "[environment]\nallow_internet = false\n"),
                     network_default=True).sandbox_spec().network is False  # fmt: skip
    legacy = load_task(task(tmp_path, "legacy", "[environment]\nallow_internet = true\n"))
    assert legacy.sandbox_spec().network is True
    both = '[environment]\nallow_internet = true\nnetwork_mode = "no-network"\n'
    assert load_task(task(tmp_path, "both", both)).sandbox_spec().network is False


def test_host_variables_never_reach_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST_ONLY", "host-value")
    toml = '[environment.env]\nA = "${HOST_ONLY:-default}"\nB = "x-${HOST_ONLY:-}-y"\n'
    loaded = load_task(task(tmp_path, "tmpl", toml))
    assert loaded.sandbox_spec().env == {"A": "default", "B": "x--y"}
    assert unsupported(loaded) == []


def test_min_reward_gates_and_reward_strategies() -> None:
    assert meets_min_reward({"reward": 1.0}, 1.0)
    assert not meets_min_reward({"reward": 0.9}, 1.0)
    assert not meets_min_reward({"score": 1.0}, 0.5)  # a missing key is -inf
    assert not meets_min_reward(None, 0.0)  # no result at all
    assert meets_min_reward(None, None)
    assert meets_min_reward({"a": 0.8, "b": 0.5}, {"a": 0.8, "b": 0.5})
    assert not meets_min_reward({"a": 0.8}, {"a": 0.5, "b": 0.1})
    steps = [{"reward": 1.0, "x": 1.0}, None, {"reward": 0.0}]
    assert combine(steps, "mean") == {"reward": 0.5, "x": 0.5}
    assert combine(steps, "final") == {"reward": 0.0}
    assert combine([{"reward": 1.0}, None], "final") is None
    assert combine([None], "mean") is None and combine([], "mean") is None


def test_trial_ids_of_plain_tasks_are_unchanged(tmp_path: Path) -> None:
    # The values the code before schema 1.1 support gave for this exact task.
    folder = tmp_path / "tasks" / "stable"
    write(folder / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n")
    write(
        folder / "task.toml",
        'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 60\n'
        "[environment]\ncpus = 1\nmemory_mb = 256\n",
    )
    write(folder / "instruction.md", "Do the thing.\n")
    write(folder / "tests" / "test.sh", "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    write(folder / "solution" / "solve.sh", "#!/bin/sh\ntrue\n")
    tasks = load_tasks([folder]).tasks

    def ids_with(network_default: str) -> dict[str, list[str]]:
        made = {
            agent: build_specs(tasks, n_attempts=2, agent=agent, agent_settings={}, model=None,
                               provider="docker", network_default=network_default)
            for agent in ("oracle", "nop")
        }  # fmt: skip
        return {agent: [s.trial_id for s in specs] for agent, specs in made.items()}

    # The task leaves its network unset, which meant none then: with that meaning
    # (`--network-default none`) its ids are those of before; with Harbor's (public)
    # the task means something else, and its ids differ.
    assert ids_with("none") == {
        "oracle": ["9d78b49d54bc5ed8", "ddcb5dc412e5e802"],
        "nop": ["5b07a1e9f069fc92", "d4a356616a98bbf0"],
    }
    public, before = ids_with("public"), ids_with("none")
    assert not {*public["oracle"], *public["nop"]} & {*before["oracle"], *before["nop"]}


def test_unsupported_tasks_are_counted_apart() -> None:
    skipped = UnsupportedTask("/t/gpu", ["unsupported: environment.gpus (no GPU scheduling)"])
    batch = build_batch_result(
        [], n_attempts=1, duration=0.0, invalid=[], output_dir=None, model=None, agent="oracle",
        planned=0, unsupported=[skipped], unknown_keys={"agent.usr": 2},
    )  # fmt: skip
    document = summary_document(batch)
    assert document["invalid"] == 0 and document["unsupported"] == 1
    assert document["unsupported_tasks"][0]["reasons"] == skipped.reasons
    assert document["unknown_keys"] == {"agent.usr": 2}
    assert batch.gated_pass_rate == 0.0


def test_a_task_refused_for_one_agent_is_counted_once_and_its_refused_trials_as_failed() -> None:
    # two tasks × agents oracle and tool × 1 attempt; "offers" is refused for the tool
    # agent only: 3 trials ran (2 passed), 1 was refused
    refused = UnsupportedTask(path="/t/offers", reasons=["unsupported: x"], agent="tool", trials=1)
    batch = BatchResult(
        total_tasks=3, passed=2, failed=1, errored=0, mean_reward=2 / 3, duration=1.0,
        n_attempts=1, n_unique_tasks=2, pass_at_k_table={}, results=[],
        unsupported=[refused], combinations=2,
    )  # fmt: skip
    assert batch.n_tasks == 2  # not 3: the refused task also ran, with the oracle
    assert batch.pass_rate == pytest.approx(2 / 4)  # the refused trial counts as failed
    assert summary_document(batch)["unsupported_tasks"] == [
        {"path": "/t/offers", "reasons": ["unsupported: x"], "agent": "tool"}
    ]
    # a task no agent can run is one task, whatever the number of agents refusing it
    whole = UnsupportedTask(path="/t/none", reasons=["unsupported: y"])
    batch.unsupported.append(whole)
    assert batch.n_tasks == 3 and batch.pass_rate == pytest.approx(2 / 6)
