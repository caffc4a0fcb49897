"""Datasets by name: `-d NAME@VERSION` against a registry in Harbor's format.

A registry (`registry.json`, a path or an http(s) URL) is a JSON list of datasets:

    [{"name": "hello", "version": "1.0", "description": "...",
      "tasks": [{"name": "hello-file", "git_url": "https://github.com/o/r.git",
                 "git_commit_id": "<40 hex digits>", "path": "tasks/hello-file"}],
      "metrics": [...]}]

Each task is fetched with git at its pinned commit into the datasets cache
(`HELIOS_DATASETS_DIR`, default `~/.cache/helios/datasets`): one checkout per
repository and commit, at `repos/<hash of the URL>/<commit>`, fetched once and
verified by commit (`git rev-parse HEAD`). A checkout is made in a temporary folder
beside its place and renamed into it under a file lock, so two processes fetching
at once never see or leave half a checkout; a `<commit>.verified` file beside it
marks it complete. A cached dataset runs offline: no git is run for it.

With no registry named, `-d` reads `HELIOS_REGISTRY`, else Harbor's published one
(`DEFAULT_REGISTRY`, the URL Harbor's own `-d` uses). A registry read from a URL is
kept in the cache (`registries/<hash of the URL>.json`); when the URL cannot be read
(offline), that copy is used, and the dataset says so (`Dataset.from_cache`).

A registry is input from elsewhere: a task path that is absolute, has `..` or
leads out of its checkout (through a link), a commit that is not a full hash, or a
git URL with a transport helper (`ext::`, `fd::`) or an option's dash is refused
in one line naming the registry, the dataset and the field.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from helios.errors import InputError
from helios.settings import current as helios_settings

#: a full commit hash (SHA-1, or SHA-256 for a repository in that format)
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
#: the git URL forms a registry may use
_URL_SCHEMES = ("https://", "http://", "git://", "ssh://", "file://")
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^:]")
#: what git may speak while fetching a dataset (never `ext`, which runs a command)
ALLOWED_PROTOCOLS = "file:git:http:https:ssh"
#: a registry read from a URL is at most this big
MAX_REGISTRY_BYTES = 64 * 1024 * 1024
#: the registry `-d` reads when none is named: Harbor's (its `DEFAULT_REGISTRY_URL`)
DEFAULT_REGISTRY = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"
REGISTRY_TIMEOUT = 30.0
GIT_TIMEOUT = 600.0


@dataclass(frozen=True)
class DatasetTask:
    name: str
    git_url: str
    commit: str
    #: the task's folder in the repository (POSIX, relative, no `..`)
    path: str


@dataclass(frozen=True)
class Dataset:
    name: str
    version: str
    registry: str
    tasks: tuple[DatasetTask, ...]
    #: why the registry was read from the cache's copy (its URL could not be read)
    from_cache: str | None = None


@dataclass
class FetchedDataset:
    dataset: Dataset
    #: each task's folder in the cache, in the registry's order
    task_dirs: list[Path] = field(default_factory=list)
    #: the checkouts fetched now (the others came from the cache)
    fetched: int = 0

    def record(self) -> dict[str, Any]:
        """What run.json records: the dataset, its version and each task's commit."""
        d = self.dataset
        return {"name": d.name, "version": d.version, "registry": d.registry,
                "tasks": [{"name": t.name, "git_url": t.git_url, "commit": t.commit,
                           "path": t.path} for t in d.tasks]}  # fmt: skip


def dataset_tasks(
    reference: str, registry: str | None = None, cache: Path | None = None
) -> FetchedDataset:
    """The dataset `reference` (NAME@VERSION) of `registry` (None: `default_registry()`),
    its tasks in the cache."""
    return fetch_dataset(find_dataset(reference, registry or default_registry(), cache), cache)


def default_registry() -> str:
    """`HELIOS_REGISTRY`, else Harbor's published registry."""
    return helios_settings().registry or DEFAULT_REGISTRY


def dataset_of_record(record: dict[str, Any], where: str) -> Dataset:
    """The dataset a run recorded (`FetchedDataset.record`), checked as a registry's:
    a resume fetches its tasks again when the cache lost them."""
    tasks = record.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise InputError("a dataset lists its tasks", file=where, field="dataset.tasks")
    checked = tuple(
        _task({**t, "git_commit_id": t.get("commit")} if isinstance(t, dict) else t, where,
              f"dataset.tasks[{i}]")
        for i, t in enumerate(tasks)
    )  # fmt: skip
    return Dataset(name=str(record.get("name")), version=str(record.get("version")),
                   registry=str(record.get("registry")), tasks=checked)  # fmt: skip


def datasets_dir() -> Path:
    configured = helios_settings().datasets_dir
    return Path(configured).expanduser() if configured else (
        Path.home() / ".cache" / "helios" / "datasets")  # fmt: skip


