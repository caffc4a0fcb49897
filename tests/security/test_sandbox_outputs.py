"""What comes out of a sandbox (issue 18: bad inputs and exhaustion), through the real
task door on local, docker (its init's stream), docker's Engine API and daytona
(against the loopback Daytona): nothing the
agent (or the tests it steers) puts in /logs/artifacts or /logs/verifier makes its
trial an infrastructure error, and a refused download costs no time.

- Odd entries (a path longer than the host's PATH_MAX, a tree 1,500 folders deep,
  a name that is not UTF-8, a newline in a name, files the sandbox's user cannot
  read, a fifo, a link loop) are skipped and listed in the manifest; the trial
  passes. Before: `OSError: File name too long` made it an infrastructure error,
  re-run by --retry-errors (a free retry of a failed attempt).
- A `truncate -s 2T` file is refused before a byte of it is streamed. Before: 1 GiB
  streamed first (15 s on the Engine API, 10 s on local), then, on docker's stream,
  `docker rm` waited 120 s on the output nobody read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import helios.environments.shell.safe_copy as _safe_copy
from helios.environments.local.program import ENV_SWITCH, server_program
from helios.tasks.runner import ParallelRunner
from helios.testing.daytona_fake import DaytonaFake, local_object_storage

from ..conftest import _need
from ..harbor_tasks import task, write

#: local twice: its persistent shell's tar, or (`local-one-shot`) a bwrap per command
#: copying into a transfer folder; docker twice: its init's stream, or the Engine API;
#: daytona: the loopback Daytona (its sandboxes docker containers)
PROVIDERS = ("local", "local-one-shot", "docker", "docker-api", "daytona")

#: makes odd entries in the folder $1 (perl: `cd` in sh cannot go past PATH_MAX)
ODD = r"""
odd() {
  d=$1; mkdir -p "$d/long" "$d/deep" "$d/locked"
  echo ok > "$d/ok.txt"; echo drop > "$d/drop.tmp"
  perl -e 'chdir shift or die; for $i (1..30) { $n = sprintf("%0250d", $i);
    mkdir $n or die; chdir $n or die } open F, ">f" or die' "$d/long"
  perl -e 'chdir shift or die; for (1..1500) { mkdir "d" or die; chdir "d" or die }
    open F, ">f" or die' "$d/deep"
  printf 'x\n' > "$d/$(printf 'bad-\377')"
  printf 'y\n' > "$d/new
