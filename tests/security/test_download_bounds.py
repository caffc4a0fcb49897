"""The host's checks on a download (issue 18), fed hostile archives and trees directly:
an archive header is bounded before tarfile reads it, and an entry the host cannot
hold is skipped and listed, never an OSError that fails the trial. The end-to-end
runs through the task door are in `test_sandbox_outputs.py`."""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import subprocess
import tarfile
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

import helios.environments.shell.safe_copy as _safe_copy
from helios.environments.docker import DockerEnvironment
from helios.environments.local.root import remove_if_unmounted
from helios.environments.shell.safe_copy import Bounds, UnsafeDownload, copy_out, extract_tar
from helios.environments.spec import SandboxSpec

MIB = 1 << 20
#: a test reader fails past this: the code under test read what a header claimed
GUARD = 16 * MIB


class Claimed(io.RawIOBase):
    """An archive whose `head` is followed by as many zeros as it claims, made as they
    are read (nothing is held); a read past GUARD fails the test, not the machine."""

    def __init__(self, head: bytes, zeros: int, tail: bytes = b"") -> None:
        self.data, self.zeros, self.tail = head, zeros, tail
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.position > GUARD:
            raise AssertionError(f"read {self.position} bytes: a claimed size was read whole")
        size = len(buffer)
        head_left = len(self.data) - self.position
        if head_left > 0:
            part = self.data[self.position : self.position + size]
        elif self.position - len(self.data) < self.zeros:
            part = bytes(min(size, self.zeros - (self.position - len(self.data))))
        else:
            offset = self.position - len(self.data) - self.zeros
            part = self.tail[offset : offset + size]
        buffer[: len(part)] = part
        self.position += len(part)
        return len(part)


def _header(kind: bytes, size: int, name: str = "././@LongLink") -> bytes:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


