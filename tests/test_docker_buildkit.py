"""Ordinary BuildKit-era Dockerfiles build on docker with no variable set (issue 31):
`COPY --chmod`, `RUN --mount=type=cache`, heredocs and `# syntax=docker/dockerfile:1.7`
(whose frontend image is on a registry these machines cannot reach). Where no
BuildKit can run, the error is one line naming the feature and how to get BuildKit.
The task's folder is never changed. The Dockerfile rewrites are checked without an
engine below."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from helios.environments.docker import DockerEnvironment
from helios.environments.docker import builder as builder_mod
from helios.environments.docker.dockerfile import buildkit_features, derive
from helios.errors import EnvironmentBuildError
from helios.tasks.task import load_task

from .conftest import TaskMaker

SCRIPT = "#!/bin/sh\necho script-ran\n"
#: name -> a Dockerfile (after its FROM line) whose image's /out must read "script-ran"
DOCKERFILES = {
    "chmod": "COPY --chmod=755 run.sh /run.sh\nRUN /run.sh > /out\n",
    "mount": ("COPY run.sh /run.sh\nRUN --mount=type=cache,target=/root/.cache "
              "chmod 755 /run.sh && /run.sh > /out\n"),
    "heredoc": (f"COPY <<EOF /run.sh\n{SCRIPT}EOF\n"
                "RUN <<EOF\nchmod 755 /run.sh\n/run.sh > /out\nEOF\n"),
    "syntax": "COPY --chmod=755 run.sh /run.sh\nRUN /run.sh > /out\n",
}  # fmt: skip
VARIABLES = ("HELIOS_DOCKER", "HELIOS_DOCKER_BUILD_NETWORK", "HELIOS_DOCKER_BUILDER",
             "DOCKER_BUILDKIT", "BUILDKIT_PROGRESS")  # fmt: skip


@pytest.fixture
def no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    builder_mod.forget()


def _task(make_task: TaskMaker, name: str, body: str, syntax: bool = False) -> Path:
    # a fresh file each time: a new image hash, so the build really runs
    task = make_task(name, files={"run.sh": SCRIPT, f"u{uuid.uuid4().hex}": "x"})
    head = "# syntax=docker/dockerfile:1.7\n" if syntax else ""
    (task / "environment" / "Dockerfile").write_text(f"{head}FROM debian:bookworm-slim\n{body}")
    return task


def _fingerprint(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _build_and_read(task: Path, path: str) -> str:
    env = DockerEnvironment(load_task(task).sandbox_spec(), trial_id=uuid.uuid4().hex[:8],
                            run_id="pytest-buildkit")  # fmt: skip

    async def go() -> str:
        await env.build()
        await env.start()
        try:
            result = await env.exec(f"cat {path}", timeout=30)
            assert result.ok, result
            return result.stdout
        finally:
            await env.stop()

    try:
        return asyncio.run(go())
    finally:
        subprocess.run(["docker", "rmi", "-f", env.image], capture_output=True)


@pytest.mark.usefixtures("need_docker", "no_variables")
@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_buildkit_dockerfiles_build_with_no_variables(make_task: TaskMaker, name: str) -> None:
    task = _task(make_task, f"bk-{name}", DOCKERFILES[name], syntax=name == "syntax")
    before = _fingerprint(task)
    assert _build_and_read(task, "/out") == "script-ran\n"
    assert _fingerprint(task) == before  # the user's folder is untouched


@pytest.mark.usefixtures("need_docker", "no_variables")
def test_the_build_network_setting_still_applies(
    make_task: TaskMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "COPY --chmod=755 run.sh /run.sh\nRUN tail -n +3 /proc/net/dev | cut -d: -f1 > /ifs\n"
    alone = _build_and_read(_task(make_task, "bk-net-default", body), "/ifs").split()
    monkeypatch.setenv("HELIOS_DOCKER_BUILD_NETWORK", "host")
    host = _build_and_read(_task(make_task, "bk-net-host", body), "/ifs").split()
    assert alone == ["lo"]  # a daemon without a bridge: no network, as the classic builder
    assert set(host) > {"lo"}, host  # the host's interfaces


@pytest.mark.usefixtures("need_docker", "no_variables")
@pytest.mark.parametrize("how", ["no-buildkit-client", "setting"])
def test_without_buildkit_one_line_names_the_feature(
    make_task: TaskMaker, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "setting":
        monkeypatch.setenv("HELIOS_DOCKER_BUILDER", "classic")
    else:  # a client from 23.0 on without the buildx plugin

        async def classic(docker: str, forced: str | None) -> str:
            return builder_mod.CLASSIC

        monkeypatch.setattr(builder_mod, "_kind", classic)
    task = _task(make_task, "bk-classic", DOCKERFILES["chmod"])
    with pytest.raises(EnvironmentBuildError) as raised:
        _build_and_read(task, "/out")
    message = str(raised.value)
    assert "\n" not in message
    assert "Dockerfile:2 uses `COPY --chmod`, which needs BuildKit" in message, message
    remedy = "HELIOS_DOCKER_BUILDER" if how == "setting" else "buildx plugin"
    assert remedy in message, message


# -- the rewrites, without an engine ----------------------------------------------------


def _run_script(line: str) -> tuple[str, list[str]]:
    flags, _, exec_form = line.removeprefix("RUN ").rpartition("[")
    argv = json.loads("[" + exec_form)
    return flags.strip(), argv


def test_a_bare_heredoc_becomes_its_script_and_flags_stay() -> None:
    text = ("FROM x\nRUN --mount=type=cache,target=/c <<EOF\necho a\necho \"$HOME\"\nEOF\n"
            "RUN echo after\n")  # fmt: skip
    out = derive(text)
    assert out is not None
    lines = out.splitlines()
    flags, argv = _run_script(lines[1])
    assert flags == "--mount=type=cache,target=/c"
    assert argv == ["/bin/sh", "-c", 'echo a\necho "$HOME"']
    assert lines[2] == "RUN echo after"


def test_heredoc_forms() -> None:
    # a command fed by a heredoc: the line and its body are one shell script
    out = derive('FROM x\nRUN python3 <<"PY" > /o\nprint(1)\nPY\n')
    assert out is not None
    assert _run_script(out.splitlines()[1])[1] == ["/bin/sh", "-c",
                                                   'python3 <<"PY" > /o\nprint(1)\nPY']  # fmt: skip
    # <<- strips the body's leading tabs and finds an indented closing word
    out = derive("FROM x\nRUN <<-EOF\n\techo a\n\tEOF\nRUN true\n")
    assert out is not None
    assert _run_script(out.splitlines()[1])[1] == ["/bin/sh", "-c", "echo a"]
    # a shebang: run as a program
    out = derive("FROM x\nRUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n")
    assert out is not None
    script = _run_script(out.splitlines()[1])[1][2]
    assert "#!/usr/bin/env python3\nprint(1)" in script and 'chmod +x "$f"' in script
    # SHELL is honoured, and reset by the next FROM
    out = derive('FROM x\nSHELL ["/bin/bash", "-ec"]\nRUN <<EOF\nset -o pipefail\nEOF\n'
                 "FROM y\nRUN <<EOF\ntrue\nEOF\n")  # fmt: skip
    assert out is not None
    lines = out.splitlines()
    assert _run_script(lines[2])[1][:2] == ["/bin/bash", "-ec"]
    assert _run_script(lines[4])[1][:2] == ["/bin/sh", "-c"]


def test_what_is_left_alone() -> None:
    assert derive("FROM x\nRUN cat <<<hello\nRUN echo '<<'\n") is None
    # a frontend that is not Docker's own is the author's choice, kept
    assert derive("# syntax=example.com/my/frontend:2\nFROM x\n") is None
    # Docker's own is dropped, as a directive only
    out = derive("# syntax=docker/dockerfile:1.7-labs\nFROM x\n# syntax=docker/dockerfile:1\n")
    assert out is not None
    assert out.splitlines()[1:] == ["FROM x", "# syntax=docker/dockerfile:1"]
    assert not out.startswith("# syntax=")
    # the other directives stay directives: before any comment, at the top
    out = derive("# syntax=docker/dockerfile:1\n# escape=`\nFROM x\n")
    assert out is not None
    assert out.splitlines()[0] == "# escape=`" and out.splitlines()[2] == "FROM x"


def test_a_copy_heredoc_becomes_a_run_that_writes_the_file() -> None:
    out = derive("FROM x\nCOPY --chmod=755 <<EOF /usr/local/bin/hi\n#!/bin/sh\necho $A\nEOF\n")
    assert out is not None
    (script,) = [_run_script(line)[1][2] for line in out.splitlines() if line.startswith("RUN")]
    assert script == ('mkdir -p "$(dirname /usr/local/bin/hi)" && cat > /usr/local/bin/hi <<EOF\n'
                      "#!/bin/sh\necho $A\nEOF\nchmod 755 /usr/local/bin/hi")  # fmt: skip
    # into a folder: the file takes the heredoc's name, as BuildKit names it
    out = derive("FROM x\nCOPY <<'conf' /etc/app/\nkey = 1\nconf\n")
    assert out is not None
    assert "cat > /etc/app/conf <<'conf'\nkey = 1\nconf" in _run_script(out.splitlines()[1])[1][2]


def test_the_classic_builder_s_missing_features_are_found_at_their_lines() -> None:
    text = ("# syntax=docker/dockerfile:1\nFROM x\nCOPY --chmod=755 a /a\n"
            "RUN --mount=type=cache,target=/c true\nRUN <<EOF\ntrue\nEOF\n")  # fmt: skip
    found = [(f.name, f.line) for f in buildkit_features(text)]
    assert found == [("`# syntax=`", 1), ("`COPY --chmod`", 3), ("`RUN --mount`", 4),
                     ("a heredoc (`<<EOF`)", 5)]  # fmt: skip
    assert buildkit_features("FROM x\nRUN echo --mount\nCOPY a /--chmod\n") == []
