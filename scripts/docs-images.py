"""Make the docs' pictures again, from real runs: nothing in them is written by hand.

    .venv/bin/python scripts/docs-images.py            # writes docs/images/*.png

What it does, in a temporary folder:
1. runs the example tasks (examples/tasks) with the tool agent against the scripted
   model server on 127.0.0.1, two attempts each, in the local sandbox. The script is
   tests/fixtures/scripted_examples.json without its answers for two tasks, for which
   the model submits at once: those trials fail at the verifier, as a weak model's
   would, so the pictures show failures, their reasons and figures that agree;
2. serves the run with `helios view` on 127.0.0.1;
3. opens it in headless Chromium (tests/headless_browser.py) and takes screenshots:
   - view-run.png: the run's summary and its trials, filtered to the failed ones;
   - view-trial.png: a passed trial, its trajectory step by step.

It needs bubblewrap and chromium (`make test`'s setup installs both) and no key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from headless_browser import Chromium, Page, open_page  # noqa: E402
from helios.testing.mock_llm import MockLLMServer  # noqa: E402

SIZE = (1280, 860)
#: the tasks whose scripted answers are left out (matched by their instruction's text)
UNSOLVED = ("/app/sales.csv", "/app/logs/")
SUBMIT = {"name": "submit", "arguments": {}}
GIVE_UP = {"match": "*", "turns": [{"text": "I am done.", "tool_calls": [SUBMIT]}]}


def script() -> dict[str, Any]:
    path = ROOT / "tests" / "fixtures" / "scripted_examples.json"
    full: dict[str, Any] = json.loads(path.read_text("utf-8"))
    kept = [s for s in full["scenarios"] if s["match"] not in UNSOLVED]
    return {"scenarios": [*kept, GIVE_UP]}


def run_batch(out: Path, base_url: str) -> Path:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "120"}
    subprocess.run(
        [sys.executable, "-m", "helios", "batch", str(ROOT / "examples" / "tasks"), "--provider",
         "local", "-m", "openai-compatible/scripted", "--base-url", base_url, "-k", "2", "-n", "4",
         "-q", "-o", str(out)],
        check=True, env=env, timeout=600,
    )  # fmt: skip
    (run,) = out.glob("batch_*")
    return run


def serve(folder: Path) -> tuple[subprocess.Popen[str], str]:
    """`helios view FOLDER`, and the URL it prints first."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "helios", "view", str(folder)], env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(60)
    if not first or not first[0].startswith("http://"):
        proc.kill()
        raise SystemExit(f"helios view printed no URL: {first}")
    return proc, first[0].strip()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def route(url: str, path: str, **params: str) -> str:
    return f"{url}#{path}?{urllib.parse.urlencode(params)}"


async def exact_size(page: Page) -> None:
    """The page's viewport at SIZE (the window's frame would take some of it)."""
    await page.call("Emulation.setDeviceMetricsOverride", width=SIZE[0], height=SIZE[1],
                    deviceScaleFactor=1, mobile=False)  # fmt: skip


async def shoot(url: str, run_key: str, passed_folder: str, images: Path) -> None:
    browser = Chromium(SIZE)  # one for both pictures, a tab each
    try:
        target = route(url, "/run", run=run_key, status="failed")
        async with open_page(target, SIZE, browser) as page:
            await exact_size(page)
            await page.until("document.querySelectorAll('#trials-table tbody tr').length === 4")
            await page.until("document.fonts.status === 'loaded'")
            (images / "view-run.png").write_bytes(await page.screenshot())
        target = route(url, "/trial", run=run_key, folder=passed_folder)
        async with open_page(target, SIZE, browser) as page:
            await exact_size(page)
            await page.until("document.querySelectorAll('#steps .step').length >= 3")
            (images / "view-trial.png").write_bytes(await page.screenshot())
    finally:
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=Path, default=ROOT / "docs" / "images",
                        help="where the PNG files go (default docs/images)")  # fmt: skip
    args = parser.parse_args()
    args.images.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="helios-docs-images-") as tmp:
        out = Path(tmp) / "output"
        with MockLLMServer(script=script()) as server:
            run = run_batch(out, server.openai_base_url)
        summary = json.loads((run / "batch_summary.json").read_text())
        print(f"run: {summary['passed']} passed, {summary['failed']} failed, "
              f"mean reward {summary['mean_reward']:.3f}")  # fmt: skip
        records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
        passed = next(r for r in records if r.get("status") == "passed"
                      and "hello-file" in json.dumps(r))  # fmt: skip
        proc, url = serve(out)
        try:
            runs = get_json(url + "api/runs")["runs"]
            (key,) = [r["key"] for r in runs]
            asyncio.run(shoot(url, key, passed["folder"], args.images))
        finally:
            proc.terminate()
            proc.wait(10)
    for name in ("view-run.png", "view-trial.png"):
        print(f"wrote {args.images / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
