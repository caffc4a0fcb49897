"""scripts/docs-images.py makes the docs' pictures again from a real run: the example
tasks with the scripted model (two left unsolved), served by `helios view` and shot in
headless Chromium. The run it shoots must agree with itself (12 of 16 passed, mean 0.750)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .headless_browser import chromium
from .png_reader import read_png

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.bwrap
@pytest.mark.desktop
@pytest.mark.slow
def test_docs_images_are_made_from_a_real_run(need_bwrap: None, tmp_path: Path) -> None:
    if chromium() is None:
        pytest.fail("chromium is not installed (scripts/setup-system.sh installs it)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs-images.py"), "--images", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "run: 12 passed, 4 failed, mean reward 0.750" in done.stdout
    for name in ("view-run.png", "view-trial.png"):
        image = read_png((tmp_path / name).read_bytes())
        assert (image.width, image.height) == (1280, 860)
        assert len(image.colours()) > 20  # a page, not a blank screen
    # the pictures the docs show are the script's
    for name in ("view-run.png", "view-trial.png"):
        assert (ROOT / "docs" / "images" / name).is_file()