def _member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE) -> bytes:
    """One member as GNU tar writes it (a long name gets its own header first)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    body = data if kind == tarfile.REGTYPE else b""
    info.size = len(body)
    padding = b"\0" * (-len(body) % tarfile.BLOCKSIZE)
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + body + padding


def _dir(name: str) -> bytes:
    return _member(name, kind=tarfile.DIRTYPE)


END = b"\0" * (2 * tarfile.BLOCKSIZE)


@pytest.mark.parametrize(
    ("kind", "what"),
    [(tarfile.GNUTYPE_LONGNAME, "GNU long name"), (tarfile.GNUTYPE_LONGLINK, "GNU long link"),
     (tarfile.XHDTYPE, "pax record")],
)  # fmt: skip
def test_a_header_claiming_900_mib_is_refused_before_it_is_read(
    kind: bytes, what: str, tmp_path: Path
) -> None:
    """Before: tarfile read the claimed 900 MiB whole, twice over (1.9 GB per trial)."""
    archive = Claimed(_header(kind, 900 * MIB), 900 * MIB, _member("top/f") + END)
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeDownload, match=r"header of 943718400 bytes.*refused"):
            extract_tar(io.BufferedReader(archive), tmp_path / "out", what="test")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert archive.position < MIB, what
    assert peak < 4 * MIB, (what, peak)
    assert not (tmp_path / "out").exists()


def test_a_small_long_name_still_works(tmp_path: Path) -> None:
    name = "top/" + "/".join(["n" * 200] * 5) + "/f.txt"  # 1 KB: a GNU long-name header
    archive = io.BytesIO(_dir("top") + _member(name, b"deep\n") + END)
    assert extract_tar(archive, tmp_path / "out", what="test") == []
    assert (tmp_path / "out").joinpath(*name.split("/")[1:]).read_text() == "deep\n"


def test_a_chain_of_headers_is_refused(tmp_path: Path) -> None:
    """Each extended header makes tarfile recurse for the next: 2,000 in a row were a
    RecursionError (not an archive error) out of the download."""
    chain = b"".join(_header(tarfile.XHDTYPE, 0, "././@PaxHeader") for _ in range(2000))
    archive = io.BytesIO(_dir("top") + chain + _member("top/f") + END)
    with pytest.raises(UnsafeDownload, match="in a row"):
        extract_tar(archive, tmp_path / "out", what="test")


@pytest.mark.parametrize(
    "head",
    [_header(tarfile.XGLTYPE, 0, "././@PaxHeader"), _header(tarfile.GNUTYPE_SPARSE, 0, "top/s")],
    ids=["global-pax", "gnu-sparse"],
)
def test_what_tarfile_would_pile_up_is_refused(head: bytes, tmp_path: Path) -> None:
    """A global pax header adds to every later member and a sparse map is read whole
    from the data; neither GNU tar (without -S) nor the daemon writes one."""
    archive = io.BytesIO(_dir("top") + head + _member("top/f") + END)
    with pytest.raises(UnsafeDownload, match="refused"):
        extract_tar(archive, tmp_path / "out", what="test")


def test_entries_the_host_cannot_hold_are_skipped_and_listed(tmp_path: Path) -> None:
    """A path past the host's PATH_MAX (30 folders of 250 characters), a component
    past 255 bytes, a tree deeper than the bound, a file where a folder is and a
    folder where a file is: each is skipped and listed; the rest is extracted."""
    long_dir = "top/" + "/".join(f"{i:0250d}" for i in range(30))
    deep_dir = "top/" + "/".join(["d"] * 300)
    members = [
        _dir("top"),
        _member("top/ok.txt", b"ok\n"),
        _dir(long_dir),
        _member(long_dir + "/f", b"long\n"),
        _member("top/" + "x" * 300, b"component\n"),
        _dir(deep_dir),
        _member(deep_dir + "/f", b"deep\n"),
        _member("top/a", b"a file\n"),
        _member("top/a/b", b"under a file\n"),
        _dir("top/c"),
        _member("top/c", b"a file over a folder\n"),
        _member("top/bad-\udcff", b"not utf-8\n"),
        _member("top/fifo\udcfe", kind=tarfile.FIFOTYPE),
        _member("top/z.txt", b"last\n"),
    ]  # fmt: skip
    dst = tmp_path / "out"
    skipped = extract_tar(io.BytesIO(b"".join(members) + END), dst, what="test")
    assert (dst / "ok.txt").read_text() == "ok\n" and (dst / "z.txt").read_text() == "last\n"
    assert (dst / "a").read_text() == "a file\n" and (dst / "c").is_dir()
    assert (Path(os.fsdecode(bytes(dst) + b"/bad-\xff"))).read_text() == "not utf-8\n"
    assert not any(len(str(p)) > 4096 for p in dst.rglob("*"))
    assert any("x" * 300 in name for name in skipped)
    assert "top/a/b" in skipped and "top/c" in skipped
    assert "top/fifo\\xfe" in skipped  # shown as text any JSON writer takes
    json.dumps(skipped, ensure_ascii=False).encode("utf-8")


def test_a_full_disk_is_still_the_hosts_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_safe_copy, "_write_stream", full)
    archive = io.BytesIO(_dir("top") + _member("top/f", b"x") + END)
    with pytest.raises(OSError) as raised:
        extract_tar(archive, tmp_path / "out", what="test")
    assert raised.value.errno == errno.ENOSPC


def _deep(base: Path, names: list[str]) -> None:
    """Folders `names` nested in `base`, made through folder descriptors (no path
    is ever longer than one name)."""
    fd = os.open(base, os.O_RDONLY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as file:
            file.write("bottom\n")
    finally:
        os.close(fd)


def test_copy_out_skips_what_the_host_cannot_hold(tmp_path: Path) -> None:
    """The one-shot local path (a transfer folder the sandbox filled): a tree past
    PATH_MAX and one 1,500 folders deep (a RecursionError before) are skipped."""
    src = tmp_path / "payload"
    (src / "long").mkdir(parents=True)
    (src / "deep").mkdir()
    (src / "ok.txt").write_text("ok\n")
    _deep(src / "long", [f"{i:0250d}" for i in range(30)])
    _deep(src / "deep", ["d"] * 1500)
    dst = tmp_path / "out"
    try:
        skipped = copy_out(src, dst, what="test")
    finally:
        # shutil.rmtree (pytest's cleanup) recurses per level: `rm` does not
        subprocess.run(["rm", "-rf", "--", str(src)], check=True)
    assert (dst / "ok.txt").read_text() == "ok\n"
    assert any(name.startswith("long/") for name in skipped), skipped
    assert any(name.startswith("deep/d/d") for name in skipped), skipped
    assert max(len(p.relative_to(dst).parts) for p in dst.rglob("*")) <= 129


def test_a_sandbox_folder_of_any_depth_is_removed(tmp_path: Path) -> None:
    """A local sandbox's folder (its transfer folders; its root itself when Helios
    is not root) holds what the agent made: shutil.rmtree raised RecursionError on
    a tree 1,500 folders deep, and the sandbox stayed behind."""
    holder = tmp_path / "helios-sandbox-deep"
    (holder / "root").mkdir(parents=True)
    _deep(holder / "root", ["d"] * 1500)
    try:
        assert remove_if_unmounted(holder)
    finally:
        subprocess.run(["rm", "-rf", "--", str(holder)], check=True)
    assert not holder.exists()


def test_copy_out_refuses_a_huge_file_before_copying_it(tmp_path: Path) -> None:
    src = tmp_path / "payload"
    src.mkdir()
    with open(src / "big", "wb") as file:
        file.truncate(2 << 40)  # sparse: 2 TiB of apparent size, no disk
    dst = tmp_path / "out"
    with pytest.raises(UnsafeDownload, match="larger than"):
        copy_out(src, dst, what="test", bounds=Bounds(max_bytes=64 * MIB))
    assert not (dst / "big").exists()  # before: 64 MiB written, then refused


@pytest.mark.usefixtures("need_docker")
def test_a_hostile_container_tar_header_is_refused(tmp_path: Path) -> None:
    """End to end on docker's stream: root in the container replaces the image's tar
    (which the download runs) with one that writes a header claiming 900 MiB."""
    env = DockerEnvironment(SandboxSpec(image="debian:bookworm-slim"),
                            trial_id=uuid.uuid4().hex[:8], run_id="bounds")  # fmt: skip
    archive = tmp_path / "claim.tar"
    archive.write_bytes(_header(tarfile.GNUTYPE_LONGNAME, 900 * MIB) + bytes(8192))
    fake = tmp_path / "tar"
    fake.write_text("#!/bin/sh\nexec cat /opt/claim.tar\n")
    fake.chmod(0o755)

    async def go() -> None:
        await env.start()
        try:
            made = await env.exec("mkdir -p /logs/artifacts && echo ok > /logs/artifacts/ok.txt",
                                  cwd="/", user=0)  # fmt: skip
            assert made.ok, made
            await env.upload(archive, "/opt/claim.tar")
            await env.upload(fake, "/usr/bin/tar")  # the last upload its own tar makes
            started = time.monotonic()
            with pytest.raises(UnsafeDownload, match="header of 943718400 bytes"):
                await env.download("/logs/artifacts", tmp_path / "out")
            assert time.monotonic() - started < 30
            after = await env.exec("cat /logs/artifacts/ok.txt", cwd="/")
            assert after.stdout == "ok\n"  # the container is still there
        finally:
            await env.stop()

    asyncio.run(go())