def parse_reference(reference: str) -> tuple[str, str | None]:
    """'name@1.0' → ('name', '1.0'); 'name' → ('name', None)."""
    name, _, version = reference.partition("@")
    if not name.strip() or (("@" in reference) and not version.strip()):
        raise InputError(f"expected NAME@VERSION, not {reference!r}", field="--dataset")
    return name.strip(), version.strip() or None


def read_registry(source: str, cache: Path | None = None) -> list[Any]:
    """The registry's datasets (a JSON list), from a path or an http(s) URL."""
    return _registry(source, cache)[0]


def _registry(source: str, cache: Path | None = None) -> tuple[list[Any], str | None]:
    """The registry's datasets, and why the cache's copy was read (None: it was not)."""
    from_cache: str | None = None
    try:
        if source.startswith(("https://", "http://")):
            raw, from_cache = _fetch_registry(source, cache)
        else:
            raw = Path(source).expanduser().read_bytes()
        data = json.loads(raw)
    except InputError:
        raise
    except OSError as exc:
        raise InputError(f"cannot read the registry: {getattr(exc, 'strerror', None) or exc}",
                         file=source, field="--registry") from None  # fmt: skip
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise InputError(f"not valid JSON: {str(exc)[:120]}", file=source) from None
    if isinstance(data, dict) and isinstance(data.get("datasets"), list):
        data = data["datasets"]  # a registry object with its datasets inside
    if not isinstance(data, list):
        raise InputError("expected a list of datasets", file=source)
    return data, from_cache


