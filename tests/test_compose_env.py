"""Compose environments on docker (`environments.docker.compose`): a Harbor-format
task whose `environment/docker-compose.yaml` adds sidecars to `main`, one compose
project per trial, its services gone at the trial's end (and after a kill -9, by
`helios cleanup`), a sidecar that never becomes healthy named in the error, and
the local provider's one-line refusal."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.docker.compose import FOLDER_PREFIX, ComposeProject, project_name
from helios.environments.local import LocalEnvironment
from helios.environments.spec import SandboxSpec
from helios.errors import UnsupportedFeature
from helios.tasks.features import unsupported
from helios.tasks.task import load_task

from .conftest import _need, helios_cmd
from .harbor_tasks import only_record, run_tasks, write

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "harbor" / "sidecar-artifacts"


@pytest.fixture(scope="session")
def compose_available(docker_available: bool) -> bool:
    if not docker_available:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.fixture
def need_compose(need_docker: None, compose_available: bool) -> None:
    """Docker's compose plugin too (scripts/setup-system.sh installs it)."""
    _need("HELIOS_REQUIRE_DOCKER", compose_available, "docker compose (the v2 plugin)")


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60).stdout


def _left(run_id: str) -> list[str]:
    """Containers, networks and volumes of one run still in the engine."""
    label = f"label=helios.run={run_id}"
    return [
        *_docker("ps", "-aq", "--filter", label).split(),
        *_docker("network", "ls", "-q", "--filter", label).split(),
        *_docker("volume", "ls", "-q", "--filter", label).split(),
    ]


def _copy(tmp_path: Path, name: str = "sidecar-artifacts") -> Path:
    target = tmp_path / "tasks" / name
    shutil.copytree(FIXTURE, target)
    return target


def _run_id(out: Path) -> str:
    return str(json.loads(next(out.glob("*/run.json")).read_text())["run_id"])


@pytest.mark.usefixtures("need_compose")
def test_two_trials_of_a_sidecar_task_pass_each_with_its_own_sidecar(tmp_path: Path) -> None:
    # The sidecar counts the GET /hello it served; test.sh wants 1: two trials
    # sharing one sidecar would give one of them 2.
    _copy(tmp_path)
    out = tmp_path / "out"
    batch = run_tasks(tmp_path / "tasks", out, "docker", n_attempts=2)
    assert batch.output_dir is not None
    records = [json.loads((batch.output_dir / r.folder / "result.json").read_text())
               for r in batch.results]  # fmt: skip
    assert [r["reward"] for r in records] == [1.0, 1.0], [r["error"] for r in records]
    for record in records:
        trial = batch.output_dir / record["folder"]
        # [[verifier.collect]] ran in the sidecar, and its file was copied out of it
        assert "exit 0" in (trial / "verifier" / "collect.log").read_text()
        assert (trial / "artifacts" / "api" / "requests.log").read_text() == "GET /hello HTTP/1.0\n"
    assert _left(_run_id(out)) == []


@pytest.mark.usefixtures("need_compose")
def test_a_sidecar_never_healthy_is_an_infrastructure_error_naming_it(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "sick-sidecar")
    compose = folder / "environment" / "docker-compose.yaml"
    text = compose.read_text()
    probe = text[text.index("      test:") : text.index("      interval:")]
    compose.write_text(text.replace(probe, '      test: ["CMD", "false"]\n')
                       .replace("retries: 30", "retries: 1"))  # fmt: skip
    out = tmp_path / "out"
    started = time.monotonic()
    record = only_record(run_tasks(tmp_path / "tasks", out, "docker"))
    assert time.monotonic() - started < 60
    assert record["status"] == "error", record
    assert record["error"]["type"] == "EnvironmentUnhealthy", record["error"]
    assert record["error"]["infrastructure"] is True, record["error"]
    assert "'api'" in record["error"]["message"], record["error"]["message"]
    assert record["turns"] == 0
    assert _left(_run_id(out)) == []


