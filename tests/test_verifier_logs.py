"""test.sh and the download of /logs/verifier in one command (`exec_then_download`):
the shell-backed providers (local, docker's stream) do both in one round trip; the
Engine API path composes `exec` and `download`. Either way the verifier sees the
same thing: test.sh's output, its timeout, and a checked download whose refusal
is a scoring failure (RewardFileMissing / RewardFileInvalid).

The hostile cases: a test.sh that replaces /logs/verifier with a link out, that
leaves a 1.5 GB (sparse) file there, that leaves a process writing on its stdout
while the archive is made, that removes the folder, that hangs."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from helios.environments.base import Environment, ExecDownload
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.environments.shell.safe_copy import DownloadMissing, UnsafeDownload
from helios.environments.shell.transfer import Split, exec_then_download_script
from helios.environments.spec import SandboxSpec
from helios.tasks.phases import VerifierPlan
from helios.tasks.verifier import RUN_TEST, run_tests

from .sandbox_helpers import in_env

#: whether the loop test.sh left is alive, by the shell's builtins (the pattern
#: does not match this command's own line)
ALIVE = ('for d in /proc/[0-9]*; do c=; read -r c 2>/dev/null <"$d/cmdline"; '
         'case "$c" in *noise-loo[p]*) echo alive;; esac; done; echo checked')  # fmt: skip
#: local (its shell), docker over its init's stream, docker through the Engine API
PROVIDERS = ("local", "docker", "docker-api")


def _env(provider: str, request: pytest.FixtureRequest,
         monkeypatch: pytest.MonkeyPatch) -> Environment:  # fmt: skip
    trial = uuid.uuid4().hex[:8]
    if provider == "local":
        request.getfixturevalue("need_bwrap")
        return LocalEnvironment(SandboxSpec(), trial_id=trial, run_id="verifier-logs")
    request.getfixturevalue("need_docker")
    monkeypatch.setenv("HELIOS_DOCKER_SHELL", "0" if provider == "docker-api" else "1")
    spec = SandboxSpec(image="debian:bookworm-slim")
    return DockerEnvironment(spec, trial_id=trial, run_id="verifier-logs")



async def _put_test(env: Environment, script: str) -> None:
    made = await env.exec(
        "rm -rf /logs/verifier /tests && mkdir -p /logs/verifier /tests && "
        f"cat > /tests/test.sh <<'HELIOS_EOF'\n{script}\nHELIOS_EOF",
        cwd="/", timeout=60,
    )  # fmt: skip
    assert made.ok, made


def _one_command(env: Environment, provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the shell-backed paths, neither a separate exec nor a separate download."""
    if provider == "docker-api" or not getattr(env, "_transfers_in_shell", False):
        return  # (HELIOS_LOCAL_SHELL=0: every command a one-shot bwrap)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not in one command")

    monkeypatch.setattr(env, "exec", refused)
    monkeypatch.setattr(env, "download", refused)