def _fetch_registry(url: str, cache: Path | None) -> tuple[bytes, str | None]:
    """The registry at `url`, its copy kept in the cache; when the URL cannot be read,
    that copy (and why). One line when there is none."""
    copy = (cache or datasets_dir()) / "registries" / (
        hashlib.sha256(url.encode()).hexdigest()[:20] + ".json")  # fmt: skip
    try:
        with urllib.request.urlopen(url, timeout=REGISTRY_TIMEOUT) as response:
            raw: bytes = response.read(MAX_REGISTRY_BYTES + 1)
    except (OSError, ValueError) as exc:  # URLError, a timeout, a refused connection
        reason = str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)
        try:
            return copy.read_bytes(), f"{url} could not be read ({reason[:120]})"
        except OSError:
            raise InputError(f"cannot read the registry ({reason[:120]}) and no copy of it is "
                             "cached: give --registry PATH (a registry.json on disk)",
                             file=url, field="--registry") from None  # fmt: skip
    if len(raw) > MAX_REGISTRY_BYTES:
        raise InputError(f"larger than {MAX_REGISTRY_BYTES:,} bytes", file=url)
    try:
        json.loads(raw)  # only a registry that parses replaces the cached copy
        copy.parent.mkdir(parents=True, exist_ok=True)
        tmp = copy.with_name(f".{copy.name}.{os.getpid()}.tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, copy)
    except (OSError, ValueError, RecursionError):
        pass  # no copy kept: the registry is still read (and its JSON checked) below
    return raw, None


def find_dataset(reference: str, registry: str, cache: Path | None = None) -> Dataset:
    """The dataset `reference` (NAME@VERSION) names in `registry`, checked."""
    name, version = parse_reference(reference)
    entries, from_cache = _registry(registry, cache)
    named = [(i, e) for i, e in enumerate(entries) if isinstance(e, dict) and e.get("name") == name]
    if not named:
        raise InputError(f"no dataset {name!r} in the registry", file=registry, field="--dataset")
    versions = [str(e.get("version")) for _, e in named]
    if version is None:
        if len(named) > 1:
            raise InputError(f"{name} has several versions ({', '.join(versions)}): give "
                             f"{name}@VERSION", file=registry, field="--dataset")  # fmt: skip
        index, entry = named[0]
    else:
        found = [(i, e) for i, e in named if str(e.get("version")) == version]
        if not found:
            raise InputError(
                f"no version {version} of {name} (there are: {', '.join(versions)})",
                file=registry, field="--dataset",
            )  # fmt: skip
        index, entry = found[0]
    tasks = entry.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise InputError("a dataset lists its tasks", file=registry, field=f"[{index}].tasks")
    checked = tuple(_task(t, registry, f"[{index}].tasks[{i}]") for i, t in enumerate(tasks))
    return Dataset(name=name, version=str(entry.get("version")), registry=registry,
                   tasks=checked, from_cache=from_cache)  # fmt: skip


def _task(entry: Any, registry: str, where: str) -> DatasetTask:
    def fail(message: str, key: str) -> InputError:
        return InputError(message, file=registry, field=f"{where}.{key}")

    if not isinstance(entry, dict):
        raise InputError("expected an object", file=registry, field=where)
    url, commit, path = entry.get("git_url"), entry.get("git_commit_id"), entry.get("path")
    if not isinstance(url, str) or not url:
        raise fail("a task is fetched with git: give its git_url", "git_url")
    check_git_url(url, fail)
    if not isinstance(commit, str) or not _COMMIT.match(commit.lower()):
        raise fail("expected a full commit hash (40 hex digits): a dataset's tasks are "
                   "pinned", "git_commit_id")  # fmt: skip
    if not isinstance(path, str) or not path.strip():
        raise fail("expected the task's folder in the repository", "path")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or "\\" in path or path.startswith("~"):
        raise fail(f"the path {path!r} leads out of the repository", "path")
    name = entry.get("name")
    return DatasetTask(name=str(name) if name else pure.name, git_url=url,
                       commit=commit.lower(), path=pure.as_posix())  # fmt: skip


def check_git_url(url: str, fail: Any) -> None:
    """A URL git may fetch without running anything of the registry's choosing."""
    if url.startswith("-") or "::" in url or any(c in url for c in "\n\r\0"):
        raise fail(f"refused git URL {url[:80]!r}: a transport helper or an option", "git_url")
    if url.startswith(_URL_SCHEMES) or _SCP_LIKE.match(url) or url.startswith("/"):
        return
    raise fail(f"refused git URL {url[:80]!r}: use https://, ssh://, git://, file:// or an "
               "absolute path", "git_url")  # fmt: skip


# -- the cache ----------------------------------------------------------------------------
def fetch_dataset(dataset: Dataset, cache: Path | None = None) -> FetchedDataset:
    """Every task of `dataset` in the cache (fetched where missing): their folders."""
    root = (cache or datasets_dir()) / "repos"
    fetched = FetchedDataset(dataset)
    checkouts: dict[tuple[str, str], Path] = {}
    for task in dataset.tasks:
        key = (task.git_url, task.commit)
        if key not in checkouts:
            checkout, new = ensure_checkout(root, task)
            checkouts[key] = checkout
            fetched.fetched += new
        folder = checkouts[key] / task.path
        try:
            inside = folder.resolve(strict=True).is_relative_to(checkouts[key].resolve())
        except OSError:
            raise InputError(f"{task.name}: no folder {task.path} at commit {task.commit[:12]} "
                             f"of {task.git_url}", file=dataset.registry) from None  # fmt: skip
        if not inside:
            raise InputError(f"{task.name}: the path {task.path!r} leads out of the repository "
                             "(a link)", file=dataset.registry, field="path")  # fmt: skip
        fetched.task_dirs.append(folder)
    return fetched


def checkout_place(root: Path, task: DatasetTask) -> Path:
    digest = hashlib.sha256(task.git_url.encode()).hexdigest()[:20]
    return root / digest / task.commit


def ensure_checkout(root: Path, task: DatasetTask) -> tuple[Path, bool]:
    """The checkout of the task's repository at its commit, and whether it was fetched
    now (False: from the cache)."""
    place = checkout_place(root, task)
    marker = place.with_name(place.name + ".verified")
    if _verified(marker, task.commit) and place.is_dir():
        return place, False
    place.parent.mkdir(parents=True, exist_ok=True)
    with _locked(place.parent / ".lock"):
        if _verified(marker, task.commit) and place.is_dir():  # another process fetched it
            return place, False
        if place.exists():  # a checkout left without its marker: never trusted
            shutil.rmtree(place, ignore_errors=True)
        for stale in place.parent.glob(".fetch-*"):  # a fetch killed midway (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(prefix=".fetch-", dir=place.parent))
        scratch.chmod(0o755)  # as a clone would be: readable by a sandbox's other users
        try:
            _fetch(scratch, task)
            os.replace(scratch, place)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        tmp = marker.with_name(marker.name + ".tmp")
        tmp.write_text(task.commit + "\n", "utf-8")
        os.replace(tmp, marker)
    return place, True


def _verified(marker: Path, commit: str) -> bool:
    try:
        return marker.read_text("utf-8").strip() == commit
    except OSError:
        return False


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _fetch(folder: Path, task: DatasetTask) -> None:
    """The repository at the commit into `folder` (then without its `.git`), verified."""
    git(["init", "-q", str(folder)], task)
    git(["-C", str(folder), "fetch", "-q", "--depth", "1", "--", task.git_url, task.commit],
        task)  # fmt: skip
    git(["-C", str(folder), "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"],
        task)  # fmt: skip
    head = git(["-C", str(folder), "rev-parse", "HEAD"], task).strip()
    if head != task.commit:
        raise InputError(f"{task.name}: {task.git_url} gave commit {head[:12]}, not the "
                         f"pinned {task.commit[:12]}")  # fmt: skip
    shutil.rmtree(folder / ".git")


def git(args: list[str], task: DatasetTask) -> str:
    """Run git (no prompt, no transport that runs a command); one line on failure."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
           "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    try:
        done = subprocess.run(["git", "-c", "protocol.ext.allow=never", *args], env=env,
                              capture_output=True, text=True, timeout=GIT_TIMEOUT, check=False)
    except FileNotFoundError:
        raise InputError("git is not installed: it fetches a dataset's tasks") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{task.name}: git timed out fetching {task.git_url}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise InputError(f"{task.name}: cannot fetch {task.git_url} at {task.commit[:12]}: "
                         f"{last}")  # fmt: skip
    return done.stdout
