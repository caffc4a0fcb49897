"""The tool agent's editor tool, in detail, in a real local sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helios.agents.tools import ToolOutcome, ToolRunner
from helios.environments.local import LocalEnvironment

from .agent_tool_helpers import (
    MARKER,
    _run_in,
    content,
    err,
    ok,
)

# --- editor, in detail ---------------------------------------------------------------------------


def test_editor_create_view_and_overwrite(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        path = f"{runner.workdir}/deep/dir/notes.txt"
        out = await ok(runner, "editor", command="create", path=path, file_text="alpha\nbeta\n")
        assert out == f"File created: {path} (2 lines)."
        again = await ok(runner, "editor", command="create", path=path, file_text="no newline")
        assert again.startswith("File overwritten")
        assert await content(runner, path) == "no newline"
        assert await ok(runner, "editor", command="view", path=path) == (
            f"{path}, lines 1-1 of 1:\n     1\tno newline\n"
        )
        empty = f"{runner.workdir}/empty.txt"
        await ok(runner, "editor", command="create", path=empty, file_text="")
        assert await ok(runner, "editor", command="view", path=empty) == f"{empty} is empty."
        # new files get ordinary permissions, not the 0600 of a host temp file
        mode = await runner.env.exec(f"stat -c %a {path}")
        assert mode.stdout.strip() == "644"

    _run_in(local_env, scenario)


def test_editor_str_replace(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        path = f"{runner.workdir}/code.py"
        text = "x = 1\ny = 2\nx = 1\nz = 3\n"
        await ok(runner, "editor", command="create", path=path, file_text=text)

        missing = await err(runner, "editor", command="str_replace", path=path, old_str="q = 9")
        assert f"old_str not found in {path}" in missing
        twice = await err(
            runner, "editor", command="str_replace", path=path, old_str="x = 1", new_str="x = 5"
        )
        assert "occurs 2 times" in twice and "lines 1, 3" in twice
        assert await content(runner, path) == text  # failed edits change nothing

        out = await ok(
            runner,
            "editor",
            command="str_replace",
            path=path,
            old_str="y = 2\nx = 1",
            new_str="y = 20\nx = 10\nw = 0",
        )
        assert "     2\ty = 20\n     3\tx = 10\n     4\tw = 0\n" in out
        assert await content(runner, path) == "x = 1\ny = 20\nx = 10\nw = 0\nz = 3\n"
        # omitting new_str deletes
        await ok(runner, "editor", command="str_replace", path=path, old_str="w = 0\n")
        assert await content(runner, path) == "x = 1\ny = 20\nx = 10\nz = 3\n"
        same = await err(
            runner, "editor", command="str_replace", path=path, old_str="z", new_str="z"
        )
        assert "identical" in same

    _run_in(local_env, scenario)


def test_editor_insert(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        path = f"{runner.workdir}/list.txt"
        await ok(runner, "editor", command="create", path=path, file_text="a\nb\nc\n")

        async def insert(line: Any, text: str) -> ToolOutcome:
            return await runner.run(
                "editor", {"command": "insert", "path": path, "insert_line": line, "new_str": text}
            )

        top = await insert(0, "top")
        assert not top.is_error and "     1\ttop\n     2\ta\n" in top.output
        assert not (await insert(2, "mid\n")).is_error  # after line 2 ("a"); "\n" optional
        assert not (await insert(5, "end")).is_error  # after the last line
        assert await content(runner, path) == "top\na\nmid\nb\nc\nend\n"
        for bad in (7, -1):
            out = await insert(bad, "x")
            assert out.is_error and "out of range" in out.output and "has 6 lines" in out.output
        assert (await insert(3.0, "float-ok")).is_error is False
        assert await content(runner, path) == "top\na\nmid\nfloat-ok\nb\nc\nend\n"

        bare = f"{runner.workdir}/bare.txt"
        await ok(runner, "editor", command="create", path=bare, file_text="a\nb")
        await ok(runner, "editor", command="insert", path=bare, insert_line=2, new_str="c")
        assert await content(runner, bare) == "a\nb\nc"

    _run_in(local_env, scenario)


def test_editor_view_range(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        path = f"{runner.workdir}/six.txt"
        await ok(runner, "editor", command="create", path=path, file_text="1\n2\n3\n4\n5\n6\n")

        async def view(rng: Any) -> ToolOutcome:
            return await runner.run("editor", {"command": "view", "path": path, "view_range": rng})

        assert (await view([2, 3])).output == f"{path}, lines 2-3 of 6:\n     2\t2\n     3\t3\n"
        assert (await view([5, -1])).output.endswith("     5\t5\n     6\t6\n")
        assert (await view([4, 100])).output.startswith(f"{path}, lines 4-6 of 6:")
        for bad, reason in (([0, 2], "out of range"), ([3, 2], "end must be"), ([1], "two")):
            out = await view(bad)
            assert out.is_error and reason in out.output, out.output
        assert (await view("1-2")).is_error

    _run_in(local_env, scenario)


def test_editor_long_view_is_truncated_with_a_hint(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        await ok(runner, "bash", command="seq 1 5000 > big.txt")
        out = await ok(runner, "editor", command="view", path=f"{runner.workdir}/big.txt")
        assert len(out) <= 2000 and MARKER.search(out) and "view_range" in out
        assert "     1\t1\n" in out and "  5000\t5000\n" in out

    _run_in(local_env, scenario, max_output_chars=2000)


def test_editor_directory_listing(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        await ok(
            runner,
            "bash",
            command="mkdir -p pkg/sub/deep .git/objects && touch pkg/a.py pkg/sub/deep/x.py "
            ".env pkg/.hidden top.txt",
        )
        w = runner.workdir
        out = await ok(runner, "editor", command="view", path=w)
        listed = out.splitlines()[1:]
        assert listed == [f"{w}/pkg/", f"{w}/pkg/a.py", f"{w}/pkg/sub/", f"{w}/top.txt"]
        # inside a hidden directory, its own entries are shown
        git = await ok(runner, "editor", command="view", path=f"{w}/.git/")
        assert git.splitlines()[1:] == [f"{w}/.git/objects/"]
        assert "directory" in await err(runner, "editor", command="view", path=w, view_range=[1, 2])

    _run_in(local_env, scenario)


def test_editor_path_errors(local_env: LocalEnvironment, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("host file\n")

    async def scenario(runner: ToolRunner) -> None:
        w = runner.workdir
        rel = await err(runner, "editor", command="view", path="main.py")
        assert "absolute" in rel and f"'{w}/main.py'" in rel
        assert "does not exist" in await err(runner, "editor", command="view", path=f"{w}/nope")
        assert "is a directory" in await err(
            runner, "editor", command="create", path=w, file_text="x"
        )
        assert "not a regular file" in await err(runner, "editor", command="view", path="/dev/null")
        # read-only system directories of the local sandbox
        assert "not writable" in await err(
            runner, "editor", command="create", path="/usr/helios-x", file_text="x"
        )
        await ok(runner, "bash", command="printf 'ab\\000cd' > bin.dat")
        assert "binary" in await err(
            runner, "editor", command="str_replace", path=f"{w}/bin.dat", old_str="ab"
        )
        # `..` is resolved before use, not passed on
        await ok(runner, "editor", command="create", path=f"{w}/x/../y.txt", file_text="y")
        assert await content(runner, f"{w}/y.txt") == "y"
        # a symlink to a host path must not be written through on the host
        await ok(runner, "bash", command=f"ln -s {canary} escape")
        await err(runner, "editor", command="create", path=f"{w}/escape", file_text="owned")
        await err(runner, "editor", command="str_replace", path=f"{w}/escape", old_str="host")

    _run_in(local_env, scenario)
    assert canary.read_text() == "host file\n"


def test_editor_keeps_mode_and_follows_symlinks_inside(local_env: LocalEnvironment) -> None:
    async def scenario(runner: ToolRunner) -> None:
        w = runner.workdir
        await ok(
            runner, "bash", command="printf '#!/bin/sh\\necho one\\n' > run.sh; chmod 750 run.sh"
        )
        await ok(runner, "bash", command="ln -s run.sh link.sh")
        path = f"{w}/link.sh"
        await ok(runner, "editor", command="str_replace", path=path, old_str="one", new_str="two")
        assert await ok(runner, "bash", command="./run.sh; stat -c %a run.sh") == "two\n750\n"
        assert (await runner.env.exec("test -L link.sh")).exit_code == 0

    _run_in(local_env, scenario)
