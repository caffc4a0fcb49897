"""A local sandbox's folder on the host: made, mounted and laid out in one step that
leaves nothing behind when it fails; removed without reading the host's whole mount
table, and with it when a mount may remain; uploads' archives kept only while their
folder is unchanged."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import helios.environments.local.cleanup as _local_cleanup
import helios.environments.local.root as _local_root
import helios.environments.shell.tar as _tar
from helios.environments.local.root import create_root, mounts_under, unmount_own
from helios.errors import EnvironmentStartError


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("HELIOS_REQUIRE_ROOT_TESTS") == "1":
            pytest.fail("this test mounts a tmpfs and needs root")
        pytest.skip("mounting a tmpfs needs root")


@pytest.fixture
def sandbox_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # Not under pytest's 0700 folder: the sandbox user must reach it.
    base = Path(tempfile.mkdtemp(prefix="helios-test-sandboxes-"))
    base.chmod(0o755)
    monkeypatch.setenv("HELIOS_SANDBOX_DIR", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _is_mount(path: Path) -> bool:
    return os.stat(path).st_dev != os.stat(path.parent).st_dev


@pytest.mark.usefixtures("as_root")
def test_create_root_mounts_and_lays_out_in_one_step(sandbox_dir: Path, tmp_path: Path) -> None:
    """The root's tmpfs is mounted in a namespace of its own: the host's mount table
    does not grow with the sandboxes running, and the host still reaches the files."""
    env = tmp_path / "env"
    env.mkdir()
    (env / "data.txt").write_text("x")
    (env / "Dockerfile").write_text("FROM scratch\n")
    holder, laid_out, namespace = create_root("run", "trial", 64, "/app", env)
    root = holder / "root"
    assert laid_out and namespace is not None
    assert not _is_mount(root) and mounts_under(sandbox_dir) == []  # not in the host's table
    view = namespace.host_root()
    assert (view / "app" / "data.txt").read_text() == "x"
    assert not (view / "app" / "Dockerfile").exists()
    assert (view / "app").stat().st_uid == 65534
    size = os.statvfs(view)
    assert size.f_blocks * size.f_frsize == 64 << 20  # the tmpfs of the storage size
    asyncio.run(_local_cleanup.remove_holder(holder, scan=False))
    namespace.close()
    assert not holder.exists() and mounts_under(sandbox_dir) == []


@pytest.mark.usefixtures("as_root")
def test_without_nsenter_the_root_is_mounted_in_the_hosts_namespace(
    sandbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_local_root, "tool", lambda name: None if name == "nsenter"
                        else shutil.which(name))  # fmt: skip
    holder, laid_out, namespace = create_root("run", "trial", 64, "/app", None)
    root = holder / "root"
    assert laid_out and namespace is None and _is_mount(root) and (root / "app").is_dir()
    asyncio.run(_local_cleanup.remove_holder(holder, scan=False))
    assert not holder.exists() and mounts_under(sandbox_dir) == []


@pytest.mark.usefixtures("as_root")
def test_a_failed_layout_leaves_no_folder_and_no_mount(sandbox_dir: Path) -> None:
    with pytest.raises(EnvironmentStartError, match="leaves the sandbox"):
        create_root("run", "trial", 64, "/app/../../etc", None)
    assert list(sandbox_dir.iterdir()) == []
    assert mounts_under(sandbox_dir) == []


@pytest.mark.usefixtures("as_root")
def test_unmount_own_unmounts_the_root_and_what_is_stacked_on_it(tmp_path: Path) -> None:
    root = tmp_path / "holder" / "root"
    (root).mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "x", str(root)], check=True)
    (root / "sub").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "y", str(root / "sub")], check=True)
    assert unmount_own(root)
    assert not _is_mount(root) and mounts_under(root) == []
    assert unmount_own(root)  # a plain folder: nothing to do


@pytest.mark.usefixtures("as_root")
def test_without_libc_the_removal_falls_back_to_the_mount_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = tmp_path / "holder"
    (holder / "root").mkdir(parents=True)
    (holder / "root" / "file").parent.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "x", str(holder / "root")], check=True)
    (holder / "root" / "file").write_text("kept until unmounted")
    monkeypatch.setattr(_local_root, "_libc", lambda: None)
    assert not unmount_own(holder / "root")
    # Never a delete across a mount: the careful path unmounts by command, then deletes.
    asyncio.run(_local_cleanup.remove_holder(holder, scan=False))
    assert not holder.exists() and mounts_under(tmp_path) == []


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {
            m.name: (tar.extractfile(m).read() if m.isfile() else b"")  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


def test_pack_keeps_an_archive_only_while_its_folder_is_unchanged(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "test.sh").write_text("echo 1\n")
    (tests / "sub" / "a.txt").write_text("a")
    first = _tar.pack(tests, "payload")
    assert _tar.pack(tests, "payload") is first  # kept
    assert _members(first)["payload/sub/a.txt"] == b"a"
    (tests / "sub" / "a.txt").write_text("b")  # same size, new content
    changed = _tar.pack(tests, "payload")
    assert _members(changed)["payload/sub/a.txt"] == b"b"
    (tests / "sub" / "new.txt").write_text("n")
    assert "payload/sub/new.txt" in _members(_tar.pack(tests, "payload"))
    (tests / "test.sh").chmod(0o700)
    assert _tar.pack(tests, "payload") == _tar._pack(tests, "payload")
    # Another name for the same folder is another archive.
    assert "other/test.sh" in _members(_tar.pack(tests, "other"))


def test_pack_of_a_large_or_missing_folder_is_not_kept(tmp_path: Path) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for i in range(300):
        (many / f"f{i}").write_text("x")
    assert _tar.pack(many, "p") is not _tar.pack(many, "p")
    single = tmp_path / "one.txt"
    single.write_text("1")
    assert _members(_tar.pack(single, "payload")) == {"payload": b"1"}
    with pytest.raises(FileNotFoundError):
        _tar.pack(tmp_path / "missing", "payload")


@pytest.mark.usefixtures("need_bwrap")
def test_a_cancel_during_the_start_leaves_no_folder_behind(sandbox_dir: Path) -> None:
    from helios.environments.local import LocalEnvironment
    from helios.environments.spec import SandboxSpec

    async def cancel_after(turns: int) -> None:
        env = LocalEnvironment(SandboxSpec(label="t"), trial_id="t", run_id="r")
        starting = asyncio.ensure_future(env.start())
        for _ in range(turns):
            await asyncio.sleep(0)
        starting.cancel()
        try:
            await starting
        except asyncio.CancelledError:
            pass
        finally:
            await env.stop()  # what a trial's `finally` does

    asyncio.run(cancel_after(100))  # warm: lazy imports, the shell's build
    fds = len(os.listdir("/proc/self/fd"))
    for turns in (0, 1, 2, 3, 5, 8, 13, 30, 100):
        asyncio.run(cancel_after(turns))
        assert list(sandbox_dir.iterdir()) == [], f"left behind after {turns} turns"
    assert mounts_under(sandbox_dir) == []
    # nor an fd of the root's mount namespace (which would keep its tmpfs alive)
    assert len(os.listdir("/proc/self/fd")) == fds


@pytest.mark.usefixtures("as_root")
def test_without_libc_the_tmpfs_is_mounted_by_command(
    sandbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_local_root, "_libc", lambda: None)
    holder, laid_out, namespace = create_root("run", "trial", 64, "/app", None)
    assert namespace is None
    root = holder / "root"
    assert not laid_out and not _is_mount(root) and list(root.iterdir()) == []
    asyncio.run(_local_root.mount_by_command(root, 64))
    _local_root.populate(root, "/app", None)
    assert _is_mount(root) and (root / "app").is_dir()
    assert "size=65536k" in next(
        line for line in Path("/proc/self/mounts").read_text().splitlines() if str(root) in line
    )
    asyncio.run(_local_cleanup.remove_holder(holder, scan=False))
    assert list(sandbox_dir.iterdir()) == [] and mounts_under(sandbox_dir) == []


@pytest.mark.usefixtures("as_root")
@pytest.mark.parametrize("own_namespace", [True, False])
def test_a_folder_left_by_a_killed_process_is_cleaned_up(
    sandbox_dir: Path, own_namespace: bool
) -> None:  # fmt: skip
    """The child makes a sandbox folder (tmpfs mounted, laid out) and dies by SIGKILL.
    In the root's own namespace the tmpfs dies with it: only the folder is left; in
    the host's (no nsenter), the mount is left too. Cleanup removes what is left."""
    hide = "" if own_namespace else (
        "import helios.environments.local.root as r, shutil; "
        "r.tool = lambda n: None if n == 'nsenter' else shutil.which(n); "
    )  # fmt: skip
    code = (
        f"import os, signal; {hide}from helios.environments.local.root import create_root; "
        "create_root('run-k', 't', 64, '/app', None); os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, timeout=60)
    assert done.returncode == -9
    [holder] = list(sandbox_dir.iterdir())
    assert _is_mount(holder / "root") is not own_namespace
    removed = asyncio.run(_local_cleanup.cleanup_sandboxes(None))  # dead owners only
    assert removed == [str(holder)]
    assert list(sandbox_dir.iterdir()) == [] and mounts_under(sandbox_dir) == []


def test_pack_of_a_folder_with_a_link_keeps_the_link_not_its_target(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tmp_path / "secret").write_text("host secret")
    (tests / "leak").symlink_to(tmp_path / "secret")
    for _ in range(2):  # packed, then from the cache
        with tarfile.open(fileobj=io.BytesIO(_tar.pack(tests, "payload"))) as tar:
            member = tar.getmember("payload/leak")
            assert member.issym() and member.linkname == str(tmp_path / "secret")


@pytest.mark.usefixtures("as_root", "need_bwrap")
def test_running_sandboxes_add_nothing_to_the_hosts_mount_table(sandbox_dir: Path) -> None:
    """Each bwrap reads the mount table it starts in, once per bind: the sandboxes'
    tmpfs live in namespaces of their own, so a start does not grow dearer with the
    sandboxes running. The host still reaches a sandbox's exchange folder."""
    from helios.environments.local import LocalEnvironment
    from helios.environments.spec import SandboxSpec

    async def go() -> None:
        envs = [LocalEnvironment(SandboxSpec(label="t"), trial_id=f"t{i}", run_id="r")
                for i in range(3)]  # fmt: skip
        try:
            for env in envs:
                await env.start()
            assert mounts_under(sandbox_dir) == []
            inside = await envs[1].exec("wc -l < /proc/self/mountinfo; df -k / | tail -1",
                                        cwd="/")  # fmt: skip
            lines, usage = inside.stdout.splitlines()
            assert int(lines) < 40, inside  # the binds only, not the host's nor the others'
            assert usage.startswith("helios-sandbox ") and str(2 << 20) in usage, usage
            exchange = envs[2].exchange_dir()
            assert exchange is not None
            await envs[2].exec(f"echo here > {exchange[0]}/probe", cwd="/")
            assert (exchange[1] / "probe").read_text() == "here\n"
        finally:
            for env in envs:
                await env.stop()

    asyncio.run(go())
    assert list(sandbox_dir.iterdir()) == []