async def _fetch(env: Environment, out: Path, timeout: float = 60) -> ExecDownload:
    return await env.exec_then_download(RUN_TEST, "/logs/verifier", out,
                                        env={"HOME": "/tmp", "GREETING": "hi"},
                                        timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("provider", PROVIDERS)
def test_output_and_logs_in_one_command(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    env = _env(provider, request, monkeypatch)

    async def body(env: Environment) -> None:
        await _put_test(env, (
            'echo "out $GREETING $HOME $PWD"; echo err >&2\n'
            "mkdir -p /logs/verifier/sub && echo 1 > /logs/verifier/reward.txt\n"
            "echo deep > /logs/verifier/sub/x.txt\n"
            # a process left running that writes on stdout: it must be gone before
            # the archive is made (it would corrupt it, or change the folder)
            "sh -c 'while :; do echo noise; echo 0 > /logs/verifier/reward.txt; done'"
            " noise-loop &\n"
            "exit 3"
        ))  # fmt: skip
        _one_command(env, provider, monkeypatch)
        fetched = await _fetch(env, tmp_path / "out")
        result = fetched.result
        assert result.stdout.startswith(f"out hi /tmp {env.workdir}\n"), result
        assert "err" in result.stderr and not result.timed_out, result
        assert fetched.refused is None and fetched.skipped == [], fetched
        reward = (tmp_path / "out" / "reward.txt").read_text()
        assert (tmp_path / "out" / "sub" / "x.txt").read_text() == "deep\n"
        if provider != "docker-api" and getattr(env, "_transfers_in_shell", False):
            # (a docker exec, or a one-shot bwrap, leaves the loop running on)
            assert result.exit_code == 3, result
            # what test.sh left running died with it, before the archive was made
            assert reward in ("1\n", "0\n", "")  # (killed mid-write, maybe)
            monkeypatch.undo()
            gone = await env.exec(ALIVE, cwd="/", timeout=60)
            assert gone.stdout == "checked\n", gone

    in_env(env, body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_services_outlive_it(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    """A sandbox with services (a desktop) runs the two apart: the one command's
    `kill -9 -1` would end them, and the next step's agent needs them."""
    env = _env(provider, request, monkeypatch)

    async def body(env: Environment) -> None:
        if not env.supports_services:
            pytest.skip("no services on this path")
        await env.start_service("kept", "exec sleep 1000")
        await _put_test(env, "echo 1 > /logs/verifier/reward.txt")
        fetched = await _fetch(env, tmp_path / "out")
        assert fetched.refused is None and (tmp_path / "out" / "reward.txt").exists()
        assert await env.service_running("kept")

    in_env(env, body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_link_in_place_of_the_logs_is_not_followed(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    env = _env(provider, request, monkeypatch)

    async def body(env: Environment) -> None:
        await _put_test(env, (
            "mkdir -p /elsewhere && echo 1 > /elsewhere/reward.txt\n"
            "rm -rf /logs/verifier && ln -s /elsewhere /logs/verifier"
        ))  # fmt: skip
        _one_command(env, provider, monkeypatch)
        fetched = await _fetch(env, tmp_path / "out")
        assert not fetched.result.timed_out, fetched
        out = tmp_path / "out"
        assert not out.is_symlink() and not (out / "reward.txt").exists()
        # as a download on its own says (the link skipped; a one-shot bwrap's `cp`
        # finds nothing): either way no reward, RewardFileMissing for the verifier
        monkeypatch.undo()
        try:
            apart: object = await env.download("/logs/verifier", tmp_path / "apart")
        except DownloadMissing as exc:
            apart = type(exc)
        assert apart == (fetched.skipped if fetched.refused is None else type(fetched.refused))
        assert not (tmp_path / "apart" / "reward.txt").exists()

    in_env(env, body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_huge_file_is_refused_at_once(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    env = _env(provider, request, monkeypatch)

    async def body(env: Environment) -> None:
        await _put_test(env, "echo 1 > /logs/verifier/reward.txt\n"
                             "truncate -s 1500M /logs/verifier/big; echo done")  # fmt: skip
        started = time.monotonic()
        fetched = await _fetch(env, tmp_path / "out")
        assert time.monotonic() - started < 30
        assert fetched.result.stdout == "done\n", fetched
        assert isinstance(fetched.refused, UnsafeDownload), fetched
        assert "larger than" in str(fetched.refused)
        # the sandbox serves on, its files there
        after = await env.exec("cat /logs/verifier/reward.txt", cwd="/", timeout=60)
        assert after.stdout == "1\n", after

    in_env(env, body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_removed_logs_are_missing(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    env = _env(provider, request, monkeypatch)

    async def body(env: Environment) -> None:
        await _put_test(env, "rm -rf /logs/verifier; echo gone")
        fetched = await _fetch(env, tmp_path / "out")
        assert fetched.result.stdout == "gone\n"
        assert isinstance(fetched.refused, DownloadMissing), fetched

    in_env(env, body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_timed_out_test_downloads_nothing(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    env = _env(provider, request, monkeypatch)

    async def body(env: Environment) -> None:
        await _put_test(env, "echo 1 > /logs/verifier/reward.txt; echo started; "
                             "echo late >&2; sleep 1000")  # fmt: skip
        fetched = await _fetch(env, tmp_path / "out", timeout=2)
        result = fetched.result
        assert result.timed_out and result.stdout == "started\n", result
        assert "late" in result.stderr, result
        assert fetched.skipped is None and fetched.refused is None
        assert not (tmp_path / "out").exists()

    in_env(env, body)


# -- the verifier over it: the refusals are scoring failures, as before --------------
def _plan(tests: Path, timeout: float = 60) -> VerifierPlan:
    return VerifierPlan(timeout=timeout, env={}, user=None, network=None, tests_dirs=(tests,))


@pytest.mark.parametrize("provider", ["local", "docker"])
@pytest.mark.parametrize(
    ("script", "error", "timeout"),
    [
        ("echo 1 > /logs/verifier/reward.txt; echo passed", None, 60),
        ("rm -rf /logs/verifier; ln -s /tests /logs/verifier", "RewardFileMissing", 60),
        ("echo 1 > /logs/verifier/reward.txt; truncate -s 1500M /logs/verifier/x; echo big",
         "RewardFileInvalid", 60),
        ("rm -rf /logs/verifier", "RewardFileMissing", 60),
        ("echo 1 > /logs/verifier/reward.txt; echo waiting; sleep 1000", "VerifierTimeout", 2),
    ],
)  # fmt: skip
def test_the_verifier_scores_through_it(
    provider: str, script: str, error: str | None, timeout: float,
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    env = _env(provider, request, monkeypatch)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(f"#!/bin/sh\n{script}\n")
    out = tmp_path / "verifier"

    async def body(env: Environment) -> None:
        score = await run_tests(env, _plan(tests, timeout), out)
        if error is None:
            assert score.error is None and score.reward == 1.0, score
            assert (out / "test-stdout.txt").read_text() == "passed\n"
        else:
            assert score.error is not None and score.error.type == error, score
            assert score.reward == 0.0
        if error == "RewardFileInvalid":  # what test.sh said is kept, as before
            assert score.note == "big" and (out / "test-stdout.txt").read_text() == "big\n"
        if error == "VerifierTimeout":
            assert (out / "test-stdout.txt").read_text() == "waiting\n"
            assert not (out / "reward.txt").exists()  # nothing downloaded, as before

    in_env(env, body)


# -- the script and the stream's split, without a sandbox ------------------------------
def test_the_script_refuses_what_it_cannot_write() -> None:
    assert exec_then_download_script("true", "/app", "/", []) is None
    assert exec_then_download_script("true", "/app", "/logs/x", ["A-B"]) is None
    assert exec_then_download_script("true", "/app", "/logs/x", ["PATH"]) is None
    script = exec_then_download_script("true", "/app", "/logs/x", ["HOME", "X"])
    # not measured in the sandbox first: the host's bounds hold as it streams
    assert script is not None and "unset HOME X" in script and "find" not in script


class _Kept:
    def __init__(self) -> None:
        self.data = b""

    def add(self, data: bytes) -> None:
        self.data += data


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_split_finds_its_boundary_across_chunks(size: int) -> None:
    boundary = b"0123456789abcdef"
    stream = b"out line\n01234 not it\n" + boundary + b"042" + b"ARCHIVE" * 5
    kept = _Kept()
    split = Split(boundary, kept)
    for start in range(0, len(stream), size):
        split.add(stream[start : start + size])
    assert split.status == 42
    assert split.text() == "out line\n01234 not it\n"
    assert kept.data == b"ARCHIVE" * 5


def test_without_a_boundary_all_is_output() -> None:
    split = Split(b"0123456789abcdef", _Kept())
    split.add(b"ends with 0123456789abc")
    assert split.status is None and split.text() == "ends with 0123456789abc"
