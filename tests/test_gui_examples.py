"""The GUI examples (examples/gui): how a task declares its desktop, and `helios
tasks check` on docker and local: the oracle (xdotool on the desktop Helios
started before it) reaches 1, nop stays at 0, and the tests read the live
browser's title after every process of the agent is gone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from helios.environments.local import LocalEnvironment
from helios.tasks.features import features_used, unsupported
from helios.tasks.schema import DesktopConfig, TaskConfig
from helios.tasks.task import load_task
from helios.tasks.trial import TrialSpec

from .conftest import helios_cmd
from .desktop_helpers import GUI_EXAMPLES, PROVIDERS, REPO, need_desktop
from .png_reader import read_png

EXAMPLES = ("browser-form", "click-calibration")


def test_a_task_declares_its_desktop() -> None:
    assert TaskConfig.model_validate({}).desktop is None
    short = TaskConfig.model_validate({"environment": {"desktop": True}}).desktop
    assert short == DesktopConfig()
    assert TaskConfig.model_validate({"environment": {"desktop": False}}).desktop is None
    table = TaskConfig.model_validate(
        {"environment": {"desktop": {"width": 800, "height": 600, "start_url": "file:///x"}}}
    ).desktop
    assert table == DesktopConfig(width=800, height=600, start_url="file:///x")
    # Harbor's computer-use tasks get one as they are.
    harbor = TaskConfig.model_validate({"metadata": {"category": "computer-use"}})
    assert harbor.desktop == DesktopConfig()
    opted_out = {"metadata": {"category": "computer-use"}, "environment": {"desktop": False}}
    assert TaskConfig.model_validate(opted_out).desktop is None
    with pytest.raises(ValueError):
        TaskConfig.model_validate({"environment": {"desktop": {"width": 10}}})


def test_the_examples_have_a_desktop_and_providers_without_services_refuse_them() -> None:
    class NoServices(LocalEnvironment):
        supports_services: ClassVar[bool] = False

    for name in EXAMPLES:
        task = load_task(GUI_EXAMPLES / name)
        assert "desktop" in features_used(task)
        assert task.config.desktop is not None and task.config.desktop.start_url
        assert unsupported(task, LocalEnvironment) == []
        assert [u.field for u in unsupported(task, NoServices)] == ["environment.desktop"]


def test_the_computer_agent_always_gets_a_desktop(make_task) -> None:  # type: ignore[no-untyped-def]
    plain = load_task(make_task("plain"))
    spec = TrialSpec("t", plain, 1, "computer", {}, None, "docker", "000_plain/attempt_001")
    assert spec.body().desktop == DesktopConfig()
    assert TrialSpec("t", plain, 1, "oracle", {}, None, "docker", "x").body().desktop is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tasks_check_passes_on_the_gui_examples(provider: str, tmp_path: Path) -> None:
    need_desktop(provider)
    result = subprocess.run(
        helios_cmd("tasks", "check", str(GUI_EXAMPLES), "--provider", provider,
                   "-o", str(tmp_path)),
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 2 tasks healthy" in result.stdout
    rewards = {}
    for summary in tmp_path.glob("check_*/batch_summary.json"):
        agent = summary.parent.name.split("_")[1]
        for row in _trials(summary.parent):
            rewards[(agent, row["task_name"])] = row["reward"]
    assert rewards == {
        ("oracle", "browser-form"): 1.0, ("oracle", "click-calibration"): 1.0,
        ("nop", "browser-form"): 0.0, ("nop", "click-calibration"): 0.0,
    }  # fmt: skip
    # The verifier read the live browser: its title is in the tests' output.
    outputs = "".join(p.read_text() for p in tmp_path.glob("check_oracle*/**/verifier/*.txt"))
    assert "Form accepted: ada@example.org on pro - Chromium" in outputs
    assert "calibration: all stages passed" in outputs
    # Every GUI trial keeps its final screen, whichever agent ran (here none is the
    # computer agent): the desktop as the verifier saw it, at its own size.
    finals = sorted(tmp_path.glob("check_*/*/agent/images/final.png"))
    assert len(finals) == 4, finals
    for final in finals:
        image = read_png(final.read_bytes())
        assert (image.width, image.height) == (1024, 768), final


def _trials(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line]


def test_the_desktop_benchmark_prints_its_figures() -> None:
    """benchmarks/desktop.py still runs (its figures are not asserted)."""
    need_desktop("local")
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "desktop.py"), "--providers", "local",
         "--starts", "1", "--steps", "2", "--trials", "1", "--desktops", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert re.search(r"^local +start \d+ ms .*x the goal of 1500 ms", out, re.M), out
    assert re.search(r"^local +memory \d+ MiB PSS per desktop", out, re.M), out
    assert re.search(r"^local +round trip \d+ ms .*x the goal of 150 ms", out, re.M), out
    assert re.search(r"^local +round trip \d+ ms with the PNG by download", out, re.M), out
    assert re.search(r"^local +GUI trials \d+\.\d\d/s \(1 oracle trials .* 1 passed\)", out, re.M)
