"""Datasets by name (issue 33): `-d NAME@VERSION` against a registry in Harbor's format,
served here by a registry file and a git repository made by the test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import helios.tasks.datasets as datasets
from helios.errors import InputError
from helios.tasks.datasets import dataset_tasks, find_dataset
from tests.cli_inprocess import helios_inprocess

EXAMPLES = Path(__file__).parents[1] / "examples" / "tasks"
IDENTITY = ["-c", "user.email=t@example.com", "-c", "user.name=t"]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *IDENTITY, *args], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with two example tasks under tasks/, and its commit."""
    repo = tmp_path / "repo"
    for name in ("hello-file", "word-count"):
        shutil.copytree(EXAMPLES / name, repo / "tasks" / name)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "two tasks")
    return repo, _git(repo, "rev-parse", "HEAD")


def _registry(path: Path, url: str, commit: str, version: str = "1.0",
              tasks: list[dict[str, Any]] | None = None) -> Path:  # fmt: skip
    listed = tasks or [
        {"name": name, "git_url": url, "git_commit_id": commit, "path": f"tasks/{name}"}
        for name in ("hello-file", "word-count")
    ]
    path.write_text(json.dumps([{"name": "hello", "version": version, "description": "two",
                                 "tasks": listed, "metrics": []}]))  # fmt: skip
    return path


