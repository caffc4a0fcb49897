from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from pathlib import Path

import pytest

from helios.environments.local import LocalEnvironment
from helios.errors import EnvironmentExecError
from helios.tasks.task import load_task

from .conftest import REPO, TaskMaker
from .env_contract import check_contract

pytestmark = pytest.mark.usefixtures("need_bwrap")


def _env(task_dir: Path) -> LocalEnvironment:
    return LocalEnvironment(
        load_task(task_dir).sandbox_spec(), trial_id=uuid.uuid4().hex[:8], run_id="test"
    )


def test_contract(make_task: TaskMaker, tmp_path: Path) -> None:
    asyncio.run(check_contract(_env(make_task("contract")), tmp_path))


def test_environment_files_land_in_workdir_and_root_is_removed(make_task: TaskMaker) -> None:
    env = _env(make_task("files", files={"input.txt": "data\n"}))

    async def go() -> Path:
        await env.start()
        assert env.root is not None
        root = env.root
        result = await env.exec("cat input.txt; test -e Dockerfile && echo leaked")
        assert result.stdout == "data\n"
        await env.stop()
        return root

    root = asyncio.run(go())
    assert not root.exists()


def test_no_network_no_home_no_repo(make_task: TaskMaker) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    canary = Path.home() / f".helios-canary-{uuid.uuid4().hex}"
    canary.write_text("secret")
    # said: a task that leaves its network unset gets the public one (Harbor's)
    env = _env(make_task("isolation", toml_extra='network_mode = "no-network"\n'))

    async def go() -> None:
        await env.start()
        try:
            net = await env.exec(f"bash -c 'echo x > /dev/tcp/127.0.0.1/{port}' && echo reached")
            assert "reached" not in net.stdout and net.exit_code != 0
            home = await env.exec(f"cat {canary}")
            assert home.exit_code != 0 and "secret" not in home.stdout
            repo = await env.exec(f"ls {REPO}/src || ls {REPO}")
            assert repo.exit_code != 0
            pid1 = await env.exec("cat /proc/1/cmdline | tr '\\0' ' '")
            assert "systemd" not in pid1.stdout and "init" not in pid1.stdout
            ro = await env.exec("touch /usr/helios-test")
            assert ro.exit_code != 0
        finally:
            await env.stop()

    try:
        asyncio.run(go())
    finally:
        canary.unlink()
        listener.close()


def test_paths_cannot_escape(make_task: TaskMaker, tmp_path: Path) -> None:
    env = _env(make_task("escape"))

    async def go() -> None:
        await env.start()
        try:
            with pytest.raises(EnvironmentExecError):
                await env.upload(tmp_path, "/app/../../etc/x")
            with pytest.raises(EnvironmentExecError):
                await env.upload(tmp_path, "/usr/local/x")
        finally:
            await env.stop()

    asyncio.run(go())


def test_planted_symlinks_cannot_reach_host_files(make_task: TaskMaker, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text("host secret")
    env = _env(make_task("symlinks"))
    payload = tmp_path / "payload.txt"
    payload.write_text("overwritten")

    async def go() -> None:
        await env.start()
        try:
            planted = await env.exec(
                f"ln -s {canary} /app/file-link && ln -s {outside} /app/dir-link && "
                f"mkdir -p /logs/verifier && ln -s {canary} /logs/verifier/reward.txt"
            )
            assert planted.ok, planted.stderr
            # writing through the links stays inside the sandbox (or fails)
            for target in ("/app/file-link", "/app/dir-link/canary.txt"):
                with contextlib.suppress(EnvironmentExecError):
                    await env.upload(payload, target)
            # reading through them never yields the host file
            await env.download("/logs/verifier", tmp_path / "verifier")
            copied = tmp_path / "verifier" / "reward.txt"
            assert not copied.exists() or copied.read_text() != "host secret"
            assert not copied.is_symlink()
            in_cwd = await env.exec("true", cwd="/app/dir-link/made-by-cwd")
            assert in_cwd.exit_code in (0, 125)
        finally:
            await env.stop()

    asyncio.run(go())
    assert canary.read_text() == "host secret"
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt"]


def test_the_verifier_reset_and_tests_are_one_shell_command(
    make_task: TaskMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path is taken: one command through the sandbox's shell, no separate
    exec or upload (the contract test checks it gives the same files)."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    env = _env(make_task("fused"))
    commands: list[str] = []
    real = env._shell_command

    async def counted(command: str, **kwargs: object) -> object:
        commands.append(command)
        return await real(command, **kwargs)  # type: ignore[arg-type]

    async def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a separate exec or upload ran")

    async def go() -> None:
        await env.start()
        try:
            monkeypatch.setattr(env, "_shell_command", counted)
            monkeypatch.setattr(env, "exec", refused)
            monkeypatch.setattr(env, "upload", refused)
            done = await env.prepare_and_upload("mkdir -p /tests", [(tests, "/tests")])
            assert done.ok and len(commands) == 1 and "tar -x" in commands[0]
            monkeypatch.undo()
            assert (await env.exec("cat /tests/test.sh")).stdout.startswith("echo 1")
        finally:
            await env.stop()

    asyncio.run(go())
