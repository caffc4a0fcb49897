"""Allowlisted networks (`network_mode = "allowlist"`): the egress proxy's rules,
and a sandbox on each provider whose only way out is that proxy.

Everything is on 127.0.0.1 under test host names (HELIOS_EGRESS_HOSTS maps them
for the proxy): `allowed.test` and `other.test` are the upstream server, which
also listens on 127.0.0.2 for the CIDR rule; `denied.test` is the same server
under a name no rule allows. The sandbox's client is bash's /dev/tcp (every image
here has bash, not every one curl)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from helios.environments.base import Environment
from helios.environments.docker import DockerEnvironment
from helios.environments.egress import DENY_ALL, AllowList, describe
from helios.environments.egress.netns import available
from helios.environments.egress.proxy import HOSTS_VARIABLE, EgressProxy
from helios.environments.local import LocalEnvironment
from helios.environments.spec import SandboxSpec

from .harbor_tasks import records_of, run_tasks, task

POLICY = AllowList(("allowed.test", "*.wild.test", "127.0.0.2/32"))
#: CONNECT to $1 through $HTTP_PROXY, then a GET in the tunnel; prints both answers
CONNECT = (
    'p=${HTTP_PROXY#http://}; exec 3<>"/dev/tcp/${p%:*}/${p##*:}" || exit 9; '
    "printf 'CONNECT %s HTTP/1.1\\r\\n\\r\\nGET / HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' "
    '"$1" "$1" >&3; timeout 5 cat <&3'
)
#: a plain-HTTP proxy request for http://$1/
PLAIN = (
    'p=${HTTP_PROXY#http://}; exec 3<>"/dev/tcp/${p%:*}/${p##*:}" || exit 9; '
    "printf 'GET http://%s/ HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' \"$1\" \"$1\" >&3; "
    "timeout 5 cat <&3"
)


class Upstream:
    """An HTTP server on 127.0.0.1 and 127.0.0.2 (one port) that says which host
    it was asked for, in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.port = 0
        #: the same server on every address of the host
        self.everywhere = 0
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        assert ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            host = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                         if line.lower().startswith("host:")), "?")  # fmt: skip
            body = f"hello from {host}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
            await writer.drain()
            writer.close()

        async def serve() -> None:
            first = await asyncio.start_server(answer, "127.0.0.1", 0)
            self.port = first.sockets[0].getsockname()[1]
            await asyncio.start_server(answer, "127.0.0.2", self.port)
            anywhere = await asyncio.start_server(answer, "0.0.0.0", 0)
            self.everywhere = anywhere.sockets[0].getsockname()[1]
            ready.set()
            await asyncio.Event().wait()

        self.loop.run_until_complete(serve())


@pytest.fixture(scope="module")
def upstream() -> Upstream:
    return Upstream()


@pytest.fixture
def test_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The test names on 127.0.0.1, and every name the proxy looked up."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 allowed.test other.test denied.test a.wild.test\n")
    monkeypatch.setenv(HOSTS_VARIABLE, str(hosts))
    asked: list[str] = []
    resolve = EgressProxy._resolve

    async def spy(self: EgressProxy, host: str, port: int) -> list[str]:
        asked.append(host)
        return await resolve(self, host, port)

    monkeypatch.setattr(EgressProxy, "_resolve", spy)
    yield asked


def test_the_rules_match_names_as_names_and_addresses_as_addresses() -> None:
    allowed = ["allowed.test", "ALLOWED.test.", "a.wild.test", "b.a.wild.test",
               "127.0.0.2"]  # fmt: skip
    denied = ["x.allowed.test", "wild.test", "denied.test", "127.0.0.1", "127.0.0.3",
              "2130706434", "[::1]", "allowed.test.evil", ""]  # fmt: skip
    assert [h for h in allowed if POLICY.verdict(h) is not None] == []
    assert [h for h in denied if POLICY.verdict(h) is None] == []
    assert DENY_ALL.verdict("allowed.test") is not None
    assert not POLICY  # falsy: never taken for a public network
    assert describe(POLICY) == {"mode": "allowlist", "allowed_hosts": list(POLICY.hosts)}
    with pytest.raises(ValueError, match="not a host name"):
        AllowList(("http://pypi.org/",))