def _batch_with_a_running_project(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`helios batch` of a sidecar task whose oracle sleeps, once its two services run."""
    folder = _copy(tmp_path, "slow-sidecar")
    write(folder / "solution" / "solve.sh", "#!/bin/bash\nsleep 300\n", 0o755)
    out = tmp_path / "out"
    batch = subprocess.Popen(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "docker", "--agent",
                   "oracle", "-q", "-o", str(out)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not list(out.glob("*/run.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        run_id = _run_id(out)
        label = f"label=helios.run={run_id}"
        while time.monotonic() < deadline:
            if len(_docker("ps", "-q", "--filter", label).split()) == 2:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the compose project never came up")
        assert _docker("network", "ls", "-q", "--filter", label).split()
    except BaseException:
        batch.kill()
        batch.wait(timeout=30)
        raise
    return batch, run_id


@pytest.mark.usefixtures("need_compose")
def test_ctrl_c_removes_the_compose_project(tmp_path: Path) -> None:
    batch, run_id = _batch_with_a_running_project(tmp_path)
    batch.send_signal(signal.SIGINT)
    assert batch.wait(timeout=90) == 130
    assert _left(run_id) == []


@pytest.mark.usefixtures("need_compose")
def test_kill_9_leaves_no_compose_project_once_cleanup_ran(tmp_path: Path) -> None:
    batch, run_id = _batch_with_a_running_project(tmp_path)
    batch.send_signal(signal.SIGKILL)
    batch.wait(timeout=30)
    assert _left(run_id)  # nothing removed them: their Helios is dead
    cleanup = subprocess.run(helios_cmd("cleanup"), capture_output=True, text=True, timeout=120)
    assert cleanup.returncode == 0, cleanup.stderr
    assert _left(run_id) == []
    # and no file of an `up` the kill cut short
    project = project_name(run_id, "x", "x").rsplit("-x-x", 1)[0]
    assert list(Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}{project}-*")) == []


def test_the_local_provider_says_in_one_line_it_cannot_run_compose(tmp_path: Path) -> None:
    task = load_task(_copy(tmp_path))
    assert unsupported(task) == []  # docker runs it
    (found,) = unsupported(task, LocalEnvironment)
    assert str(found) == (
        "unsupported: environment/docker-compose.yaml (the local provider cannot run compose "
        "services; docker can)"
    )


def _project(tmp_path: Path, network: bool = False) -> ComposeProject:
    compose = write(tmp_path / "environment" / "docker-compose.yaml", "services: {}\n")
    spec = SandboxSpec(build_context=compose.parent, context_hash="abc123def4567890",
                       network=network, compose_file=compose)  # fmt: skip
    return ComposeProject(spec, name="helios-r-t-i", labels={"helios.run": "r"}, image="img:1")


def test_the_merged_model_gets_what_a_task_may_not_change(tmp_path: Path) -> None:
    model: dict[str, Any] = {
        "name": "theirs",
        "services": {
            "main": {"image": "theirs", "build": {"context": "."}, "command": ["serve"],
                     "ports": ["80:80"], "depends_on": {"db": {"condition": "service_started"}}},
            "db": {"image": "db", "container_name": "db", "healthcheck": {"test": ["true"]}},
            "api": {"build": {"context": "/x/api"}, "healthcheck": {"test": ["true"]}},
            "worker": {"image": "w", "depends_on": {"main": {"condition": "service_started"}}},
        },
        "networks": {"back": {"name": "fixed"}},
        "volumes": {"data": {}},
    }  # fmt: skip
    project = _project(tmp_path)
    edited = project.edit(model)
    assert (project.main_command, project.main_entrypoint) == (["serve"], None)
    main, services = edited["services"]["main"], edited["services"]
    assert edited["name"] == "helios-r-t-i"
    assert main["image"] == "img:1" and "build" not in main and "command" not in main
    assert main["entrypoint"][:2] == ["sh", "-c"] and "ports" not in main
    # the task's own condition stays; the other sidecars come first, healthy where they can
    assert main["depends_on"] == {
        "db": {"condition": "service_started"},
        "api": {"condition": "service_healthy", "required": True},
    }  # worker needs main: no cycle
    assert "container_name" not in services["db"]
    assert services["api"]["image"] == "helios-env:compose-abc123def456-api"
    assert all(s["labels"]["helios.run"] == "r" for s in services.values())
    assert edited["networks"]["default"]["internal"] is True
    assert "name" not in edited["networks"]["back"] and edited["networks"]["back"]["internal"]
    assert edited["volumes"]["data"]["labels"] == {"helios.run": "r"}
    public = _project(tmp_path, network=True).edit({"services": {"main": {}}})
    assert "internal" not in public["networks"]["default"]
    # no Dockerfile and no docker_image: the file's own build of main, named once
    built = ComposeProject(_project(tmp_path).spec, name="p", labels={}, image=None).edit(
        {"services": {"main": {"build": {"context": "/x"}}}}
    )
    assert built["services"]["main"]["image"] == "helios-env:compose-abc123def456-main"


@pytest.mark.parametrize(
    ("services", "said"),
    [
        ({"main": {"volumes": [{"type": "volume", "target": "/logs/verifier"}]}}, "mounts"),
        ({"main": {"volumes": [{"type": "bind", "target": "/"}]}}, "mounts"),
        ({"main": {}, "spy": {"pid": "service:main"}}, "services.spy shares"),
        ({"main": {}, "spy": {"volumes_from": ["main:ro"]}}, "services.spy shares"),
        ({"api": {}}, "no service 'main'"),
    ],
)
def test_a_model_that_reaches_the_reward_is_refused(
    tmp_path: Path, services: dict[str, Any], said: str
) -> None:
    with pytest.raises(UnsupportedFeature, match=said):
        _project(tmp_path).edit({"services": services})
    # a service named like main but not main is no share
    _project(tmp_path).edit({"services": {"main": {}, "b": {"pid": "service:maintenance"}}})


@pytest.mark.usefixtures("need_compose")
def test_a_separate_verifier_gets_its_own_sidecars(tmp_path: Path) -> None:
    # tests/docker-compose.yaml adds a sidecar to the verifier's sandbox only
    folder = tmp_path / "tasks" / "separate"
    write(folder / "task.toml", """
        schema_version = "1.4"
        [verifier]
        timeout_sec = 60
        environment_mode = "separate"
        [environment]
        memory_mb = 256
    """)  # fmt: skip
    write(folder / "instruction.md", "Nothing to do.\n")
    write(folder / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n")
    write(folder / "solution" / "solve.sh", "#!/bin/bash\ntrue\n", 0o755)
    tests = folder / "tests"
    write(tests / "Dockerfile", "FROM debian:bookworm-slim\nCOPY test.sh /tests/test.sh\n")
    shutil.copy(FIXTURE / "environment" / "api" / "server.pl", tests / "server.pl")
    compose = (FIXTURE / "environment" / "docker-compose.yaml").read_text()
    write(tests / "docker-compose.yaml", compose.replace("./api/server.pl", "./server.pl"))
    write(tests / "test.sh", """\
        #!/bin/bash
        exec 3<>/dev/tcp/api/8000 && printf 'GET /hello HTTP/1.0\\r\\n\\r\\n' >&3
        if tail -n 1 <&3 | grep -q 'hello from api'; then echo 1; else echo 0; fi \\
          > /logs/verifier/reward.txt
    """, 0o755)  # fmt: skip
    out = tmp_path / "out"
    record = only_record(run_tasks(tmp_path / "tasks", out, "docker"))
    assert record["reward"] == 1.0, record
    assert _left(_run_id(out)) == []


@pytest.mark.usefixtures("need_compose")
def test_no_host_variable_reaches_a_compose_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-of-the-host")
    project = _project(tmp_path)
    write(project.task_file, """
        services:
          main:
            image: debian:bookworm-slim
            environment:
              KEY: ${OPENAI_API_KEY:-none}
    """)  # fmt: skip
    code, out, err = asyncio.run(
        project._compose("config", "--format", "json", files=(project.task_file,))
    )
    assert code == 0, err
    assert json.loads(out)["services"]["main"]["environment"] == {"KEY": "none"}


def test_main_gets_storage_the_exchange_folder_and_the_outside_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `docker run` gives a sandbox: `--storage-opt size=` (where the engine takes
    it), the exchange folder of `--watch`, and HELIOS_DOCKER_NETWORK's network."""
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", "their-net")
    compose = write(tmp_path / "environment" / "docker-compose.yaml", "services: {}\n")
    spec = SandboxSpec(build_context=compose.parent, context_hash="abc123def4567890",
                       network=True, compose_file=compose, storage_mb=512)  # fmt: skip
    project = ComposeProject(spec, name="p", labels={}, image="img:1", storage=True,
                             exchange=tmp_path / "x")  # fmt: skip
    model = {"services": {"main": {"storage_opt": {"size": "9g"}}, "db": {"image": "db"}}}
    edited = project.edit(model)
    main = edited["services"]["main"]
    assert main["storage_opt"] == {"size": "512m"}
    assert main["volumes"] == [{"type": "bind", "source": str(tmp_path / "x"),
                                "target": "/run/helios"}]  # fmt: skip
    assert main["networks"] == {"default": None, "helios-outside": None}
    assert edited["networks"]["helios-outside"] == {"name": "their-net", "external": True}
    assert "networks" not in edited["services"]["db"]  # sidecars stay on their own
    assert "storage_opt" not in ComposeProject(spec, name="p", labels={}, image="i").edit(
        {"services": {"main": {"storage_opt": {"size": "9g"}}}}
    )["services"]["main"]  # the engine refused it: none, not the task's own
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", "none")
    shut = project.edit({"services": {"main": {}}})
    assert shut["networks"]["default"]["internal"] is True
    assert "networks" not in shut["services"]["main"]
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", "host")
    with pytest.raises(UnsupportedFeature, match="HELIOS_DOCKER_NETWORK=host cannot apply"):
        project.edit({"services": {"main": {}}})


@pytest.mark.parametrize(
    ("service", "said"),
    [
        ({"privileged": True}, "services.api.privileged: true is refused"),
        ({"network_mode": "host"}, "services.api.network_mode: host"),
        ({"pid": "host"}, "services.api.pid: host"),
        ({"cap_add": ["NET_ADMIN", "CAP_SYS_ADMIN"]}, "services.api.cap_add: SYS_ADMIN"),
        ({"devices": [{"source": "/dev/kvm", "target": "/dev/kvm"}]}, "services.api.devices"),
        ({"build": {"context": ".", "network": "host"}}, "services.api.build.network: host"),
        ({"security_opt": ["seccomp:unconfined"]}, "security_opt: seccomp:unconfined"),
        ({"volumes": [{"type": "bind", "source": "/var/run/docker.sock",
                       "target": "/var/run/docker.sock"}]},
         "services.api.volumes mounts the host's /var/run/docker.sock"),
        ({"volumes": [{"type": "bind", "source": "{task}/../elsewhere", "target": "/x"}]},
         "services.api.volumes mounts the host's"),
    ],
)  # fmt: skip
def test_a_service_given_the_host_is_refused_in_one_line(
    tmp_path: Path, service: dict[str, Any], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HELIOS_DOCKER_BUILD_NETWORK", raising=False)
    project = _project(tmp_path)
    text = json.dumps(service).replace("{task}", str(tmp_path))
    with pytest.raises(UnsupportedFeature, match=re.escape(said)) as caught:
        project.edit({"services": {"main": {}, "api": json.loads(text)}})
    assert "\n" not in str(caught.value) and str(project.task_file) in str(caught.value)
    # what stays in the sandbox is taken: the task's own files, NET_ADMIN, named volumes
    project.edit({"services": {"main": {}, "api": {
        "cap_add": ["NET_ADMIN"], "volumes": [
            {"type": "bind", "source": str(tmp_path / "environment" / "api"), "target": "/srv"},
            {"type": "volume", "source": "data", "target": "/data"}]}}})  # fmt: skip


def test_a_volume_bound_to_a_host_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFeature, match=r"volumes\.data\.driver_opts\.device /etc"):
        _project(tmp_path).edit({"services": {"main": {}}, "volumes": {
            "data": {"driver_opts": {"type": "none", "o": "bind", "device": "/etc"}}}})


@pytest.mark.usefixtures("need_compose")
def test_a_compose_main_has_storage_watch_and_the_outside_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On this engine (overlay2 on ext4) `storage_opt` is refused: the start goes on
    without it, as `docker run` does, and remembers it. `main` is on the network
    HELIOS_DOCKER_NETWORK names, and its exchange folder is the host's."""
    outside = f"helios-test-outside-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "network", "create", outside], check=True, capture_output=True,
                   timeout=60)  # fmt: skip
    monkeypatch.setenv("HELIOS_DOCKER_NETWORK", outside)
    monkeypatch.setattr(DockerEnvironment, "storage_opt", None)
    folder = _copy(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]", "[environment]\nstorage_mb = 2048")
                    .replace('network_mode = "no-network"', 'network_mode = "public"'))  # fmt: skip
    spec = load_task(folder).sandbox_spec()
    assert spec.storage_mb == 2048 and spec.network is True
    env = DockerEnvironment(spec, trial_id=uuid.uuid4().hex[:8], run_id="pytest")

    async def go() -> tuple[str, bool]:
        await env.build()
        await env.start()
        try:
            nets = _docker("inspect", "--format", "{{json .NetworkSettings.Networks}}",
                           env.container or "")  # fmt: skip
            exchange = env.exchange_dir()
            assert exchange is not None and exchange[0] == "/run/helios"
            await env.exec("echo seen > /run/helios/probe", user="0")
            return nets, (exchange[1] / "probe").read_text() == "seen\n"
        finally:
            await env.stop()

    try:
        nets, shared = asyncio.run(go())
    finally:
        subprocess.run(["docker", "network", "rm", outside], capture_output=True, timeout=60)
    assert outside in json.loads(nets) and shared
    storage_taken = subprocess.run(
        ["docker", "run", "--rm", "--storage-opt", "size=100m", "debian:bookworm-slim", "true"],
        capture_output=True, timeout=60).returncode == 0  # fmt: skip
    assert DockerEnvironment.storage_opt is storage_taken