line"
  echo secret > "$d/unreadable"; chmod 000 "$d/unreadable"
  echo z > "$d/locked/z"; chmod 000 "$d/locked"
  mkfifo "$d/fifo"; ln -s loop "$d/loop"
}
"""

#: a file of 2 TiB apparent size (local: RLIMIT_FSIZE is storage_mb, so 1.5 GiB)
HUGE = "truncate -s 2T {0} 2>/dev/null || truncate -s 1500M {0}\n"

ODD_ARTIFACTS_TOML = """
schema_version = "1.4"
artifacts = [{ source = "/logs/artifacts", destination = "copy", exclude = ["*.tmp"] }]
[agent]
timeout_sec = 120
[verifier]
timeout_sec = 120
"""

SEPARATE_TOML = """
schema_version = "1.4"
[agent]
timeout_sec = 120
[verifier]
timeout_sec = 120
environment_mode = "separate"
"""

PLAIN_TOML = """
schema_version = "1.4"
[agent]
timeout_sec = 120
[verifier]
timeout_sec = 120
"""

SEPARATE_TEST = """
ok=1
[ "$(cat /logs/artifacts/ok.txt)" = ok ] || ok=0
[ -d /logs/artifacts/deep/d/d ] || ok=0
echo $ok > /logs/verifier/reward.txt
"""


def _write_tasks(root: Path) -> None:
    task(root, "odd-artifacts", ODD_ARTIFACTS_TOML, solve=ODD + "odd /logs/artifacts\n")
    separate = task(root, "odd-separate", SEPARATE_TOML, solve=ODD + "odd /logs/artifacts\n",
                    test=SEPARATE_TEST)  # fmt: skip
    write(separate / "tests" / "Dockerfile", "FROM debian:bookworm-slim\nCOPY . /tests/\n")
    task(root, "odd-verifier-logs", PLAIN_TOML,
         test=ODD + "odd /logs/verifier/odd\necho 1 > /logs/verifier/reward.txt\n")  # fmt: skip
    task(root, "huge-artifact", PLAIN_TOML,
         solve="mkdir -p /logs/artifacts && echo small > /logs/artifacts/small.txt\n"
         + HUGE.format("/logs/artifacts/big"))  # fmt: skip
    huge_log = HUGE.format("/logs/verifier/big") + "echo 1 > /logs/verifier/reward.txt\n"
    task(root, "huge-verifier-log", PLAIN_TOML, test=huge_log)


@dataclass
class Outcome:
    provider: str
    run_dir: Path
    records: dict[str, dict[str, Any]]
    #: bytes the host spooled from the sandboxes' archives, all downloads together
    spooled: int


def _run(root: Path, provider: str) -> Outcome:
    _write_tasks(root / "tasks")
    spooled = [0]
    counted = _safe_copy.Spool.add

    def count(self: _safe_copy.Spool, data: bytes) -> None:
        spooled[0] += len(data)
        counted(self, data)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_safe_copy.Spool, "add", count)
        if provider == "docker-api":
            patch.setenv("HELIOS_DOCKER_SHELL", "0")
        if provider == "local-one-shot":
            patch.setenv(ENV_SWITCH, "0")
        server_program.cache_clear()
        runner = ParallelRunner(
            root / "tasks", n_concurrent=2, agent="oracle", provider=provider.split("-")[0],
            output_dir=root / "out", quiet=True, show_progress=False,
        )  # fmt: skip
        try:
            with contextlib.ExitStack() as stack:
                if provider == "daytona":
                    fake = stack.enter_context(DaytonaFake())
                    stack.enter_context(local_object_storage(fake))
                    patch.setenv("DAYTONA_API_KEY", fake.api_key)
                    patch.setenv("DAYTONA_API_URL", fake.api_url)
                asyncio.run(runner.run())
        finally:
            server_program.cache_clear()
    assert runner.run_dir is not None
    records = {}
    for line in (runner.run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        records[record["task_name"]] = record
    return Outcome(provider, runner.run_dir, records, spooled[0])


@pytest.fixture(scope="module")
def batches() -> dict[str, Outcome]:
    return {}


@pytest.fixture(params=PROVIDERS)
def outcome(
    request: pytest.FixtureRequest,
    batches: dict[str, Outcome],
    tmp_path_factory: pytest.TempPathFactory,
    docker_available: bool,
    bwrap_available: bool,
) -> Outcome:
    provider: str = request.param
    if provider.startswith(("docker", "daytona")):
        _need("HELIOS_REQUIRE_DOCKER", docker_available, "a Docker engine")
    else:
        _need("HELIOS_REQUIRE_BWRAP", bwrap_available, "bubblewrap")
    if provider not in batches:
        batches[provider] = _run(tmp_path_factory.mktemp(f"outputs-{provider}"), provider)
    return batches[provider]


def _passed(outcome: Outcome, name: str) -> dict[str, Any]:
    record = outcome.records[name]
    assert (record["status"], record["reward"], record["error"]) == ("passed", 1.0, None), record
    return record


def _manifest(outcome: Outcome, record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    path = outcome.run_dir / record["folder"] / "artifacts" / "manifest.json"
    return {entry["destination"]: entry for entry in json.loads(path.read_text())}


def _depth(folder: Path) -> int:
    deepest = 0
    for parent, _, _ in os.walk(folder):
        deepest = max(deepest, len(Path(parent).relative_to(folder).parts))
    return deepest


def test_odd_artifacts_are_skipped_and_listed_never_an_infrastructure_error(
    outcome: Outcome,
) -> None:
    record = _passed(outcome, "odd-artifacts")
    folder = outcome.run_dir / record["folder"] / "artifacts"
    entries = _manifest(outcome, record)
    assert {k: v["status"] for k, v in entries.items()} == {"logs/artifacts": "ok", "copy": "ok"}
    for destination in ("logs/artifacts", "copy"):
        got = folder / destination
        assert (got / "ok.txt").read_text() == "ok\n"
        assert os.fsencode("bad-\udcff") in os.listdir(os.fsencode(got))
        assert (got / "new\nline").read_text() == "y\n"
        assert not (got / "fifo").exists() and not (got / "loop").is_symlink()
        assert _depth(got) <= 130  # the 1,500-deep tree stops at the bound, listed
        skipped = entries[destination]["skipped"]
        assert any(name.endswith("fifo") for name in skipped), skipped
        assert any(name.endswith("loop") for name in skipped), skipped
        if outcome.provider.startswith("local"):  # root there has no capabilities
            assert any("unreadable" in name for name in skipped), skipped
        json.dumps(skipped).encode("utf-8")  # text any JSON reader takes
    assert not (folder / "copy" / "drop.tmp").exists()
    assert (folder / "logs" / "artifacts" / "drop.tmp").exists()


def test_odd_artifacts_reach_a_separate_verifier(outcome: Outcome) -> None:
    _passed(outcome, "odd-separate")


def test_odd_verifier_logs_still_give_the_reward(outcome: Outcome) -> None:
    record = _passed(outcome, "odd-verifier-logs")
    logs = outcome.run_dir / record["folder"] / "verifier"
    assert (logs / "odd" / "ok.txt").read_text() == "ok\n"


def test_a_huge_artifact_is_refused_at_once(outcome: Outcome) -> None:
    record = _passed(outcome, "huge-artifact")
    entry = _manifest(outcome, record)["logs/artifacts"]
    assert entry["status"].startswith("failed:") and "larger than" in entry["status"], entry
    # refused before the sandbox streamed it (before: 1 GiB, then the refusal)
    assert outcome.spooled < 64 << 20, outcome.spooled
    # nor copied (before, local-one-shot: 1 GiB written to the trial's folder)
    folder = outcome.run_dir / record["folder"] / "artifacts" / "logs" / "artifacts"
    assert not (folder / "big").exists()
    # before: 132 s on docker's stream, 15 s on the Engine API
    assert record["timings"]["verifier"] < 60, record["timings"]


def test_a_huge_verifier_log_is_a_scoring_failure(outcome: Outcome) -> None:
    record = outcome.records["huge-verifier-log"]
    assert record["timings"]["verifier"] < 60, record["timings"]
    assert record["status"] == "failed", record
    assert record["error"]["type"] == "RewardFileInvalid", record
    assert not record["error"]["infrastructure"], record
