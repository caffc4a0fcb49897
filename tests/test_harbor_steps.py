"""Harbor schema features end to end through the task door, on docker and on the
local sandbox: a separate verifier with artifacts, multi-step tasks with min_reward,
hostile agents against both, and interrupts with two sandboxes alive."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from helios.tasks.runner import ParallelRunner

from .harbor_tasks import (
    only_record,
    provider,
    records_of,
    run_tasks,
    step,
    task,
    write,
)

__all__ = ["provider"]  # the fixture, shared with test_harbor_features


# -- a separate verifier -----------------------------------------------------------------

SEPARATE_TOML = """
schema_version = "1.4"
artifacts = [
  "/app/answer.txt",
  { source = "/app/out", destination = "outdir", exclude = ["*.tmp"] },
]
[agent]
timeout_sec = 60
[verifier]
timeout_sec = 60
environment_mode = "separate"
[environment]
memory_mb = 512
"""

SEPARATE_SOLVE = """
echo {answer} > /app/answer.txt
echo junk > /app/junk.txt
mkdir -p /app/out /logs/artifacts && echo keep > /app/out/a.txt && echo drop > /app/out/b.tmp
echo note > /logs/artifacts/note.txt
# forgeries: a reward, and a test.sh that always passes
echo 1 > /logs/verifier/reward.txt
mkdir -p /tests && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh
"""

SEPARATE_TEST = """
ok=1
[ "$(cat /app/answer.txt)" = 42 ] || { echo "wrong answer"; ok=0; }
[ ! -e /app/junk.txt ] || { echo "a file that is no artifact came over"; ok=0; }
[ "$(cat /app/out/a.txt)" = keep ] || { echo "no out/a.txt"; ok=0; }
[ ! -e /app/out/b.tmp ] || { echo "an excluded file came over"; ok=0; }
[ "$(cat /logs/artifacts/note.txt)" = note ] || { echo "no /logs/artifacts"; ok=0; }
[ -e /tests/Dockerfile ] || { echo "no tests/ in /tests"; ok=0; }
echo $ok > /logs/verifier/reward.txt
"""


def _separate_task(root: Path, name: str, answer: int) -> Path:
    folder = task(
        root, name, SEPARATE_TOML,
        solve=SEPARATE_SOLVE.format(answer=answer), test=SEPARATE_TEST,
    )  # fmt: skip
    write(folder / "tests" / "Dockerfile", "FROM debian:bookworm-slim\nCOPY . /tests/\n")
    return folder


def test_separate_verifier_sees_only_the_artifacts(provider: str, tmp_path: Path) -> None:
    _separate_task(tmp_path / "tasks", "right", 42)
    _separate_task(tmp_path / "tasks", "wrong", 41)
    started = time.time()
    batch = run_tasks(tmp_path / "tasks", tmp_path / "out", provider)
    records = records_of(batch)
    assert records["right"]["reward"] == 1.0, records["right"]["error"]
    assert records["wrong"]["reward"] == 0.0  # the planted reward and test.sh did not count
    assert batch.output_dir is not None
    artifacts = batch.output_dir / records["right"]["folder"] / "artifacts"
    assert (artifacts / "app" / "answer.txt").read_text() == "42\n"
    assert (artifacts / "outdir" / "a.txt").exists()
    assert not (artifacts / "outdir" / "b.tmp").exists()
    assert (artifacts / "logs" / "artifacts" / "note.txt").read_text() == "note\n"
    manifest = json.loads((artifacts / "manifest.json").read_text())
    assert {m["source"]: m["status"] for m in manifest} == {
        "/logs/artifacts": "ok", "/app/answer.txt": "ok", "/app/out": "ok",
    }  # fmt: skip
    if provider == "docker":
        run_id = json.loads((batch.output_dir / "run.json").read_text())["run_id"]
        _check_agent_container_gone_first(run_id, started)


def _check_agent_container_gone_first(run_id: str, since: float) -> None:
    """Each trial's agent container is destroyed before its verifier's is created."""
    events = subprocess.run(
        ["docker", "events", "--since", f"{since - 1:.0f}", "--until", f"{time.time() + 1:.0f}",
         "--filter", f"label=helios.run={run_id}", "--filter", "type=container",
         "--format", '{{.Action}} {{index .Actor.Attributes "helios.trial"}} {{.Actor.ID}}'],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    by_trial: dict[str, list[tuple[str, str]]] = {}
    for line in events:
        action, trial, cid = line.rsplit(" ", 2)
        if action in ("create", "destroy"):
            by_trial.setdefault(trial, []).append((action, cid))
    assert len(by_trial) == 2, events
    for seen in by_trial.values():
        creates = [cid for action, cid in seen if action == "create"]
        assert len(creates) == 2, seen
        agent, verifier = creates
        assert seen.index(("destroy", agent)) < seen.index(("create", verifier)), seen


# -- multi-step --------------------------------------------------------------------------

STEPS_TOML = """
schema_version = "1.4"
multi_step_reward_strategy = "{strategy}"
[agent]
timeout_sec = 60
[environment]
memory_mb = 256
[[steps]]
name = "first"
min_reward = 1.0
[[steps]]
name = "second"
[steps.verifier]
timeout_sec = 30
"""

#: shared helper in the task's tests/, used by both steps' own test.sh
CHECK_LIB = 'check() { if [ "$(cat "$1" 2>/dev/null)" = "$2" ]; then echo 1; else echo 0; fi; }\n'


def _steps_task(root: Path, name: str, strategy: str, first_answer: str) -> Path:
    folder = task(root, name, STEPS_TOML.format(strategy=strategy), solve=None, test=None)
    write(folder / "tests" / "lib.sh", CHECK_LIB)
    first = step(
        folder, "first",
        solve=f"echo {first_answer} > /app/first.txt\n",
        test=". /tests/lib.sh\n"
        'if [ "$(check /app/seed.txt seeded)" = 1 ] && [ ! -e /app/setup.sh ]; then '
        "check /app/first.txt 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n",
    )  # fmt: skip
    write(first / "workdir" / "setup.sh", 'echo seeded > seed.txt\nrm -- "$0"\n')
    write(first / "workdir" / "data.txt", "data\n")
    step(
        folder, "second",
        solve="echo 2 > /app/second.txt\n",
        # the first step's files are still there; half the reward without data.txt
        test=". /tests/lib.sh\n"
        'a=$(check /app/second.txt 2); b=$(check /app/data.txt data)\n'
        'echo "{\\"reward\\": $a, \\"data\\": $b}" > /logs/verifier/reward.json\n',
    )  # fmt: skip
    return folder


def test_two_step_task_runs_in_order_and_stops_below_min_reward(
    provider: str, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    _steps_task(tasks, "both-pass", "mean", first_answer="1")
    _steps_task(tasks, "gated", "mean", first_answer="0")
    batch = run_tasks(tasks, tmp_path / "out", provider)
    records = records_of(batch)
    passed = records["both-pass"]
    assert passed["reward"] == 1.0 and passed["status"] == "passed", passed["error"]
    assert [(s["name"], s["status"], s["reward"]) for s in passed["steps"]] == [
        ("first", "passed", 1.0), ("second", "passed", 1.0)
    ]  # fmt: skip
    # the per-key mean: the first step has no "data" key, which counts as 0
    assert passed["reward_strategy"] == "mean" and passed["rewards"] == {"reward": 1.0, "data": 0.5}
    gated = records["gated"]
    assert [(s["name"], s["status"]) for s in gated["steps"]] == [
        ("first", "failed"), ("second", "not_run")
    ]  # fmt: skip
    assert gated["steps"][0]["below_min_reward"] is True
    assert gated["reward"] == 0.0 and gated["status"] == "failed"
    assert batch.output_dir is not None
    folder = batch.output_dir / passed["folder"]
    for name in ("first", "second"):
        assert (folder / "steps" / name / "agent" / "oracle.txt").exists()
        assert (folder / "steps" / name / "verifier" / "test-stdout.txt").exists()
    summary = json.loads((batch.output_dir / "batch_summary.json").read_text())
    row = next(t for t in summary["tasks"] if t["name"] == "gated")
    assert [s["status"] for s in row["steps"]] == ["failed", "not_run"]


def test_final_strategy_takes_the_last_steps_rewards(provider: str, tmp_path: Path) -> None:
    folder = _steps_task(tmp_path / "tasks", "final", "final", first_answer="1")
    (folder / "steps" / "first" / "workdir" / "data.txt").unlink()  # second step: data = 0
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", provider))
    assert record["rewards"] == {"reward": 1.0, "data": 0.0} and record["reward"] == 1.0


STEP_FEATURES_TOML = """
[agent]
timeout_sec = 60
[environment]
memory_mb = 256
[[steps]]
name = "make"
[steps.healthcheck]
command = "{check}"
interval_sec = 0.1
start_interval_sec = 0.1
retries = 2
timeout_sec = 5
[[steps]]
name = "grade"
artifacts = ["/app/result.txt"]
[steps.verifier]
environment_mode = "separate"
"""


def _step_features_task(root: Path, name: str, check: str) -> None:
    folder = task(root, name, STEP_FEATURES_TOML.format(check=check), solve=None, test=None)
    make = step(
        folder, "make", solve="cat data.txt > /app/made.txt\n",
        test='[ "$(cat /app/made.txt)" = seed ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    write(make / "workdir" / "data.txt", "seed\n")
    step(
        folder, "grade", solve="cat /app/made.txt > /app/result.txt; touch /app/junk\n",
        test='[ "$(cat /app/result.txt)" = seed ] && [ ! -e /app/junk ] && [ ! -e /app/made.txt ]'
        " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    )  # fmt: skip


def test_step_healthchecks_and_a_steps_separate_verifier(provider: str, tmp_path: Path) -> None:
    _step_features_task(tmp_path / "tasks", "ready", "test -f /app/data.txt")
    _step_features_task(tmp_path / "tasks", "never", "echo no-such-service; false")
    batch = run_tasks(tmp_path / "tasks", tmp_path / "out", provider)
    records = records_of(batch)
    ready = records["ready"]
    assert [s["reward"] for s in ready["steps"]] == [1.0, 1.0], ready["steps"]
    assert batch.output_dir is not None
    collected = batch.output_dir / ready["folder"] / "steps" / "grade" / "artifacts"
    assert (collected / "app" / "result.txt").read_text() == "seed\n"
    never = records["never"]
    assert never["status"] == "error" and never["error"]["type"] == "EnvironmentUnhealthy"
    assert "step 'make'" in never["error"]["message"]
    assert "no-such-service" in never["error"]["message"]
    assert [s["status"] for s in never["steps"]] == ["error", "not_run"]


# -- hostile agents against the new paths -------------------------------------------------


def test_hostile_artifacts_are_skipped_not_followed(provider: str, tmp_path: Path) -> None:
    folder = _separate_task(tmp_path / "tasks", "links", 42)
    write(
        folder / "solution" / "solve.sh",
        "#!/bin/sh\nln -s /etc/hostname /app/answer.txt\nmkfifo /app/out\n"
        "mkdir -p /logs/artifacts && ln -s /etc /logs/artifacts/etc\n",
        0o600,
    )
    batch = run_tasks(tmp_path / "tasks", tmp_path / "out", provider)
    record = only_record(batch)
    assert record["status"] == "failed" and record["error"] is None  # scored, not crashed
    assert batch.output_dir is not None
    manifest = json.loads(
        (batch.output_dir / record["folder"] / "artifacts" / "manifest.json").read_text()
    )
    status = {m["source"]: m["status"] for m in manifest}
    assert status["/app/answer.txt"].startswith("skipped")
    assert status["/app/out"].startswith("skipped")
    stdout = (batch.output_dir / record["folder"] / "verifier" / "test-stdout.txt").read_text()
    assert "wrong answer" in stdout


def test_a_step_cannot_leave_a_forger_for_the_next(provider: str, tmp_path: Path) -> None:
    toml = """
    [agent]
    timeout_sec = 60
    [environment]
    memory_mb = 256
    [[steps]]
    name = "a"
    [[steps]]
    name = "b"
    """
    folder = task(tmp_path / "tasks", "forger", toml, solve=None, test=None)
    forger = "while true; do echo 1 > /logs/verifier/reward.txt; sleep 0.01; done"
    step(
        folder, "a",
        solve=f"nohup sh -c '{forger}' >/dev/null 2>&1 &\necho done > /app/a.txt\n",
        test="sleep 0.3; echo 1 > /logs/verifier/reward.txt\n",
    )  # fmt: skip
    step(folder, "b", solve="true\n", test="echo 0 > /logs/verifier/reward.txt; sleep 0.3\n")
    record = only_record(run_tasks(tmp_path / "tasks", tmp_path / "out", provider))
    assert [s["reward"] for s in record["steps"]] == [1.0, 0.0]
    assert record["reward"] == 0.5


# -- interrupts --------------------------------------------------------------------------


@pytest.mark.usefixtures("need_docker")
def test_cancel_with_two_sandboxes_alive_leaves_none(tmp_path: Path) -> None:
    # Step "a" is verified in its own sandbox while the agent's stays up for "b":
    # a cancel then must remove both.
    toml = """
    [agent]
    timeout_sec = 60
    [environment]
    memory_mb = 256
    [[steps]]
    name = "a"
    [steps.verifier]
    environment_mode = "separate"
    timeout_sec = 120
    [[steps]]
    name = "b"
    """
    folder = task(tmp_path / "tasks", "slow", toml, solve=None, test=None)
    step(folder, "a", solve="true\n", test="sleep 120\n")
    step(folder, "b", solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    runner = ParallelRunner(
        tmp_path / "tasks", agent="oracle", provider="docker", output_dir=tmp_path / "out",
        show_progress=False,
    )  # fmt: skip

    def containers(run_id: str, *flags: str) -> list[str]:
        out = subprocess.run(
            ["docker", "ps", "-q", *flags, "--filter", f"label=helios.run={run_id}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return out.stdout.split()

    async def go() -> str:
        job = asyncio.create_task(runner.run())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            if runner.run_dir is None:
                continue
            run_id = json.loads((runner.run_dir / "run.json").read_text())["run_id"]
            if len(await asyncio.to_thread(containers, run_id)) == 2:
                break
        else:
            raise AssertionError("the step's verifier sandbox never started")
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        return run_id

    run_id = asyncio.run(go())
    assert containers(run_id, "-a") == []
