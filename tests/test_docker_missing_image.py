"""A GUI task on docker without Helios's desktop image (issue 28, point 10): the
trial's error names the image and the command that builds it, at once, never a
registry's DNS error from a pull that cannot work. The image is a tag that does
not exist (`helios-desktop:` + NO_SUCH_TAG), so the real image stays."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helios.environments.docker.base_images import base_images, is_desktop_image
from helios.tasks.runner import ParallelRunner

NO_SUCH_TAG = "helios-test-no-such-tag"
MISSING = f"helios-desktop:{NO_SUCH_TAG}"
TOML = ('version = "1.0"\n[metadata]\ncategory = "computer-use"\n[agent]\ntimeout_sec = 30.0\n'
        "[verifier]\ntimeout_sec = 30.0\n[environment]\n{image}"
        '[environment.desktop]\nstart_url = "about:blank"\n')  # fmt: skip
#: how the task names the image: a Dockerfile that starts FROM it, or the image itself
HOW = {
    "dockerfile": ("", f"FROM {MISSING}\nWORKDIR /app\n"),
    "prebuilt": (f'docker_image = "{MISSING}"\n', None),
}


def _task(root: Path, how: str) -> Path:
    image_line, dockerfile = HOW[how]
    folder = root / "gui-task"
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(TOML.format(image=image_line))
    (folder / "instruction.md").write_text("Look at the screen.\n")
    if dockerfile is not None:
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    (folder / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    return root


@pytest.mark.docker
@pytest.mark.usefixtures("need_docker")
@pytest.mark.parametrize("how", sorted(HOW))
def test_a_missing_desktop_image_is_named_with_its_build_command(how: str, tmp_path: Path) -> None:
    tasks = _task(tmp_path / "tasks", how)
    runner = ParallelRunner(tasks, agent="nop", provider="docker", output_dir=tmp_path / "out",
                            show_progress=False)  # fmt: skip
    asyncio.run(runner.run())
    assert runner.run_dir is not None
    (record,) = [json.loads(line) for line in (runner.run_dir / "results.jsonl").open()]
    error = record.get("error") or {}
    message = error.get("message", "")
    assert error.get("type") == "BaseImageMissing", record
    assert MISSING in message and "docker build" in message, message
    assert "desktop-base" in message, message  # the build context of the image
    assert "\n" not in message
    for registry_noise in ("lookup", "dial tcp", "registry-1", "no such host"):
        assert registry_noise not in message, message


def test_base_images_are_read_from_the_from_lines() -> None:
    dockerfile = (
        "ARG BASE=debian\nFROM --platform=linux/amd64 helios-desktop:bookworm AS gui\n"
        "FROM $BASE\nFROM gui\nFROM scratch\nfrom reg.example:5000/team/helios-desktop:x\n"
    )
    assert base_images(dockerfile) == [
        "helios-desktop:bookworm", "reg.example:5000/team/helios-desktop:x"
    ]  # fmt: skip
    assert is_desktop_image("helios-desktop:bookworm")
    assert is_desktop_image("reg.example:5000/team/helios-desktop:x")
    assert not is_desktop_image("debian:bookworm-slim")
    assert not is_desktop_image("reg.example:5000/helios-desktop-extra")