def test_an_allowlisted_project_has_one_network_behind_the_proxy(tmp_path: Path) -> None:
    from helios.environments.docker.egress import DockerEgress

    egress = DockerEgress()
    egress.network, egress.dns = "helios-trial-net", "172.30.0.254"
    egress.variables = {"HTTP_PROXY": "http://172.30.0.1:3128"}
    compose = write(tmp_path / "environment" / "docker-compose.yaml", "services: {}\n")
    spec = SandboxSpec(build_context=compose.parent, context_hash="abc123def4567890",
                       compose_file=compose)  # fmt: skip
    project = ComposeProject(spec, name="p", labels={}, image="i", egress=egress)
    edited = project.edit({"services": {"main": {}, "api": {"environment": {"A": "1"}}}})
    assert edited["networks"] == {"default": {"name": "helios-trial-net", "external": True}}
    api = edited["services"]["api"]
    # the services reach each other by name directly, not through the proxy
    direct = "localhost,127.0.0.1,::1,main,api"
    assert api["environment"] == {"A": "1", "HTTP_PROXY": "http://172.30.0.1:3128",
                                  "NO_PROXY": direct, "no_proxy": direct}  # fmt: skip
    assert project.direct_hosts == ("localhost", "127.0.0.1", "::1")  # set by `up`
    assert api["dns"] == ["172.30.0.254"] and edited["services"]["main"]["dns"] == api["dns"]
    for model, said in (
        ({"services": {"main": {}}, "networks": {"back": {}}}, "networks.back: an allowlisted"),
        ({"services": {"main": {}, "api": {"network_mode": "none"}}}, "api.network_mode"),
    ):
        with pytest.raises(UnsupportedFeature, match=said):
            project.edit(model)