@pytest.fixture
def counted_git(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every git command the dataset code runs."""
    calls: list[list[str]] = []
    real = datasets.git

    def counting(args: list[str], task: Any) -> str:
        calls.append(args)
        return real(args, task)

    monkeypatch.setattr(datasets, "git", counting)
    return calls


def test_a_registry_serves_a_dataset_once_then_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_git: list[list[str]]
) -> None:
    monkeypatch.setenv("HELIOS_DATASETS_DIR", str(tmp_path / "cache"))
    repo, commit = _repo(tmp_path)
    registry = _registry(tmp_path / "registry.json", str(repo), commit)
    listed = helios_inprocess("tasks", "list", "-d", "hello@1.0", "--registry", str(registry),
                              "--json", cwd=tmp_path)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows] == ["hello-file", "word-count"]
    assert all(r["path"].startswith(str(tmp_path / "cache")) for r in rows)
    assert any(call[2:3] == ["fetch"] or "fetch" in call for call in counted_git)
    assert "1 checkout(s) fetched now" in listed.stderr
    # the second run: the cache, no git at all (so it runs offline, the repository gone)
    counted_git.clear()
    shutil.rmtree(repo)
    again = helios_inprocess("tasks", "list", "-d", "hello@1.0", "--registry", str(registry),
                             "--json", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == rows
    assert counted_git == []
    assert "0 checkout(s) fetched now" in again.stderr


def test_a_changed_commit_is_a_new_fetch(tmp_path: Path, counted_git: list[list[str]]) -> None:
    cache = tmp_path / "cache"
    repo, first = _repo(tmp_path)
    registry = _registry(tmp_path / "registry.json", str(repo), first)
    one = dataset_tasks("hello@1.0", str(registry), cache)
    assert one.fetched == 1
    (repo / "tasks" / "hello-file" / "instruction.md").write_text("Changed.\n")
    _git(repo, "commit", "-qam", "change")
    second = _git(repo, "rev-parse", "HEAD")
    _registry(registry, str(repo), second)
    counted_git.clear()
    two = dataset_tasks("hello@1.0", str(registry), cache)
    assert two.fetched == 1 and counted_git
    assert (two.task_dirs[0] / "instruction.md").read_text() == "Changed.\n"
    assert (one.task_dirs[0] / "instruction.md").read_text() != "Changed.\n"  # kept apart
    assert two.record()["tasks"][0]["commit"] == second


def test_a_missing_dataset_offline_is_one_line(tmp_path: Path) -> None:
    registry = _registry(tmp_path / "registry.json", str(tmp_path / "gone"), "a" * 40)
    cache = {"HELIOS_DATASETS_DIR": str(tmp_path / "c")}
    done = helios_inprocess("tasks", "list", "-d", "hello@1.0", "--registry", str(registry),
                            cwd=tmp_path, env=cache)  # fmt: skip
    assert done.returncode == 2
    assert "cannot fetch" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    unknown = helios_inprocess("tasks", "list", "-d", "hello@9", "--registry", str(registry),
                               cwd=tmp_path)  # fmt: skip
    assert unknown.returncode == 2 and "no version 9 of hello (there are: 1.0)" in unknown.stderr


@pytest.mark.parametrize(
    ("change", "field"),
    [({"path": "../outside"}, "path"), ({"path": "/etc"}, "path"),
     ({"git_url": "ext::sh -c touch% /tmp/helios-pwned"}, "git_url"),
     ({"git_url": "--upload-pack=touch /tmp/helios-pwned"}, "git_url"),
     ({"git_commit_id": "main"}, "git_commit_id")],
)  # fmt: skip
def test_a_hostile_registry_is_refused_in_one_line(
    tmp_path: Path, change: dict[str, str], field: str, counted_git: list[list[str]]
) -> None:
    task = {"name": "t", "git_url": "/nowhere", "git_commit_id": "b" * 40, "path": "t", **change}
    registry = _registry(tmp_path / "registry.json", "", "", tasks=[task])
    with pytest.raises(InputError) as caught:
        find_dataset("hello@1.0", str(registry))
    assert caught.value.field == f"[0].tasks[0].{field}"
    assert str(registry) in str(caught.value) and "\n" not in str(caught.value)
    done = helios_inprocess("tasks", "list", "-d", "hello@1.0", "--registry", str(registry),
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert counted_git == []  # refused before any git runs


def test_a_task_path_that_leads_out_through_a_link_is_refused(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    (repo / "escape").symlink_to("/etc")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "a link out")
    commit = _git(repo, "rev-parse", "HEAD")
    task = {"name": "evil", "git_url": str(repo), "git_commit_id": commit, "path": "escape"}
    registry = _registry(tmp_path / "registry.json", "", "", tasks=[task])
    with pytest.raises(InputError, match="leads out of the repository"):
        dataset_tasks("hello@1.0", str(registry), tmp_path / "cache")


def test_two_processes_fetching_at_once_share_one_checkout(tmp_path: Path) -> None:
    repo, commit = _repo(tmp_path)
    registry = _registry(tmp_path / "registry.json", str(repo), commit)
    script = ("import json, sys; from pathlib import Path; "
              "from helios.tasks.datasets import dataset_tasks; "
              "f = dataset_tasks('hello@1.0', sys.argv[1], Path(sys.argv[2])); "
              "print(json.dumps([f.fetched, [str(p) for p in f.task_dirs]]))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(registry), str(tmp_path / "c")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]  # fmt: skip
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outs
    results = [json.loads(out) for out, _ in outs]
    assert sorted(r[0] for r in results) == [0, 1]  # one fetched, the other waited and used it
    assert results[0][1] == results[1][1]
    repos = tmp_path / "c" / "repos"
    leftovers = [p.name for p in repos.glob("*/.fetch-*")]
    assert leftovers == []
    assert (Path(results[0][1][0]) / "task.toml").is_file()


@pytest.mark.usefixtures("need_bwrap")
def test_a_run_records_the_dataset_and_each_commit(tmp_path: Path) -> None:
    repo, commit = _repo(tmp_path)
    registry = _registry(tmp_path / "registry.json", str(repo), commit)
    done = helios_inprocess(
        "batch", "-d", "hello@1.0", "--registry", str(registry), "--agent", "nop",
        "--provider", "local", "-o", "out", "-q", "--limit", "1", cwd=tmp_path,
        env={"HELIOS_DATASETS_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    recorded = run["dataset"]
    assert (recorded["name"], recorded["version"]) == ("hello", "1.0")
    assert [t["commit"] for t in recorded["tasks"]] == [commit, commit]
    assert run["config"]["price_source"]["source"] == "genai-prices"
    # its cache cleared, a resume fetches the recorded commits again
    shutil.rmtree(tmp_path / "cache")
    again = helios_inprocess("batch", "--resume", str(run_dir), "-q", cwd=tmp_path,
                             env={"HELIOS_DATASETS_DIR": str(tmp_path / "cache")})  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert list((tmp_path / "cache" / "repos").glob(f"*/{commit}.verified"))


def test_a_job_file_names_a_dataset(tmp_path: Path) -> None:
    from helios.tasks.job import load_job

    job = tmp_path / "jobs" / "job.yaml"
    job.parent.mkdir()
    job.write_text("dataset: hello@1.0\nregistry: ../registry.json\ninclude: hello-*\n")
    loaded = load_job(job)
    assert loaded.dataset == "hello@1.0" and loaded.include == ["hello-*"]
    assert loaded.registry == str(tmp_path / "jobs" / "../registry.json")
    url = tmp_path / "url.yaml"
    url.write_text("dataset: hello@1.0\nregistry: https://example.com/registry.json\n")
    assert load_job(url).registry == "https://example.com/registry.json"


def test_a_registry_may_be_a_url(tmp_path: Path) -> None:
    import http.server
    import threading
    from functools import partial

    repo, commit = _repo(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    _registry(served / "registry.json", str(repo), commit)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/registry.json"
        fetched = dataset_tasks("hello@1.0", url, tmp_path / "cache")
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert [p.name for p in fetched.task_dirs] == ["hello-file", "word-count"]
    assert fetched.record()["registry"] == url


class _Served:
    """A folder served on 127.0.0.1 until `stop()` (a registry's URL, never the real one)."""

    def __init__(self, folder: Path) -> None:
        import http.server
        import threading
        from functools import partial

        handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/registry.json"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_no_registry_means_helios_registry_else_harbors_and_offline_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HELIOS_REGISTRY", raising=False)
    assert datasets.default_registry() == datasets.DEFAULT_REGISTRY == (
        "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json")
    repo, commit = _repo(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    _registry(served / "registry.json", str(repo), commit)
    server = _Served(served)
    env = {"HELIOS_REGISTRY": server.url, "HELIOS_DATASETS_DIR": str(tmp_path / "cache")}
    try:
        online = helios_inprocess("tasks", "list", "-d", "hello@1.0", cwd=tmp_path, env=env)
    finally:
        server.stop()
    assert online.returncode == 0, online.stderr
    assert "hello-file" in online.stdout and "cached copy" not in online.stderr
    # the URL gone (offline): the copy kept when it was read
    offline = helios_inprocess("tasks", "list", "-d", "hello@1.0", cwd=tmp_path, env=env)
    assert offline.returncode == 0, offline.stderr
    assert "word-count" in offline.stdout and "cached copy" in offline.stderr
    assert server.url in offline.stderr
    # never read, so never cached: one line naming the URL and what to do
    gone = helios_inprocess("tasks", "list", "-d", "hello@1.0", cwd=tmp_path,
                            env={**env, "HELIOS_REGISTRY": server.url + "?other"})  # fmt: skip
    assert gone.returncode == 2 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr
    assert "no copy of it is cached" in gone.stderr and "--registry PATH" in gone.stderr


@pytest.mark.usefixtures("need_bwrap")
def test_the_python_api_takes_a_dataset_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from helios import ParallelRunner

    repo, commit = _repo(tmp_path)
    registry = _registry(tmp_path / "registry.json", str(repo), commit)
    runner = ParallelRunner(dataset="hello@1.0", registry=str(registry), agent="nop",
                            provider="local", output_dir=tmp_path / "out", limit=1,
                            show_progress=False)  # fmt: skip
    monkeypatch.setenv("HELIOS_DATASETS_DIR", str(tmp_path / "cache"))
    batch = asyncio.run(runner.run())
    assert batch.total_tasks == 1 and batch.output_dir is not None
    recorded = json.loads((batch.output_dir / "run.json").read_text())["dataset"]
    assert (recorded["name"], recorded["version"], recorded["registry"]) == (
        "hello", "1.0", str(registry))
    assert [t["commit"] for t in recorded["tasks"]] == [commit, commit]
    with pytest.raises(InputError, match="no dataset 'nope'"):
        asyncio.run(ParallelRunner(dataset="nope@1", registry=str(registry), agent="nop",
                                   provider="local", output_dir=tmp_path / "out",
                                   show_progress=False).run())  # fmt: skip
