"""Harbor's computer-1-click-calibration task, through `helios run TASK --agent
computer`, on docker and on local, with no start URL: the scripted model server
passes it by seeing. Its first actions are keys (ctrl+l, the page's address,
Return), as a model opens a page; it finds every target by colour in the
screenshots it is sent, and reads the code from the zoom's crop by matching glyphs
it renders itself (helios.testing.glyphs).

The task folder is Helios's rebuild of Harbor's (its NOTICE says how it differs),
not Harbor's verbatim files: those cannot be fetched here."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer

from .conftest import helios_cmd
from .desktop_helpers import PROVIDERS, need_desktop

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

TASK = Path(__file__).parent / "fixtures" / "harbor" / "computer-1-click-calibration"
KEY = "sk-helios-harbor-task-5ecret"
#: model → the URL attribute of the mock it is reached on: Anthropic's computer tool
#: (with zoom), and a generic JSON-action model
MODELS = {"anthropic/claude-opus-4-5": "anthropic_base_url",
          "openai-compatible/scripted-vision": "openai_base_url"}  # fmt: skip
PAGE = "file:///app/click_calibration.html"
#: the colours of the page's targets (its stylesheet)
RED, BLUE, GREEN, YELLOW, PURPLE = "#e53935", "#1e40ff", "#00a000", "#ffd600", "#9c27b0"
DOUBLE, RIGHT, FIELD, KNOB, ZONE = "#5e35b1", "#ff4081", "#80deea", "#ff6d00", "#ffe082"
REVEAL, CODE_BOX = "#0091ea", "#00897b"
ANSWER = "PASS — All 7 stages complete. Final answer must include CODE: {read}"

SCRIPT = {"scenarios": [{"match": "click_calibration.html", "turns": [
    {"action": "key", "keys": ["ctrl", "l"], "say": "Opening the page."},
    {"action": "type", "text": PAGE},
    {"action": "key", "keys": ["Return"]},
    # as a model does when the page has not painted yet (two equal frames of the old
    # page can come before the new one: a settled screenshot is not a page load)
    {"action": "wait", "seconds": 1},
    *({"action": "click", "target": colour} for colour in (RED, BLUE, GREEN, YELLOW, PURPLE)),
    {"action": "click", "target": DOUBLE, "count": 2},
    {"action": "click", "target": RIGHT, "button": "right"},
    {"action": "type", "target": FIELD, "text": "harbor"},
    {"action": "key", "keys": ["Return"]},
    {"action": "drag", "target": KNOB, "to": ZONE},
    {"action": "scroll", "target": {"point": [500, 400]}, "dy": 30},
    {"action": "click", "target": REVEAL},
    {"action": "zoom", "target": {"color": CODE_BOX, "tolerance": 8}},
    {"action": "done", "answer": ANSWER},
]}]}  # fmt: skip


def _cases() -> list[object]:
    """Each model on one provider, each provider once: a wire's code does not depend
    on the provider, nor the desktop's on the wire (each case is a Chromium episode)."""
    marks = {"docker": pytest.mark.docker, "local": pytest.mark.bwrap}
    pairs = zip(PROVIDERS, sorted(MODELS), strict=True)
    return [pytest.param(p, m, id=f"{p}-{m}", marks=marks[p]) for p, m in pairs]


def test_the_task_folder_is_in_harbors_format_without_a_start_url() -> None:
    for name in ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh",
                 "NOTICE"):  # fmt: skip
        assert (TASK / name).is_file(), name
    config = tomllib.loads((TASK / "task.toml").read_text())
    assert "start_url" not in json.dumps(config)
    assert "not a verbatim copy" in (TASK / "NOTICE").read_text().lower().replace("\n", " ")


@pytest.mark.parametrize(("provider", "model"), _cases())
def test_the_scripted_model_passes_by_seeing(provider: str, model: str, tmp_path: Path) -> None:
    need_desktop(provider)
    with MockLLMServer(script=SCRIPT, require_key=KEY) as server:
        done = subprocess.run(
            helios_cmd("run", str(TASK), "--agent", "computer", "-m", model,
                       "--base-url", getattr(server, MODELS[model]), "--api-key", KEY,
                       "--provider", provider, "-o", str(tmp_path)),
            capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
    (run,) = tmp_path.glob("*_*")
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    verifier = "\n".join(p.read_text() for p in run.glob("*/verifier/*.txt"))
    assert [row["reward"] for row in rows] == [1.0], (rows, verifier, done.stdout[-2000:],
                                                      done.stderr[-2000:])  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (trajectory,) = run.glob("*/agent/trajectory.json")
    calls = [call["arguments"] for step in json.loads(trajectory.read_text())["steps"]
             for call in step.get("tool_calls") or []]  # fmt: skip
    first = [(c.get("action"), c.get("text") or "+".join(c.get("keys") or ())) for c in calls[:3]]
    assert first == [("key", "ctrl+l"), ("type", PAGE), ("key", "Return")], first