@pytest.mark.usefixtures("need_compose")
def test_the_files_command_for_main_runs_as_harbors_compose_runs_it(tmp_path: Path) -> None:
    """Harbor merges the task's file last: its `command` for `main` replaces
    `sleep infinity`, and runs (here as the ENTRYPOINT service, spared like it)."""
    folder = _copy(tmp_path)
    compose = folder / "environment" / "docker-compose.yaml"
    compose.write_text(compose.read_text().replace(
        "  main:\n", '  main:\n    command: ["sh", "-c", "echo ran > /tmp/main.txt; '
        'exec sleep infinity"]\n', 1))  # fmt: skip
    env = DockerEnvironment(load_task(folder).sandbox_spec(), trial_id=uuid.uuid4().hex[:8],
                            run_id="pytest")  # fmt: skip

    async def go() -> str:
        await env.build()
        await env.start()
        try:
            await env.stop_processes()
            assert await env.service_running("entrypoint")
            return (await env.exec("cat /tmp/main.txt")).stdout
        finally:
            await env.stop()

    assert asyncio.run(go()) == "ran\n"


def test_a_run_may_allow_services_given_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HELIOS_ALLOW_PRIVILEGED_SIDECARS=1, a run's recorded setting, lets them through."""
    from helios.settings import HeliosSettings

    model = {"services": {"main": {}, "dind": {"privileged": True}}}
    with pytest.raises(UnsupportedFeature, match="HELIOS_ALLOW_PRIVILEGED_SIDECARS=1 allows"):
        _project(tmp_path).edit(json.loads(json.dumps(model)))
    monkeypatch.setenv("HELIOS_ALLOW_PRIVILEGED_SIDECARS", "1")
    assert _project(tmp_path).edit(model)["services"]["dind"]["privileged"] is True
    assert HeliosSettings.read().identity()["HELIOS_ALLOW_PRIVILEGED_SIDECARS"] == "1"


