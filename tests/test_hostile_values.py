"""Hostile values (issue 18): numbers that overflow, nesting that exhausts the
stack, YAML aliases that explode, run counts that exhaust memory. Each one is bad
input with one line, never a traceback, an 'internal error', a hang, or a file
holding NaN or Infinity (which is not JSON)."""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helios.engine.metrics import bootstrap_ci, mean
from helios.engine.store import write_json_atomic
from helios.errors import RewardFileInvalid
from helios.failures import ErrorInfo
from helios.tasks.rewards import combine
from helios.tasks.verifier import primary_reward, read_rewards
from helios.toolcalls.runner import Case, plan_units

from .conftest import TaskMaker, helios_cmd

#: a child's address space: a refused input must not come near it
CHILD_MEMORY = 2 * 1024**3
DEADLINE = 60.0


def strict_json(text: str) -> Any:
    """JSON as the RFC has it: NaN and Infinity are refused."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in a file Helios wrote")

    return json.loads(text, parse_constant=refuse)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


def run_helios(
    *args: str, cwd: Path, timeout: float = DEADLINE
) -> subprocess.CompletedProcess[str]:
    """The CLI in a child with a bounded address space and a deadline."""
    return subprocess.run(helios_cmd(*args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_limited)  # fmt: skip


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "internal error" not in lines[0] and "Traceback" not in result.stderr
    return lines[0]


# -- 1. rewards and aggregates are finite ----------------------------------------------
def test_the_mean_over_reward_keys_does_not_overflow(tmp_path: Path) -> None:
    (tmp_path / "reward.json").write_text('{"a": 1e308, "b": 1e308}')
    reward = primary_reward(read_rewards(tmp_path))
    assert math.isfinite(reward) and reward == 1e308


@pytest.mark.parametrize("text", ["1e309", "nan", "inf", "-inf", "Infinity", "-1e400"])
def test_a_non_finite_reward_txt_is_invalid(tmp_path: Path, text: str) -> None:
    (tmp_path / "reward.txt").write_text(text)
    with pytest.raises(RewardFileInvalid):  # already so before issue 18: kept as a check
        read_rewards(tmp_path)


def test_aggregates_over_trials_and_steps_stay_finite() -> None:
    huge = [1e308, 1.7e308, 1e308]
    assert mean(huge) == pytest.approx(1.2333333e308)
    low, high = bootstrap_ci(huge)
    assert math.isfinite(low) and math.isfinite(high) and low <= high
    many = [1e308, -1e308] * 3000  # past BOOTSTRAP_MAX: the normal approximation
    assert all(math.isfinite(bound) for bound in bootstrap_ci(many))
    assert combine([{"a": 1e308}, {"a": 1e308}], "mean") == {"a": 1e308}


@pytest.mark.parametrize(
    ("write", "per_line"),
    [
        (lambda path, value: write_json_atomic(path, value), False),
        (lambda path, value: _append_record(path, value), True),
        (lambda path, value: _write_jsonl(path, value), True),
    ],
    ids=["json document", "record stream", "jsonl file"],
)
def test_no_writer_puts_nan_or_infinity_in_a_file(
    tmp_path: Path, write: Callable[[Path, dict[str, Any]], None], per_line: bool
) -> None:
    path = tmp_path / "out"
    write(path, {"trial_id": "t", "reward": math.inf, "nested": [math.nan, {"x": -math.inf}]})
    text = path.read_text()
    for document in text.splitlines() if per_line else [text]:
        assert strict_json(document)["nested"] == [None, {"x": None}]


def _append_record(path: Path, value: dict[str, Any]) -> None:
    from helios.engine.jsonl import RecordStream

    stream = RecordStream(path)
    stream.append(value)
    stream.close()


def _write_jsonl(path: Path, value: dict[str, Any]) -> None:
    from helios.datagen.outputs import write_jsonl_atomic

    write_jsonl_atomic(path, [value, value])


def _reward_json(body: str) -> str:
    return f"printf '%s' '{body}' > /logs/verifier/reward.json\n"


@pytest.mark.usefixtures("need_bwrap")
def test_a_batch_of_hostile_reward_files_writes_only_valid_json(
    tmp_path: Path, make_task: TaskMaker
) -> None:
    """Points 1 and 6 through the CLI: huge rewards pass with a finite reward and mean;
    a number too long or nesting too deep is RewardFileInvalid, without a traceback."""
    deep = ("{ printf '{\"reward\": '; head -c 200000 /dev/zero | tr '\\0' '['; "
            "head -c 200000 /dev/zero | tr '\\0' ']'; printf '}'; } "
            "> /logs/verifier/reward.json\n")  # fmt: skip
    make_task("huge-keys", test=_reward_json('{"a": 1e308, "b": 1e308}'))
    make_task("huge-reward", test=_reward_json('{"reward": 1.7e308}'))
    make_task("digits-400", test=_reward_json('{"reward": ' + "9" * 400 + "}"))
    make_task("digits-5000", test=_reward_json('{"reward": ' + "9" * 5000 + "}"))
    make_task("deep", test=deep)
    result = run_helios("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                        "nop", "-n", "3", "-o", "out", "-q", cwd=tmp_path, timeout=300)  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    assert "internal error" not in result.stderr + result.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = strict_json((run_dir / "batch_summary.json").read_text())
    assert summary["passed"] == 2 and math.isfinite(summary["mean_reward"])
    assert all(math.isfinite(bound) for bound in summary["mean_reward_ci95"])
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        strict_json(line)
    by_name = {task["name"]: task for task in summary["tasks"]}
    assert by_name["huge-keys"]["reward"] == 1e308 and by_name["huge-keys"]["status"] == "passed"
    for name in ("digits-400", "digits-5000", "deep"):
        assert by_name[name]["error"].startswith("RewardFileInvalid: reward.json"), by_name[name]
        (result_file,) = run_dir.glob(f"*_{name}/result.json")
        error = strict_json(result_file.read_text())["error"]
        assert error["type"] == "RewardFileInvalid" and error["detail"] is None


# -- 6. untyped reward errors --------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    ['{"reward": ' + "9" * 400 + "}", '{"reward": ' + "9" * 5000 + "}",
     '{"reward": ' + "[" * 200_000 + "]" * 200_000 + "}", '{"reward": 1e400}',
     '{"reward": NaN}', '{"a": [1], "b": 2}', b'{"reward": "\xff"}'],
    ids=["400 digits", "5000 digits", "200000 deep", "1e400", "NaN", "a list", "not UTF-8"],
)  # fmt: skip
def test_every_bad_reward_json_is_reward_file_invalid_in_one_line(
    tmp_path: Path, body: str | bytes
) -> None:
    path = tmp_path / "reward.json"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(RewardFileInvalid) as caught:
        read_rewards(tmp_path)
    info = ErrorInfo.from_exception(caught.value, "verifier")
    assert info.detail is None and "\n" not in info.message and len(info.message) < 200


# -- 3. a dataset line never aborts `helios generate` -----------------------------------
@pytest.mark.usefixtures("need_bwrap")
def test_hostile_dataset_lines_are_skipped_with_one_warning_each(tmp_path: Path) -> None:
    from helios.testing.mock_llm import MockLLMServer
    from tests.datagen.conftest import SCRIPT, hermes_args, run_generate

    lines = [
        json.dumps({"prompt": "Task a: go."}),
        "[" * 100_000 + "]" * 100_000,
        '{"prompt": "Task b: go.", "n": ' + "9" * 5000 + "}",
        '{"prompt": {"x": ' + "[" * 5000 + "]" * 5000 + "}}",
        json.dumps({"prompt": "Task c: go."}),
    ]
    dataset = tmp_path / "p.jsonl"
    dataset.write_text("\n".join(lines) + "\n")
    with MockLLMServer(script=SCRIPT) as server:
        result = run_generate(tmp_path, *hermes_args(server, dataset, "hostile"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "internal error" not in output and "Traceback" not in output
    for line in (2, 3, 4):
        assert output.count(f"p.jsonl:{line}") == 1, output
    stats = strict_json((tmp_path / "data/hostile/statistics.json").read_text())
    assert stats["bad_input_lines"] == 3 and stats["trajectories_written"] == 2


# -- 5, 13, 14. `helios toolcalls` configs --------------------------------------------------
AGENTS = """
from helios import toolcalls

