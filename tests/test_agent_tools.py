"""The tool-calling agent's tools (bash, editor, submit) against real sandboxes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from helios.agents.tools import (
    BASH,
    DEFAULT_TOOLS,
    EDITOR,
    SUBMIT,
    ToolOutcome,
    ToolRunner,
    ToolSpec,
    truncate_middle,
)
from helios.environments.base import Environment, ExecResult
from helios.environments.docker import DockerEnvironment
from helios.environments.local import LocalEnvironment
from helios.errors import EnvironmentExecError
from helios.tasks.task import load_task

from .agent_tool_helpers import (
    MARKER,
    SEQ_OUTPUT,
    _run_in,
    _split_truncated,
    content,
    err,
    ok,
)
from .conftest import TaskMaker

# --- truncate_middle ---------------------------------------------------------------------------


def test_truncate_middle_leaves_short_text_alone() -> None:
    assert truncate_middle("hello\n", 100) == "hello\n"
    assert truncate_middle("x" * 100, 100) == "x" * 100


def test_truncate_middle_keeps_head_and_larger_tail() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(10_000))  # no newlines to snap to
    cut = truncate_middle(text, 1000)
    assert len(cut) <= 1000
    head, dropped, tail = _split_truncated(cut)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + dropped + len(tail) == len(text)
    assert len(tail) > len(head) > 300


def test_truncate_middle_cuts_at_line_boundaries() -> None:
    text = "".join(f"line {i}\n" for i in range(5000))
    head, dropped, tail = _split_truncated(truncate_middle(text, 2000))
    assert head.endswith("\n") and head.startswith("line 0\n")
    assert tail.startswith("line ") and tail.endswith("line 4999\n")
    assert len(head) + dropped + len(tail) == len(text)


def test_truncate_middle_tiny_limit_still_respects_limit() -> None:
    assert len(truncate_middle("y" * 500, 10)) <= 10


# --- schemas -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "required"),
    [(BASH, ["command"]), (EDITOR, ["command", "path"]), (SUBMIT, [])],
)
def test_spec_parameters_are_json_schema_objects(spec: ToolSpec, required: list[str]) -> None:
    jsonschema.Draft202012Validator.check_schema(spec.parameters)
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == required
    assert set(required) <= set(spec.parameters["properties"])
    assert len(spec.description) > 100


def test_schemas_accept_good_and_reject_bad_arguments() -> None:
    def valid(spec: ToolSpec, args: dict[str, Any]) -> bool:
        return jsonschema.Draft202012Validator(spec.parameters).is_valid(args)

    assert valid(BASH, {"command": "ls", "timeout": 30})
    assert not valid(BASH, {"timeout": 30})
    assert not valid(BASH, {"command": 1})
    assert valid(EDITOR, {"command": "view", "path": "/app", "view_range": [1, -1]})
    assert not valid(EDITOR, {"command": "delete", "path": "/app/x"})
    assert not valid(EDITOR, {"command": "view", "path": "/app", "view_range": [1]})
    assert valid(SUBMIT, {}) and valid(SUBMIT, {"summary": "done"})


def test_wire_shapes() -> None:
    assert [t.name for t in DEFAULT_TOOLS] == ["bash", "editor", "submit"]
    for spec in DEFAULT_TOOLS:
        assert spec.to_openai() == {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        assert spec.to_anthropic() == {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.parameters,
        }


# --- the core scenario, run in both sandboxes ---------------------------------------------------


async def core_scenario(runner: ToolRunner) -> None:
    assert await ok(runner, "bash", command="echo hello") == "hello\n"
    assert await ok(runner, "bash", command="pwd") == runner.workdir + "\n"
    mixed = await ok(runner, "bash", command="echo out; echo err >&2; exit 3")
    assert mixed == "out\n[stderr]\nerr\n[exit code 3]"
    assert await ok(runner, "bash", command="true") == "(no output)"

    started = time.monotonic()
    timed_out = await runner.run(
        "bash", {"command": "echo started; sleep 30; echo x", "timeout": 1}
    )
    assert time.monotonic() - started < 20
    assert timed_out.is_error
    slow = timed_out.output
    assert slow.startswith("started\n") and "x" not in slow.splitlines()
    assert slow.endswith("[command timed out after 1s and was killed]")

    big = await ok(runner, "bash", command="seq 1 100000; echo boom >&2; exit 2")
    assert len(big) <= 2000
    assert big.startswith("1\n2\n3\n") and big.endswith("[stderr]\nboom\n[exit code 2]")
    assert MARKER.search(big)

    path = f"{runner.workdir}/pkg/notes.txt"
    created = await ok(runner, "editor", command="create", path=path, file_text="a\nb\nc\n")
    assert created.startswith("File created")
    assert await ok(runner, "editor", command="view", path=path) == (
        f"{path}, lines 1-3 of 3:\n     1\ta\n     2\tb\n     3\tc\n"
    )
    edited = await ok(runner, "editor", command="str_replace", path=path, old_str="b", new_str="B")
    assert "     2\tB\n" in edited
    await ok(runner, "bash", command=f"chmod 755 {path}")
    await ok(runner, "editor", command="insert", path=path, insert_line=0, new_str="top")
    assert await content(runner, path) == "top\na\nB\nc\n"
    assert await ok(runner, "bash", command=f"stat -c %a {path}") == "755\n"
    assert "not found" in await err(
        runner, "editor", command="str_replace", path=path, old_str="zzz", new_str="y"
    )
    listing = await ok(runner, "editor", command="view", path=runner.workdir)
    assert f"{runner.workdir}/pkg/\n" in listing and f"{path}\n" in listing
    await ok(runner, "bash", command="printf 'ab\\000cd' > bin.dat")
    assert "binary" in await err(runner, "editor", command="view", path=f"{runner.workdir}/bin.dat")
    assert (await runner.run("submit", {})).finished


def test_core_scenario_local(local_env: LocalEnvironment) -> None:
    _run_in(local_env, core_scenario, max_output_chars=2000)


def test_core_scenario_docker(need_docker: None, make_task: TaskMaker) -> None:
    task = load_task(make_task("tools-docker"))
    env = DockerEnvironment(task.sandbox_spec(), trial_id=uuid.uuid4().hex[:8], run_id="test")
    _run_in(env, core_scenario, build=True, max_output_chars=2000)


# --- bash, in detail -----------------------------------------------------------------------------


def test_bash_state_does_not_carry_over_but_files_do(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        await ok(runner, "bash", command="cd /tmp && export X=1 && echo kept > /tmp/f")
        assert await ok(runner, "bash", command='pwd; echo "X=$X"; cat /tmp/f') == (
            f"{runner.workdir}\nX=\nkept\n"
        )
        # stderr alone with exit 0: labelled, no exit line
        assert await ok(runner, "bash", command="echo warn >&2") == "[stderr]\nwarn\n"
        # no trailing newline on stdout: the labels still start on their own line
        assert await ok(runner, "bash", command="printf out; printf err >&2; exit 1") == (
            "out\n[stderr]\nerr\n[exit code 1]"
        )

    _run_in(local_env, scenario)


def test_bash_truncation_keeps_exact_head_and_tail(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        out = await ok(runner, "bash", command="seq 1 100000")
        assert len(out) <= 3000
        head, dropped, tail = _split_truncated(out)
        assert SEQ_OUTPUT.startswith(head) and SEQ_OUTPUT.endswith(tail)
        assert len(head) + dropped + len(tail) == len(SEQ_OUTPUT)
        assert tail.endswith("99999\n100000\n") and len(tail) > len(head)

    _run_in(local_env, scenario, max_output_chars=3000)


def test_bash_timeout_is_capped_and_default_applies(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        out = await runner.run("bash", {"command": "sleep 10"})
        assert out == ToolOutcome("[command timed out after 1s and was killed]", is_error=True)
        # a huge timeout is capped, not refused
        assert await ok(runner, "bash", command="echo ok", timeout=10**9) == "ok\n"

    _run_in(local_env, scenario, default_timeout=1)


# --- bad calls -----------------------------------------------------------------------------------


def test_bad_calls_come_back_as_errors(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        unknown = await err(runner, "python", code="print(1)")
        assert "unknown tool 'python'" in unknown and "bash, editor, submit" in unknown
        missing = await err(runner, "bash", cmd="ls")
        assert "`command` is missing" in missing and "`cmd`" in missing and "Example" in missing
        assert "must be a string" in await err(runner, "bash", command=123)
        assert "must be an integer" in await err(runner, "bash", command="ls", timeout="5")
        assert "at least 1" in await err(runner, "bash", command="ls", timeout=0)
        assert "empty" in await err(runner, "bash", command="   ")
        assert "NUL" in await err(runner, "bash", command="echo \x00")
        path = f"{runner.workdir}/f.txt"
        assert "unknown editor command 'delete'" in await err(
            runner, "editor", command="delete", path=path
        )
        assert "`path` is missing" in await err(runner, "editor", command="view")
        assert "`file_text` is missing" in await err(runner, "editor", command="create", path=path)
        await ok(runner, "editor", command="create", path=path, file_text="a\n")
        assert "must be an integer" in await err(
            runner, "editor", command="insert", path=path, insert_line="1", new_str="x"
        )
        assert "`insert_line` is missing" in await err(
            runner, "editor", command="insert", path=path, new_str="x"
        )
        assert "must be a string" in await err(
            runner, "editor", command="str_replace", path=path, old_str=["a"]
        )
        not_json = await runner.run("bash", None)
        assert not_json.is_error and "JSON object" in not_json.output

    _run_in(local_env, scenario)


def test_submit_finishes(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        done = await runner.run("submit", {"summary": "did it"})
        assert done == ToolOutcome(output="Submitted.", is_error=False, finished=True)
        assert (await runner.run("submit", {})).finished

    _run_in(local_env, scenario)


# --- infrastructure failures, with a scripted environment ----------------------------------------


class ScriptedEnv(Environment):
    """exec and upload do what the test says, to reach the infrastructure paths."""

    name = "scripted"

    def __init__(self, task_dir: Path, exec_fn: Callable[[str], ExecResult]) -> None:
        super().__init__(load_task(task_dir).sandbox_spec(), trial_id="t", run_id="r")
        self.exec_fn = exec_fn
        self.upload_error: Exception | None = None

    async def start(self) -> None:
        pass

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        return self.exec_fn(command)

    async def upload(self, src: Path, dst: str) -> None:
        if self.upload_error is not None:
            raise self.upload_error

    async def download(self, src: str, dst: Path) -> None:
        pass

    async def stop(self) -> None:
        pass


def _raise(exc: Exception) -> Callable[[str], ExecResult]:
    def fn(command: str) -> ExecResult:
        raise exc

    return fn


def test_infrastructure_errors_propagate(make_task: TaskMaker) -> None:
    env = ScriptedEnv(make_task("scripted"), _raise(EnvironmentExecError("container is gone")))
    runner = ToolRunner(env, workdir="/app")
    with pytest.raises(EnvironmentExecError):
        asyncio.run(runner.run("bash", {"command": "ls"}))
    with pytest.raises(EnvironmentExecError):
        asyncio.run(runner.run("editor", {"command": "view", "path": "/app"}))


def test_unexpected_tool_failures_become_error_results(make_task: TaskMaker) -> None:
    env = ScriptedEnv(make_task("scripted"), _raise(RuntimeError("boom")))
    outcome = asyncio.run(ToolRunner(env, workdir="/app").run("bash", {"command": "ls"}))
    assert outcome.is_error and "failed unexpectedly (RuntimeError: boom)" in outcome.output


def test_refused_upload_is_an_error_only_while_the_sandbox_answers(make_task: TaskMaker) -> None:
    alive = {"yes": True}

    def exec_fn(command: str) -> ExecResult:
        if command == "true":
            if not alive["yes"]:
                raise EnvironmentExecError("container is gone")
            return ExecResult("", "", 0)
        return ExecResult("N - /app/x.txt\n", "", 0)  # the create check: a new file

    env = ScriptedEnv(make_task("scripted"), exec_fn)
    env.upload_error = EnvironmentExecError("/app/x.txt is read-only")
    runner = ToolRunner(env, workdir="/app")
    args = {"command": "create", "path": "/app/x.txt", "file_text": "x"}
    outcome = asyncio.run(runner.run("editor", args))
    assert outcome.is_error and "could not write /app/x.txt" in outcome.output
    alive["yes"] = False
    with pytest.raises(EnvironmentExecError):
        asyncio.run(runner.run("editor", args))
