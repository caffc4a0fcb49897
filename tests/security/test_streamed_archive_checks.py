"""A download's archive is checked as it streams in, before it is spooled whole
(round 4): a 900 MiB header was refused only after 62-65 s of spooling, and a 2 TB
sparse file took 23.6 s when a root agent had replaced `find` and `awk`, whose
measurement the sandbox ran first. The host now reads the headers as they arrive,
whatever tools the sandbox has."""

from __future__ import annotations

import asyncio
import io
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.environments.base import ROOT, Environment
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.environments.shell import safe_copy
from helios.environments.shell.safe_copy import Bounds, Spool, UnsafeDownload, extract_tar
from helios.environments.spec import SandboxSpec

MiB = 1 << 20


def _header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.GNU_FORMAT)[: tarfile.BLOCKSIZE]


def _stream(first: bytes, total: int) -> Iterator[bytes]:
    yield first
    sent = len(first)
    while sent < total:
        yield bytes(MiB)
        sent += MiB


def _spooled(chunks: Iterator[bytes]) -> tuple[int, int]:
    """Feed a Spool until it refuses; (bytes fed, bytes it wrote)."""
    fed = 0
    with tempfile.TemporaryFile() as file:
        spool = Spool(file, Bounds(), "download of /logs")
        with pytest.raises(UnsafeDownload):
            for chunk in chunks:
                fed += len(chunk)
                spool.add(chunk)
        return fed, file.tell()


def test_a_900_mib_header_is_refused_at_the_header() -> None:
    first = _header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 900 * MiB)
    fed, written = _spooled(_stream(first + bytes(MiB - 512), 901 * MiB))
    assert fed == MiB and written == 0


def test_a_member_claiming_2_tb_is_refused_at_the_header() -> None:
    first = _header("logs/big", tarfile.REGTYPE, 2 << 40)
    fed, written = _spooled(_stream(first + bytes(MiB - 512), 3 * 1024 * MiB))
    assert fed == MiB and written == 0


def test_bytes_past_the_archive_end_are_refused() -> None:
    """A tool that lies (a small header, then endless data) stops at the trailer bound."""
    first = _header("logs/small", tarfile.REGTYPE, 10) + b"0123456789".ljust(512, b"\0")
    junk = (b"\xff" * 512) * 2048  # not a header: tarfile would end the archive there
    fed, _ = _spooled(_stream(first + junk, 2 * 1024 * MiB))
    assert fed < 4 * MiB


@pytest.mark.parametrize("fmt", ["gnu", "pax"])
def test_honest_archives_stream_through(tmp_path: Path, fmt: str) -> None:
    archive = io.BytesIO()
    formats = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}
    with tarfile.open(fileobj=archive, mode="w", format=formats[fmt]) as tar:
        for number in range(40):
            name = f"logs/{'deep/' * (number % 7)}{'n' * (90 + number * 3)}-é{number}"
            data = bytes([number]) * (number * 777)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.pax_headers = {"comment": "c" * number * 50} if fmt == "pax" else {}
            tar.addfile(info, io.BytesIO(data))
    data = archive.getvalue()
    with tempfile.TemporaryFile() as file:
        spool = Spool(file, Bounds(), "download of /logs")
        for start in range(0, len(data), 1000):
            spool.add(data[start : start + 1000])
        assert spool.scan.entries == 40
        file.seek(0)
        assert extract_tar(file, tmp_path / "out", what="download") == []
    assert len(list((tmp_path / "out").rglob("*-é*"))) == 40


# -- in real sandboxes: a root agent replaced find, awk (and tar) --------------------
def _sandbox(provider: str, request: pytest.FixtureRequest) -> Environment:
    trial = uuid.uuid4().hex[:8]
    if provider == "local":
        request.getfixturevalue("need_bwrap")
        return LocalEnvironment(SandboxSpec(), trial_id=trial, run_id="streamed")
    request.getfixturevalue("need_docker")
    return DockerEnvironment(SandboxSpec(image="debian:bookworm-slim"), trial_id=trial,
                             run_id="streamed")  # fmt: skip


#: a root agent's work: find and awk say nothing (the sandbox's own measurement then
#: passes anything), wherever the sandbox's PATH finds them first
BLIND = (
    "for tool in find awk; do for dir in /usr/local/sbin /usr/local/bin /usr/sbin "
    "/usr/bin /sbin /bin; do (printf '#!/bin/sh\\nexit 0\\n' > $dir/$tool && "
    "chmod 755 $dir/$tool) 2>/dev/null; done; done; true"
)


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of archive the host received, in all."""
    seen = [0]
    add = safe_copy.Spool.add

    def counting(self: Spool, data: bytes) -> None:
        seen[0] += len(data)
        add(self, data)

    monkeypatch.setattr(safe_copy.Spool, "add", counting)
    return seen


PROVIDERS = [pytest.param("local", marks=pytest.mark.bwrap),
             pytest.param("docker", marks=pytest.mark.docker)]  # fmt: skip


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_2_tb_sparse_file_is_refused_at_its_header_without_find_or_awk(
    provider: str, request: pytest.FixtureRequest, tmp_path: Path, received: list[int]
) -> None:
    """On docker a root agent can replace the image's tools; the local sandbox's are the
    host's, read-only (and its files stop at 2 GiB): there the file is 1.5 GiB."""
    env = _sandbox(provider, request)
    size = "2T" if provider == "docker" else "1500M"

    async def go() -> None:
        await env.start()
        try:
            made = await env.exec(f"{BLIND}; mkdir -p /logs/artifacts && "
                                  f"truncate -s {size} /logs/artifacts/big", cwd="/",
                                  user=ROOT)  # fmt: skip
            assert made.ok, made.stderr[-500:]
            with pytest.raises(UnsafeDownload, match="larger than"):
                await env.download("/logs/artifacts", tmp_path / "out")
        finally:
            await env.stop()

    asyncio.run(go())
    assert received[0] < 16 * MiB, received  # before: the whole bound, about 1 GiB


@pytest.mark.docker
def test_a_hostile_tar_in_the_sandbox_is_refused_at_its_header(
    request: pytest.FixtureRequest, tmp_path: Path, received: list[int]
) -> None:
    """A root agent replaced the image's tar: the 'archive' it streams starts with a GNU
    long-name header of 900 MiB."""
    env = _sandbox("docker", request)
    header = _header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 900 * MiB)

    async def go() -> None:
        await env.start()
        try:
            await env.exec("mkdir -p /logs/artifacts && echo ok > /logs/artifacts/ok", cwd="/",
                           user=ROOT)  # fmt: skip
            staged = tmp_path / "header"
            staged.write_bytes(header)
            await env.upload(staged, "/opt/header")
            fake = "#!/bin/sh\ncat /opt/header; exec head -c 943718400 /dev/zero\n"
            staged.write_text(fake)
            await env.upload(staged, "/opt/faketar")
            replaced = await env.exec(
                "for t in /usr/bin/tar /bin/tar; do cp /opt/faketar $t; chmod 755 $t; done; "
                "tar | head -c 512 | wc -c", cwd="/", user=ROOT)  # fmt: skip
            assert replaced.ok and replaced.stdout.strip() == "512", replaced
            with pytest.raises(UnsafeDownload, match="archive header of 943718400 bytes"):
                await env.download("/logs/artifacts", tmp_path / "out")
        finally:
            await env.stop()

    asyncio.run(go())
    assert received[0] < 16 * MiB, received