class Echo:
    async def run(self, audio):
        word = (audio.transcript or "").split()[0]
        return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call(word)])

class Synth:
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)
"""
HEAD = "synthesizer: cli_agents:Synth\nagent: cli_agents:Echo\n"


def _config(tmp_path: Path, body: str) -> Path:
    (tmp_path / "cli_agents.py").write_text(AGENTS)
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + body)
    return path


def _laughs(levels: int = 10) -> str:
    """The billion laughs, under a test's expect.arguments: 9**10 strings once expanded."""
    anchors = "          l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, levels):
        anchors += f"          l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
    return ("tests:\n  - id: t\n    prompt: book now\n    expect:\n      - name: book\n"
            "        arguments:\n" + anchors)  # fmt: skip


def test_a_deeply_nested_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = _config(tmp_path, "tests: " + "[" * 20_000 + "]" * 20_000 + "\n")
    result = run_helios("toolcalls", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "c.yaml:3: not valid YAML" in one_line(result)


def test_yaml_aliases_past_the_bound_are_refused_before_anything_else(tmp_path: Path) -> None:
    config = _config(tmp_path, _laughs())
    started = time.monotonic()
    result = run_helios("toolcalls", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "c.yaml:" in line and "aliases are expanded" in line
    assert time.monotonic() - started < 30


def test_sigterm_ends_helios_within_seconds_while_it_loads_a_config(tmp_path: Path) -> None:
    """A large config that is allowed takes a while to read: SIGTERM must still end
    the process at once (exit 130, one line)."""
    entry = "  - {id: t%d, prompt: 'book %d', expect: [{name: book, arguments: {n: %d}}]}\n"
    config = _config(tmp_path, "tests:\n" + "".join(entry % (i, i, i) for i in range(60_000)))
    child = subprocess.Popen(helios_cmd("toolcalls", "--config", str(config)), cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=_limited)  # fmt: skip
    try:
        _wait_for_cpu(child.pid, seconds=1.5)
        sent = time.monotonic()
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=DEADLINE)
        assert time.monotonic() - sent < 10
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr


def _wait_for_cpu(pid: int, seconds: float) -> None:
    """Until the process has used `seconds` of CPU (it is busy reading the config)."""
    ticks = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / ticks >= seconds:
            return
        time.sleep(0.05)
    raise AssertionError("the child never got busy")


@pytest.mark.parametrize(
    ("body", "args", "where"),
    [
        ("runs: 100000000\ntests:\n  - {id: t, prompt: book now}\n", (), "c.yaml: runs:"),
        ("tests:\n  - {id: t, prompt: book now, runs: 100001}\n", (), "c.yaml: tests[0].runs:"),
        ("runs: 60000\ntests:\n  - {id: t, prompts: [book a, book b]}\n", (), "c.yaml: "),
        ("tests:\n  - {id: t, prompt: book now}\n", ("--runs", "100000000"), "--runs"),
    ],
    ids=["runs", "a test's runs", "runs over all prompts", "--runs"],
)
def test_a_run_count_past_the_bound_is_one_line_and_exit_2(
    tmp_path: Path, body: str, args: tuple[str, ...], where: str
) -> None:
    config = _config(tmp_path, body)
    result = run_helios("toolcalls", "--config", str(config), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert where in line and "100,000" in line, line


def test_the_run_plan_is_made_lazily() -> None:
    cases = [Case("book a flight", runs=100_000)]
    tracemalloc.start()
    try:
        plan = plan_units(cases)
        assert len(plan) == 100_000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"planning 100,000 runs took {peak:,} bytes up front"
    assert (plan[-1].case_index, plan[-1].run_index) == (0, 99_999)


def test_the_lazy_plan_keeps_the_interleaved_order() -> None:
    cases = [Case("a", runs=1), Case("b", runs=3), Case("c", runs=2)]
    order = [(unit.prompt, unit.run_index) for unit in plan_units(cases)]
    assert order == [("a", 0), ("b", 0), ("c", 0), ("b", 1), ("c", 1), ("b", 2)]


def test_the_python_api_refuses_a_huge_run_count_at_once() -> None:
    import asyncio

    from helios import toolcalls
    from helios.errors import ConfigError

    async def agent(audio: toolcalls.Audio) -> toolcalls.AgentResponse:
        return toolcalls.AgentResponse()

    started = time.monotonic()
    with pytest.raises(ConfigError, match="100,000"):
        asyncio.run(toolcalls.run_concurrent("go", agent=agent, runs=100_000_000))
    assert time.monotonic() - started < 10


# -- task.toml (found by the fuzz pass) ------------------------------------------------------
@pytest.mark.parametrize(
    ("toml", "reason"),
    [
        ("x = " + "[" * 5_000 + "]" * 5_000, "nested too deeply"),
        ("x = " + "9" * 5_000, "4300 digits"),
        ("[agent]\ntimeout_sec = inf", "finite number"),
        ("[verifier]\ntimeout_sec = nan", "finite number"),
    ],
    ids=["deep", "5000 digits", "inf timeout", "nan timeout"],
)
def test_a_hostile_task_toml_is_an_invalid_task_in_one_line(
    tmp_path: Path, make_task: TaskMaker, toml: str, reason: str
) -> None:
    task = make_task("hostile")
    (task / "task.toml").write_text(toml + "\n")
    result = run_helios("run", str(task), "--provider", "local", "--agent", "nop", "-o", "out",
                        cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert reason in one_line(result) and "task.toml" in result.stderr


def test_a_results_line_nested_too_deep_or_not_finite_is_quarantined_on_resume(
    tmp_path: Path,
) -> None:
    """Records Helios wrote never hold these; a damaged file must still resume."""
    from helios.engine.store import RunStore

    store = RunStore.create(tmp_path / "run", {"run_id": "r"})
    store.append({"trial_id": "a", "status": "passed"})
    store.close()
    with (tmp_path / "run" / "results.jsonl").open("ab") as handle:
        handle.write(b'{"trial_id": "b", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
        handle.write(b'{"trial_id": "c", "status": "passed", "reward": Infinity}\n')
        handle.write(b'{"trial_id": "d", "status": "passed"}\n')
    store = RunStore.open_existing(tmp_path / "run")
    try:
        assert sorted(store.load_index()) == ["a", "d"]
        assert [bad.line for bad in store.quarantined] == [2, 3]
    finally:
        store.close()