def test_the_proxy_in_process(upstream: Upstream, test_hosts: list[str]) -> None:
    """CONNECT and plain HTTP, allowed and denied, with no lookup of a denied name."""

    async def ask(port: int, request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return data

    async def body() -> None:
        proxy = EgressProxy(POLICY)
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        await proxy.serve(listener)
        try:
            tunnel = f"CONNECT allowed.test:{upstream.port} HTTP/1.1\r\n\r\n" \
                     "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"  # fmt: skip
            assert b"hello from allowed.test" in await ask(port, tunnel.encode())
            plain = f"GET http://a.wild.test:{upstream.port}/x HTTP/1.1\r\nHost: a\r\n\r\n"
            assert b"hello from a" in await ask(port, plain.encode())
            cidr = f"CONNECT 127.0.0.2:{upstream.port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
            assert b"200 OK" in await ask(port, cidr.encode())
            for target in (f"127.0.0.1:{upstream.port}", "leak-s3cret.denied.test:443"):
                answer = await ask(port, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
                assert answer.startswith(b"HTTP/1.1 403")
        finally:
            await proxy.close()
        assert test_hosts == ["allowed.test", "a.wild.test", "127.0.0.2"]
        assert [line.split(" ", 1)[1] for line in proxy.denials] == [
            f"denied CONNECT 127.0.0.1:{upstream.port}: address not in allowed_hosts",
            "denied CONNECT leak-s3cret.denied.test:443: name not in allowed_hosts",
        ]

    asyncio.run(body())


@pytest.fixture(params=["docker", "local"])
def provider(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue("need_docker" if request.param == "docker" else "need_bwrap")
    if available() is not None:  # both providers make network namespaces as root
        pytest.skip(str(available()))
    return str(request.param)


def _sandbox(provider: str) -> Environment:
    trial = f"egress-{uuid.uuid4().hex[:8]}"
    if provider == "docker":
        spec = SandboxSpec(image="debian:bookworm-slim", network=POLICY, label="egress")
        return DockerEnvironment(spec, trial_id=trial, run_id="test-egress")
    return LocalEnvironment(SandboxSpec(network=POLICY, label="egress"),
                            trial_id=trial, run_id="test-egress")  # fmt: skip


@contextlib.asynccontextmanager
async def _started(provider: str) -> AsyncIterator[Environment]:
    env = _sandbox(provider)
    try:
        await env.start()
        yield env
    finally:
        await env.stop()


def _host_address() -> str:
    """The host's own address on its way out (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        return str(probe.getsockname()[0])


async def _through(env: Environment, script: str, target: str) -> str:
    result = await env.exec(f"bash -c {shlex.quote(script)} - {target}", cwd="/", timeout=30)
    return result.stdout


def test_an_allowlisted_sandbox_reaches_only_what_its_list_allows(
    provider: str, upstream: Upstream, test_hosts: list[str]
) -> None:
    port = upstream.port

    async def body() -> None:
        async with _started(provider) as env:
            variables = await env.exec("env", cwd="/")
            assert "HTTPS_PROXY=http://" in variables.stdout
            assert "https_proxy=http://" in variables.stdout
            # an allowed host, by CONNECT and by plain HTTP, and an allowed address
            assert "hello from allowed.test" in await _through(env, CONNECT, f"allowed.test:{port}")
            assert "hello from allowed.test" in await _through(env, PLAIN, f"allowed.test:{port}")
            assert "hello from 127.0.0.2" in await _through(env, CONNECT, f"127.0.0.2:{port}")
            # a denied host, a denied address, and the address the allowed name has
            for target in (f"denied.test:{port}", f"127.0.0.3:{port}", f"127.0.0.1:{port}"):
                answer = await _through(env, CONNECT, target)
                assert answer.startswith("HTTP/1.1 403") and "hello" not in answer, target
            # a lookup that would carry data out: no resolver answers in the sandbox,
            # and the proxy never looks up a name no rule allows
            lookup = await env.exec("timeout 5 getent hosts leak-s3cret.denied.test",
                                    cwd="/", timeout=30)  # fmt: skip
            assert not lookup.ok and lookup.stdout == ""
            assert "403" in await _through(env, CONNECT, "leak-s3cret.denied.test:443")
            assert not any("denied" in name for name in test_hosts)
            # a process that ignores the proxy variables has no route out
            direct = await env.exec(
                f"timeout 5 bash -c 'echo > /dev/tcp/127.0.0.1/{port}' && echo REACHED",
                cwd="/", timeout=30,
            )  # fmt: skip
            assert "REACHED" not in direct.stdout
            # nor to the host: a service on every address, at the proxy's address
            # (docker's gateway) and at the host's own
            for address in ("${p%:*}", _host_address()):
                probe = await env.exec(
                    'p=${HTTP_PROXY#http://}; timeout 5 bash -c "echo > /dev/tcp/'
                    f'{address}/{upstream.everywhere}" && echo REACHED', cwd="/", timeout=30,
                )  # fmt: skip
                assert "REACHED" not in probe.stdout, address
            denials = env.egress_denials()
            assert any(f"denied.test:{port}" in line for line in denials)
            assert any("leak-s3cret.denied.test" in line for line in denials)

    asyncio.run(body())


def test_a_phase_switches_the_policy_and_the_verifiers_own_holds(
    provider: str, upstream: Upstream, test_hosts: list[str]
) -> None:
    port = upstream.port

    async def body() -> None:
        async with _started(provider) as env:
            await env.set_network(AllowList(("other.test",)))  # the verifier's own
            assert "hello from other.test" in await _through(env, CONNECT, f"other.test:{port}")
            assert "hello" not in await _through(env, CONNECT, f"allowed.test:{port}")
            await env.set_network(False)  # a phase with no network
            assert "hello" not in await _through(env, CONNECT, f"other.test:{port}")
            await env.set_network(POLICY)  # back to the sandbox's
            assert "hello from allowed.test" in await _through(env, CONNECT, f"allowed.test:{port}")

    asyncio.run(body())


def _reaches(script: str, target: str, mark: str) -> str:
    """A shell line: `mark` open or closed, whether `target` answers through the proxy."""
    return (f"if bash -c {shlex.quote(script)} - {target} | grep -q 'hello from'; "
            f"then echo open >> {mark}; else echo closed >> {mark}; fi\n")  # fmt: skip


def test_a_task_whose_verifier_has_its_own_allowlist(
    provider: str, upstream: Upstream, test_hosts: list[str], tmp_path: Path
) -> None:
    """The agent gets the sandbox's list, the verifier its own; the trial records
    both and logs what was denied."""
    port = upstream.port

    def probes(mark: str) -> str:
        return "".join(_reaches(CONNECT, f"{host}:{port}", mark)
                       for host in ("allowed.test", "other.test"))  # fmt: skip

    toml = """
        schema_version = "1.2"
        [environment]
        memory_mb = 256
        network_mode = "allowlist"
        allowed_hosts = ["allowed.test"]
        [verifier]
        network_mode = "allowlist"
        allowed_hosts = ["other.test"]
        """
    test = probes("/tmp/verifier-net") + (
        '[ "$(cat /app/agent-net | tr "\\n" /)" = open/closed/ ] && '
        '[ "$(cat /tmp/verifier-net | tr "\\n" /)" = closed/open/ ] && '
        "echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )
    task(tmp_path / "tasks", "lists", toml, solve=probes("/app/agent-net"), test=test)
    batch = run_tasks(tmp_path / "tasks", tmp_path / "out", provider)
    assert batch.unsupported == []
    (record,) = records_of(batch).values()
    assert record["reward"] == 1.0, record["error"]
    assert batch.output_dir is not None
    folder = batch.output_dir / batch.results[0].folder
    config = json.loads((folder / "config.json").read_text())
    assert config["network"] == {
        "sandbox": {"mode": "allowlist", "allowed_hosts": ["allowed.test"]},
        "agent": {"mode": "allowlist", "allowed_hosts": ["allowed.test"]},
        "verifier": {"mode": "allowlist", "allowed_hosts": ["other.test"]},
    }
    log = (folder / "egress.log").read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in log] == [
        f"CONNECT other.test:{port}: name not in allowed_hosts",
        f"CONNECT allowed.test:{port}: name not in allowed_hosts",
    ]


def test_a_provider_without_a_proxy_names_the_allowlist(tmp_path: Path) -> None:
    from helios.environments.daytona import DaytonaEnvironment
    from helios.errors import TaskFormatError
    from helios.tasks.features import features_used, unsupported
    from helios.tasks.task import load_task

    folder = task(tmp_path, "t", '[environment]\nallowed_hosts = ["pypi.org"]\n'
                  '[verifier]\nnetwork_mode = "public"\n')  # fmt: skip
    loaded = load_task(folder)
    assert "allowlist" in features_used(loaded)
    assert [str(u) for u in unsupported(loaded, DaytonaEnvironment)] == [
        "unsupported: environment.allowed_hosts (the daytona provider has no proxy)",
        "unsupported: verifier.network_mode "
        "(the daytona provider cannot change a running sandbox's network)",
    ]
    # docker's proxy takes a phase's allowlist or none, but cannot open the network
    assert [u.field for u in unsupported(loaded, DockerEnvironment)] == ["verifier.network_mode"]
    with pytest.raises(TaskFormatError, match=r"task.toml:2 \[agent.allowed_hosts\]: 'a b' is"):
        load_task(task(tmp_path, "bad", '[agent]\nallowed_hosts = ["a b"]\n'))


def test_helios_cleanup_removes_a_trial_network_left_behind(need_docker: None) -> None:
    """A killed Helios leaves its trial's docker network (its namespace dies with
    it): the run's cleanup removes the network."""
    from helios.environments.docker.egress import DockerEgress

    run = f"test-egress-{uuid.uuid4().hex[:8]}"

    async def body() -> None:
        egress = DockerEgress()
        await egress.open(f"helios-{run}", run, POLICY)
        name = egress.network
        assert name is not None
        leftover, egress._namespace, egress.network = egress._namespace, None, None
        try:  # as if Helios had died: the network is left
            removed = await DockerEnvironment.cleanup_run(run)
        finally:
            await egress.close()
            if leftover is not None:
                leftover.close()
        assert removed  # (the compose cleanup may name it by its id)
        gone = await asyncio.create_subprocess_exec(
            "docker", "network", "inspect", name, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert await gone.wait() != 0

    asyncio.run(body())


def test_closing_the_proxy_ends_a_tunnel_left_open(
    upstream: Upstream, test_hosts: list[str]
) -> None:
    async def body() -> None:
        proxy = EgressProxy(POLICY)
        listener = socket.create_server(("127.0.0.1", 0))
        await proxy.serve(listener)
        reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        writer.write(f"CONNECT allowed.test:{upstream.port} HTTP/1.1\r\n\r\n".encode())
        assert b" 200 " in await reader.readline()
        await proxy.close()  # the client never closes its side
        assert await asyncio.wait_for(reader.read(), 10) == b"\r\n"
        writer.close()

    asyncio.run(body())


def test_a_compose_task_with_an_allowlist_keeps_every_service_behind_the_proxy(
    need_docker: None, upstream: Upstream, test_hosts: list[str], tmp_path: Path
) -> None:
    """Compose's network is the trial's egress network: `main` reaches its sidecar
    by name, and both reach allowed hosts through the proxy alone."""
    import shutil
    import subprocess

    from helios.tasks.features import unsupported
    from helios.tasks.task import load_task

    from .conftest import _need

    if available() is not None:
        pytest.skip(str(available()))
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    _need("HELIOS_REQUIRE_DOCKER", probe.returncode == 0, "docker compose (the v2 plugin)")
    folder = tmp_path / "sidecar"
    shutil.copytree(Path(__file__).parent / "fixtures" / "harbor" / "sidecar-artifacts", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace(
        "[environment]", '[environment]\nnetwork_mode = "allowlist"\n'
        'allowed_hosts = ["allowed.test"]'))  # fmt: skip
    task = load_task(folder)
    assert unsupported(task, DockerEnvironment) == []
    port = upstream.port
    env = DockerEnvironment(task.sandbox_spec(), trial_id=f"egress-{uuid.uuid4().hex[:8]}",
                            run_id="test-egress")  # fmt: skip
    # a process that ignores the proxy: the host's services on every address
    direct = (f"timeout 2 bash -c 'echo > /dev/tcp/{_host_address()}/{upstream.everywhere}' "
              "&& echo REACHED")  # fmt: skip
    by_name = ("exec 3<>/dev/tcp/api/8000 && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && "
               "timeout 5 cat <&3")  # fmt: skip

    async def body() -> None:
        await env.build()
        await env.start()
        try:
            assert "hello from api" in (await env.exec(f"bash -c {shlex.quote(by_name)}")).stdout
            assert "hello from allowed.test" in await _through(env, CONNECT, f"allowed.test:{port}")
            assert (await _through(env, CONNECT, f"denied.test:{port}")).startswith("HTTP/1.1 403")
            assert "REACHED" not in (await env.exec(direct, cwd="/", timeout=30)).stdout
            api = await env.compose_service("api")
            said = await api.exec(f"bash -c {shlex.quote(CONNECT)} - allowed.test:{port}",
                                  timeout=30)  # fmt: skip
            assert "hello from allowed.test" in said.stdout, said
            denied = await api.exec(f"bash -c {shlex.quote(CONNECT)} - denied.test:{port}",
                                    timeout=30)  # fmt: skip
            assert denied.stdout.startswith("HTTP/1.1 403")
            assert "REACHED" not in (await api.exec(direct, timeout=30)).stdout
            lookup = await api.exec("timeout 2 getent hosts leak.denied.test", timeout=30)
            assert not lookup.ok and lookup.stdout == ""
            # a phase's own list (the verifier's) holds for the sidecars too
            await env.set_network(AllowList(("other.test",)))
            switched = await api.exec(f"bash -c {shlex.quote(CONNECT)} - allowed.test:{port}",
                                      timeout=30)  # fmt: skip
            assert switched.stdout.startswith("HTTP/1.1 403")
        finally:
            await env.stop()
        assert any(f"denied.test:{port}" in line for line in env.egress_denials())

    asyncio.run(body())