@pytest.mark.usefixtures("need_compose")
def test_claude_code_runs_in_main_of_a_compose_task_without_network(tmp_path: Path) -> None:
    """An installed agent in `main` of a compose task: installed in an image derived
    from main's (nothing uploaded), its model reached on the host's loopback through
    the trial's egress proxy (the task has no network), its commands reaching the
    sidecar by name, directly."""
    from helios.agents.installed.claude_code import ClaudeCodeAgent
    from helios.testing.mock_llm import MockLLMServer

    from .agent_installs import install

    install(ClaudeCodeAgent)
    task = _copy(tmp_path)
    toml = task / "task.toml"
    # Claude Code's runtime wants 1 GiB
    toml.write_text(toml.read_text().replace("memory_mb = 256", "memory_mb = 1536\n"
                                             "allow_internet = false"))  # fmt: skip
    ask = ("echo no_proxy=$NO_PROXY; exec 3<>/dev/tcp/${API_HOST}/8000 && printf "
           "'GET /hello HTTP/1.0\\r\\n\\r\\n' >&3 && tail -n 1 <&3 > /app/answer.txt")  # fmt: skip
    bash = {"name": "Bash", "arguments": {"command": ask, "description": "ask"}}
    turns = [{"tool_calls": [bash]}, {"text": "Done."}]
    with MockLLMServer(script={"scenarios": [{"match": "*", "turns": turns}]}) as server:
        batch = run_tasks(tmp_path / "tasks", tmp_path / "out", "docker", agent="claude-code",
                          model="anthropic/claude-scripted", base_url=server.anthropic_base_url,
                          api_key="sk-ant-compose-test")  # fmt: skip
    record = only_record(batch)
    assert record["reward"] == 1.0, (record["error"], record.get("agent_error"))
    assert batch.output_dir is not None
    trial = batch.output_dir / record["folder"]
    assert json.loads((trial / "agent" / "install.json").read_text())["placed"] == "mounted"
    log = (trial / "agent" / "claude-code.log").read_text()
    assert re.search(r"no_proxy=[^\s\"]*\bapi\b", log), log[-2000:]  # the sidecar: direct
    assert _left(_run_id(tmp_path / "out")) == []
