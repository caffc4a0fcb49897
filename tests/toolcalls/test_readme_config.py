"""The docs' YAML config for `helios toolcalls` (docs/toolcalls.md), run as a new user would:
copied with the agent module the page shows into an empty folder, then `helios toolcalls
--config`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "toolcalls.md"


def _blocks() -> list[tuple[str, str]]:
    """The page's fenced code blocks, as (language, text)."""
    text = PAGE.read_text("utf-8")
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.M | re.S)


def _readme_files() -> dict[str, str]:
    """agents.py (the block that says so on its first line) and the YAML config after it."""
    blocks = _blocks()
    at = next(i for i, (lang, body) in enumerate(blocks)
              if lang == "python" and body.startswith("# agents.py, next to c.yaml"))  # fmt: skip
    config = next(body for lang, body in blocks[at + 1 :] if lang == "yaml")
    return {"agents.py": blocks[at][1], "c.yaml": config}


@pytest.mark.espeak
def test_the_readme_toolcalls_config_runs_in_an_empty_folder(tmp_path: Path) -> None:
    files = _readme_files()
    assert "agents:KeywordAgent" in files["c.yaml"]  # the module the page says to write
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "helios", "toolcalls", "--config", "c.yaml"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  book_flight_berlin_rome  (100% match)  [5/5 runs]" in result.stdout


def test_without_the_module_the_error_says_where_it_is_looked_for(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(_readme_files()["c.yaml"], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "helios", "toolcalls", "--config", "c.yaml"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no agents.py next to the config file" in result.stdout + result.stderr
