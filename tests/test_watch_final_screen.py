"""`--watch` after a trial ends (issue 28, point 10): the trial's URL keeps serving
its final screen (read-only: a PNG, no VNC), until the batch ends, instead of
vanishing with the sandbox."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import aiohttp
import pytest

from helios.display import watch
from helios.tasks.runner import ParallelRunner
from helios.trajectories.images import FINAL_SCREEN, IMAGES_DIR

from .desktop_helpers import GUI_EXAMPLES, need_desktop
from .png_reader import read_png


@pytest.mark.docker
@pytest.mark.desktop
@pytest.mark.slow
def test_the_watch_url_shows_the_final_screen_after_the_trial_ends(tmp_path: Path) -> None:
    need_desktop("docker")
    tasks = tmp_path / "tasks"
    shutil.copytree(GUI_EXAMPLES / "browser-form", tasks / "browser-form")

    async def go() -> None:
        async with watch.serving() as server:
            runner = ParallelRunner(tasks, agent="oracle", provider="docker", watch="view",
                                    output_dir=tmp_path / "out", show_progress=False)  # fmt: skip
            await runner.run()  # the trial has ended; the batch's server still serves
            assert runner.run_dir is not None
            (record,) = [json.loads(line) for line in (runner.run_dir / "results.jsonl").open()]
            assert record["status"] != "error", record.get("error")
            trial = record["trial_id"]
            kept = runner.run_dir / record["folder"] / "agent" / IMAGES_DIR / FINAL_SCREEN
            async with aiohttp.ClientSession() as http:
                async with http.get(server.url(trial)) as page:
                    assert page.status == 200, await page.text()
                    html = await page.text()
                assert f'src="{FINAL_SCREEN}"' in html and "ended" in html
                async with http.get(server.url(trial) + FINAL_SCREEN) as shot:
                    assert shot.status == 200
                    assert shot.content_type == "image/png"
                    data = await shot.read()
                bridge = server.url(trial) + "websockify"
                async with http.get(bridge) as live:
                    assert live.status == 404  # read-only: no view of a sandbox that is gone
            assert data == kept.read_bytes()
            image = read_png(data)
            assert image.width > 100 and image.height > 100

    asyncio.run(go())


def test_the_last_screenshot_is_final_png_else_the_newest_and_never_a_link(
    tmp_path: Path,
) -> None:
    trial = tmp_path / "trial"
    images = trial / "agent" / IMAGES_DIR
    images.mkdir(parents=True)
    assert watch.last_screenshot(trial) is None
    png = b"\x89PNG\r\n\x1a\n"
    (images / "a.png").write_bytes(png + b"older")
    (images / "b.png").write_bytes(png + b"newer")
    os.utime(images / "a.png", (1, 1))
    assert watch.last_screenshot(trial) == png + b"newer"
    secret = tmp_path / "secret.png"
    secret.write_bytes(png + b"outside the trial")
    (images / FINAL_SCREEN).symlink_to(secret)
    assert watch.last_screenshot(trial) == png + b"newer"  # the link is not followed
    (images / FINAL_SCREEN).unlink()
    (images / FINAL_SCREEN).write_bytes(png + b"final")
    os.utime(images / FINAL_SCREEN, (1, 1))
    assert watch.last_screenshot(trial) == png + b"final"  # the verifier's screen wins
