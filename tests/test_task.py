from __future__ import annotations

from pathlib import Path

import pytest

from helios.errors import TaskFormatError
from helios.tasks.task import discover_tasks, dockerfile_workdir, load_task, tree_checksum

from .conftest import EXAMPLES, TaskMaker


def test_examples_load_with_expected_fields() -> None:
    dirs = discover_tasks(EXAMPLES)
    assert len(dirs) >= 6
    tasks = [load_task(d) for d in dirs]
    names = [t.name for t in tasks]
    assert names == sorted(names)
    for task in tasks:
        assert task.instruction.strip()
        assert task.dockerfile is not None
        assert task.dockerfile.read_text().startswith("FROM debian:bookworm-slim")
        assert (task.solution_dir / "solve.sh").is_file()
        assert task.config.environment.allow_internet is False
        assert len(task.checksum) == 64


def test_discover_is_stable_and_honours_pattern(make_task: TaskMaker, tmp_path: Path) -> None:
    for name in ("b-task", "a-task", "nested/c-task"):
        make_task(name)
    root = tmp_path / "tasks"
    found = discover_tasks(root)
    assert [p.name for p in found] == ["a-task", "b-task", "c-task"]
    assert discover_tasks(root) == found
    only_nested = discover_tasks(root, pattern="nested/*/task.toml")
    assert [p.name for p in only_nested] == ["c-task"]
    # a task folder itself is its own single result
    assert discover_tasks(root / "a-task") == [(root / "a-task").resolve()]


def test_invalid_toml_names_file_and_line(make_task: TaskMaker) -> None:
    task = make_task("broken")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = = 3\n')
    with pytest.raises(TaskFormatError) as info:
        load_task(task)
    message = str(info.value)
    assert str(task / "task.toml") in message
    assert ":3" in message
    assert "\n" not in message


def test_wrong_type_names_field_and_line(make_task: TaskMaker) -> None:
    task = make_task("badfield")
    (task / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = "soon"\n')
    with pytest.raises(TaskFormatError) as info:
        load_task(task)
    assert info.value.field == "agent.timeout_sec"
    assert info.value.line == 3
    assert "agent.timeout_sec" in str(info.value)


def test_negative_timeout_rejected(make_task: TaskMaker) -> None:
    task = make_task("negative", verifier_timeout=-1)
    with pytest.raises(TaskFormatError, match=r"verifier\.timeout_sec"):
        load_task(task)


def test_missing_parts_are_reported(make_task: TaskMaker) -> None:
    task = make_task("noinstr")
    (task / "instruction.md").unlink()
    with pytest.raises(TaskFormatError, match=r"instruction\.md"):
        load_task(task)
    task2 = make_task("notest")
    (task2 / "tests" / "test.sh").unlink()
    with pytest.raises(TaskFormatError, match=r"test\.sh"):
        load_task(task2)
    task3 = make_task("noenv")
    (task3 / "environment" / "Dockerfile").unlink()
    with pytest.raises(TaskFormatError, match="docker_image"):
        load_task(task3)


def test_harbor_spellings_accepted(make_task: TaskMaker) -> None:
    task = make_task("harbor", toml_extra='allow_internet = true\ndocker_image = "x:1"\n')
    text = (task / "task.toml").read_text().replace('version = "1.0"', 'schema_version = "1.1"')
    (task / "task.toml").write_text(text + '[solution]\nenv = {}\n[task]\nname = "org/x"\n')
    loaded = load_task(task)
    assert loaded.config.version == "1.1"
    assert loaded.config.environment.allow_internet is True
    assert loaded.config.environment.docker_image == "x:1"


def test_checksum_changes_with_content_and_mode(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("one")
    first = tree_checksum(tmp_path)
    (tmp_path / "a").write_text("two")
    second = tree_checksum(tmp_path)
    (tmp_path / "a").chmod(0o755)
    third = tree_checksum(tmp_path)
    assert len({first, second, third}) == 3


def test_workdir_from_dockerfile(make_task: TaskMaker) -> None:
    task = make_task("wd")
    (task / "environment" / "Dockerfile").write_text("FROM x\nWORKDIR /srv\nWORKDIR /srv/app\n")
    assert load_task(task).workdir == "/srv/app"


@pytest.mark.parametrize(
    ("text", "workdir"),
    [
        ('FROM x\nARG BASE=/srv\nENV P=project\nWORKDIR $BASE\nWORKDIR "${P}/src"\n',
         "/srv/project/src"),
        ("FROM x\nWORKDIR app\nWORKDIR sub\n", "/app/sub"),  # relative: joined, as docker does
        ("FROM x\nENV A /opt\nWORKDIR ${A}/w \\\n\n", "/opt/w"),  # legacy ENV, a continuation
        ("FROM x\nWORKDIR ${UNSET:-/d}\n# WORKDIR /no\n", "/d"),
        ("FROM x AS build\nWORKDIR /build\nFROM y\n", None),  # the final stage's alone
    ],
)
def test_the_dockerfile_text_gives_the_fallback_workdir(
    tmp_path: Path, text: str, workdir: str | None
) -> None:
    (tmp_path / "Dockerfile").write_text(text)
    assert dockerfile_workdir(tmp_path / "Dockerfile") == workdir


def test_derived_values_are_kept_per_task_and_worked_out_again_for_a_copy(
    make_task: TaskMaker,
) -> None:
    task = load_task(make_task("derived"))
    assert task.workdir == "/app"  # the Dockerfile's WORKDIR
    spec = task.sandbox_spec()
    assert task.sandbox_spec() is spec and spec.workdir == "/app"
    environment = task.config.environment.model_copy(update={"workdir": "/srv"})
    config = task.config.model_copy(update={"environment": environment})
    copy = task.model_copy(update={"config": config})
    assert copy.workdir == "/srv" and copy.sandbox_spec().workdir == "/srv"
    assert task.workdir == "/app" and task.sandbox_spec() is spec
