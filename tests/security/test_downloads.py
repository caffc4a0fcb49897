"""Everything that comes out of a sandbox is checked on the host: no link followed,
no path outside the destination, sizes bounded; an unreadable archive is an error."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import tarfile
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import helios.environments.docker.api as _docker_api
import helios.environments.shell.transfer as _shell_transfer
from helios import ParallelRunner
from helios.environments.local import LocalEnvironment
from helios.environments.local.bwrap import TRANSFER_MOUNT
from helios.environments.shell.safe_copy import Bounds, UnsafeDownload, copy_out, extract_tar
from helios.environments.spec import SandboxSpec

from ..conftest import TaskMaker
from ..daytona_helpers import daytona

__all__ = ["daytona"]  # the fixture, asked for by name


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            else:
                archive.addfile(info)
    buffer.seek(0)
    return buffer


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o4755 if kind == tarfile.REGTYPE else 0o755
    return info


def test_copy_out_skips_links_and_special_files(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host only")
    src = tmp_path / "payload"
    (src / "sub").mkdir(parents=True)
    (src / "ok.txt").write_text("ok")
    (src / "sub" / "deep.txt").write_text("deep")
    (src / "reward.txt").symlink_to(secret)
    (src / "dir-link").symlink_to(tmp_path)
    os.mkfifo(src / "fifo")
    dst = tmp_path / "out"
    skipped = copy_out(src, dst, what="test")
    assert sorted(skipped) == ["dir-link", "fifo", "reward.txt"]
    assert (dst / "ok.txt").read_text() == "ok" and (dst / "sub" / "deep.txt").read_text() == "deep"
    assert not (dst / "reward.txt").exists() and not (dst / "dir-link").exists()
    assert not any(p.is_symlink() for p in dst.rglob("*"))


def test_copy_out_is_bounded(tmp_path: Path) -> None:
    src = tmp_path / "payload"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(b"x" * 1000)
    with pytest.raises(UnsafeDownload, match="larger than 3000 bytes"):
        copy_out(src, tmp_path / "a", what="test", bounds=Bounds(max_bytes=3000))
    with pytest.raises(UnsafeDownload, match="more than 3 entries"):
        copy_out(src, tmp_path / "b", what="test", bounds=Bounds(max_entries=3))


def test_copy_out_never_writes_through_a_link_in_the_destination(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    src = tmp_path / "payload"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x.txt").write_text("x")
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "sub").symlink_to(target)
    with pytest.raises(UnsafeDownload):
        copy_out(src, dst, what="test")
    assert list(target.iterdir()) == []


def test_extract_tar_keeps_only_plain_files_inside_the_destination(tmp_path: Path) -> None:
    archive = _tar([
        (_member("verifier", tarfile.DIRTYPE), None),
        (_member("verifier/reward.txt"), b"1\n"),
        (_member("verifier/sub", tarfile.DIRTYPE), None),
        (_member("verifier/sub/log.txt"), b"log"),
        (_member("verifier/../../escape.txt"), b"escaped"),
        (_member("/abs.txt"), b"abs"),
        (_member("verifier/link", tarfile.SYMTYPE, "/etc/passwd"), None),
        (_member("verifier/rel-link", tarfile.SYMTYPE, "reward.txt"), None),
        (_member("verifier/hard", tarfile.LNKTYPE, "/etc/passwd"), None),
        (_member("verifier/dev", tarfile.CHRTYPE), None),
    ])  # fmt: skip
    dst = tmp_path / "deep" / "out"
    skipped = extract_tar(archive, dst, what="test")
    assert (dst / "reward.txt").read_text() == "1\n"
    assert (dst / "sub" / "log.txt").read_text() == "log"
    assert sorted(p.name for p in dst.iterdir()) == ["reward.txt", "sub"]
    assert not (dst / "reward.txt").stat().st_mode & 0o7000  # no setuid survives
    assert not (tmp_path / "escape.txt").exists() and not Path("/abs.txt").exists()
    assert len(skipped) == 6


def test_extract_tar_single_file_becomes_the_destination(tmp_path: Path) -> None:
    archive = _tar([(_member("y.txt"), b"Y\n")])
    extract_tar(archive, tmp_path / "copy.txt", what="test")
    assert (tmp_path / "copy.txt").read_text() == "Y\n"


def test_an_unreadable_archive_is_an_error_never_a_partial_success(tmp_path: Path) -> None:
    data = _tar([(_member("v", tarfile.DIRTYPE), None), (_member("v/big"), b"z" * 100_000)])
    truncated = io.BytesIO(data.getvalue()[:20_000])
    with pytest.raises(UnsafeDownload, match="unreadable archive"):
        extract_tar(truncated, tmp_path / "out", what="test")
    with pytest.raises(UnsafeDownload, match="larger than"):
        extract_tar(data, tmp_path / "out2", what="test", bounds=Bounds(max_bytes=50_000))


_segment = st.sampled_from(["a", "b", "..", ".", "", "/", "reward.txt", "x" * 5])


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.lists(_segment, min_size=1, max_size=5).map("/".join), max_size=8))
def test_extract_tar_never_writes_outside(tmp_path_factory: pytest.TempPathFactory,
                                          names: list[str]) -> None:  # fmt: skip
    base = tmp_path_factory.mktemp("fuzz")
    members = [(_member("top", tarfile.DIRTYPE), None)]
    members += [(_member(f"top/{name}"), b"data") for name in names]
    # a file and a folder of the same name is refused, which is fine
    with contextlib.suppress(UnsafeDownload):
        extract_tar(_tar(members), base / "dst", what="fuzz")
    outside = [p for p in base.rglob("*") if not p.is_relative_to(base / "dst")]
    assert outside == []


@pytest.mark.usefixtures("need_bwrap")
def test_local_download_refuses_a_link_planted_in_the_transfer_folder(tmp_path: Path) -> None:
    """A hijacked in-sandbox `cp` could put anything in the transfer folder: the
    host copy-out still follows no link."""
    secret = tmp_path / "host-secret.txt"
    secret.write_text("0.5\n")
    env = LocalEnvironment(SandboxSpec(), trial_id=uuid.uuid4().hex[:8], run_id="test")
    real_exec = env._exec

    async def hijacked(command: str, cwd: str, variables: dict[str, str], timeout: float | None,
                       transfer: Path | None = None) -> object:  # fmt: skip
        if transfer is not None and "/logs/verifier" in command:
            command = (f"mkdir {TRANSFER_MOUNT}/payload && echo ok > {TRANSFER_MOUNT}/payload/ok "
                       f"&& ln -s {secret} {TRANSFER_MOUNT}/payload/reward.txt")  # fmt: skip
        return await real_exec(command, cwd, variables, timeout, transfer)

    env._exec = hijacked  # type: ignore[method-assign,assignment]
    # The one-shot transfer path (the persistent shell's tar path is covered by
    # tests/test_local_shell.py's hijacked archive)
    env._pool.one_shot = True

    async def go() -> None:
        await env.start()
        try:
            await env.download("/logs/verifier", tmp_path / "out")
        finally:
            await env.stop()

    asyncio.run(go())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ok"]


def _big_log_task(make_task: TaskMaker) -> None:
    make_task(
        "big-log",
        test=(
            "head -c 12000000 /dev/urandom | od -An -tx1 | head -c 12582912"
            " > /logs/verifier/big.log\necho 1 > /logs/verifier/reward.txt\n"
        ),
    )


@pytest.mark.parametrize("provider", ["local", "docker", "daytona"])
def test_a_verifier_writing_a_12_mb_log_and_an_honest_reward_passes(
    provider: str, make_task: TaskMaker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # daytona: the loopback Daytona, its key in the environment
    fixture = {"docker": "need_docker", "daytona": "daytona"}.get(provider, "need_bwrap")
    request.getfixturevalue(fixture)
    _big_log_task(make_task)
    runner = ParallelRunner(tmp_path / "tasks", agent="oracle", provider=provider,
                            output_dir=tmp_path / "out", show_progress=False)  # fmt: skip
    batch = asyncio.run(runner.run())
    assert batch.passed == 1, batch.results
    assert runner.run_dir is not None
    (log,) = runner.run_dir.rglob("big.log")
    assert log.stat().st_size == 12582912


@pytest.mark.usefixtures("need_docker")
@pytest.mark.parametrize("transport", ["engine-api", "init-shell"])
def test_an_unreadable_docker_archive_is_a_scoring_failure(
    transport: str, make_task: TaskMaker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if transport == "engine-api":
        # The daemon's archive stream breaks off mid-archive.
        monkeypatch.setenv("HELIOS_DOCKER_SHELL", "0")
        whole = _docker_api.archive_chunks

        async def cut_off(*args: Any) -> AsyncGenerator[bytes, None]:
            sent = 0
            # closed when cut off: an open stream holds the container's lock in the
            # daemon, and its removal (and every inspect of it) would wait for it
            async with contextlib.aclosing(whole(*args)) as chunks:
                async for chunk in chunks:
                    if sent + len(chunk) >= 3000:
                        yield chunk[: 3000 - sent]
                        return
                    sent += len(chunk)
                    yield chunk

        monkeypatch.setattr(_docker_api, "archive_chunks", cut_off)
    else:
        # The container's tar (the agent's, if it is root) hands over a cut archive.
        whole_script = _shell_transfer.download_script

        def cut_script(src: str, **options: bool) -> str | None:
            # (also the archive of the verifier's combined command: exec_then_download)
            script = whole_script(src, **options)
            assert script is not None and "exec tar -c" in script
            return script.replace("exec tar -c", "tar -c") + " | head -c 3000"

        monkeypatch.setattr(_shell_transfer, "download_script", cut_script)
    _big_log_task(make_task)
    runner = ParallelRunner(tmp_path / "tasks", agent="oracle", provider="docker",
                            output_dir=tmp_path / "out", show_progress=False)  # fmt: skip
    asyncio.run(runner.run())
    assert runner.run_dir is not None
    (record,) = map(json.loads, (runner.run_dir / "results.jsonl").read_text().splitlines())
    # the container's tar is the agent's when it is root: a scoring failure, never an
    # infrastructure error that --retry-errors would rerun
    assert record["status"] == "failed", record
    assert record["error"]["type"] == "RewardFileInvalid", record
    assert record["error"]["phase"] == "verifier" and not record["error"]["infrastructure"]
    assert "unreadable archive" in record["error"]["message"]
