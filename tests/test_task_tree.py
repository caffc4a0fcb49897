"""The one-walk loader gives what the glob-based one gave: the same task folders
found, and the same content hashes (a trial's identity depends on them), on a tree
with the cases that tell two orders or two walks apart."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from helios.errors import TaskFormatError
from helios.tasks.task import discover_tasks, load_task
from helios.tasks.task_tree import tree_checksum, tree_digests


def _old_tree_checksum(root: Path) -> str:
    """The hash as it was first written (Path.rglob, Path order)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = file.relative_to(root).as_posix()
        digest.update(relative.encode() + b"\0")
        digest.update(b"x" if file.stat().st_mode & 0o111 else b"-")
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def _tricky(root: Path) -> Path:
    """Names whose string order and parts order differ ('a-b' against 'a/b'), a dot
    file, an executable, an empty folder, a large file, links to a file and a folder."""
    task = root / "tricky"
    files = {"task.toml": "[environment]\ndocker_image = 'x:1'\n", "instruction.md": "Do it.\n",
             "tests/test.sh": "exit 0\n", "a-b": "1", "a/b": "2", "a/b-c/d": "3", "a.b": "4",
             "environment/Dockerfile": "FROM x\n", "environment/.hidden": "h",
             "environment/sub/file": "s", "tests/Dockerfile": "FROM y\n"}  # fmt: skip
    for name, text in files.items():
        (task / name).parent.mkdir(parents=True, exist_ok=True)
        (task / name).write_text(text)
    (task / "tests" / "test.sh").chmod(0o755)
    (task / "empty").mkdir()
    (task / "environment" / "big.bin").write_bytes(os.urandom(3 << 20))
    (task / "link-to-file").symlink_to("a/b")
    (task / "link-to-folder").symlink_to("environment")
    return task


def test_hashes_are_the_ones_the_old_walk_gave(tmp_path: Path) -> None:
    task = _tricky(tmp_path)
    assert tree_checksum(task) == _old_tree_checksum(task)
    total, subs = tree_digests(task, ["environment", "tests", "missing"])
    assert total == _old_tree_checksum(task)
    assert subs == {"environment": _old_tree_checksum(task / "environment"),
                    "tests": _old_tree_checksum(task / "tests")}  # fmt: skip
    loaded = load_task(task)
    assert loaded.checksum == total and loaded.environment_hash == subs["environment"]
    assert loaded.tests_hashes == {"tests": subs["tests"]}
    # a listing takes no hash at load, and the same one when asked
    assert load_task(task, digests=False).checksum == total


def test_a_subfolder_that_is_a_link_is_hashed_as_its_own_root(tmp_path: Path) -> None:
    task = _tricky(tmp_path)
    (task / "environment").rename(task / "env-real")
    (task / "environment").symlink_to("env-real")
    total, subs = tree_digests(task, ["environment"])
    assert total == _old_tree_checksum(task)
    assert subs == {"environment": _old_tree_checksum(task / "environment")}


def test_discovery_finds_what_the_glob_found(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    for name in ("b", "a", "n/c", "n/c/tests/inner", ".hidden/d", "x-y", "x/y"):
        (root / name).mkdir(parents=True)
        (root / name / "task.toml").write_text("")
    (root / "outside").mkdir()
    (root / "outside" / "task.toml").write_text("")
    (root / "via-link").symlink_to(root / "outside")  # a folder link: not entered
    (root / "dangling").mkdir()
    (root / "dangling" / "task.toml").symlink_to(root / "nowhere")
    (root / "folder-named").mkdir()
    (root / "folder-named" / "task.toml").mkdir()
    old = sorted({p.parent.resolve() for p in root.glob("**/task.toml")}, key=str)
    assert discover_tasks(root) == old
    assert discover_tasks(root, "*/task.toml") == [p for p in old if p.parent == root]


def test_a_listing_refuses_a_file_name_the_hash_could_not_take(tmp_path: Path) -> None:
    task = _tricky(tmp_path)
    bad = os.fsencode(task / "tests") + b"/\xff.txt"
    with open(bad, "wb") as handle:
        handle.write(b"x")
    for digests in (True, False):
        with pytest.raises(UnicodeEncodeError):
            load_task(task, digests=digests)


def test_a_link_out_of_the_folder_is_still_refused(tmp_path: Path) -> None:
    task = _tricky(tmp_path)
    (task / "environment" / "leak").symlink_to("/etc")
    with pytest.raises(TaskFormatError, match=r"symlink leaves the task folder \(environment/leak"):
        load_task(task, digests=False)
