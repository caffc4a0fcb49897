"""The desktop of GUI tasks, per sandbox provider (docker, local): figures and their
ratios to the goals below; nothing here is asserted.

- start: from a started sandbox to `Desktop.start` returning (Xvfb, openbox and
  Chromium at a page, each checked ready), median of --starts (goal ≤ 1.5 s);
- round trip: one action (a pointer move) plus the screenshot after it, as the
  computer agent does each step, median of --steps (goal ≤ 150 ms), on the last
  start's desktop (as the settled screenshot's figures); and how the
  PNG reaches the host: base64 on the command's stdout (what `screenshot` does)
  against the sandbox's `download` of the file;
- settled screenshot: what the computer agent's settle (`settle_seconds`, default
  1.0: frames until two in a row are equal) adds to a step, move + screenshot
  and scroll + screenshot on the form page, median of --steps;
- memory: the proportional set size (PSS) of the sandbox's processes once the
  desktop is up, read inside the sandbox (each process's smaps_rollup);
- GUI trials/s: `helios`'s task door with the oracle on examples/gui/browser-form,
  --trials trials with --desktops at once (8 on this 2-core machine).

    .venv/bin/python benchmarks/desktop.py
    .venv/bin/python benchmarks/desktop.py --providers local --starts 3 --steps 10 --trials 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from helios.agents.computer.screen import capture
from helios.agents.computer.settings import DEFAULT_SETTLE_SECONDS
from helios.environments.base import Environment
from helios.environments.desktop.actions import Action, Geometry
from helios.environments.desktop.desktop import Desktop
from helios.environments.registry import create_environment
from helios.environments.spec import SandboxSpec

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "examples" / "gui" / "browser-form" / "environment" / "form.html"
IMAGE = "helios-desktop:bookworm"
GOALS = {"start": 1.5, "round trip": 0.150}
PSS = "cat /proc/[0-9]*/smaps_rollup 2>/dev/null | awk '/^Pss:/ {kb += $2} END {print kb}'"


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def spec(provider: str) -> SandboxSpec:
    image = IMAGE if provider == "docker" else None
    return SandboxSpec(image=image, label="desktop-bench", memory_mb=2048)


async def sandbox(provider: str) -> Environment:
    env = create_environment(provider, spec(provider), trial_id=uuid.uuid4().hex[:8],
                             run_id="desktop-bench")  # fmt: skip
    await env.start()
    await env.upload(PAGE, "/app/form.html")
    return env


async def one_start(provider: str) -> tuple[float, int, Environment, Desktop]:
    """Seconds to a ready desktop in a new sandbox, the sandbox's PSS in KiB once it
    is up, and the sandbox (the caller stops it) with its desktop."""
    env = await sandbox(provider)
    try:
        mark = time.monotonic()
        desktop = await Desktop.start(env, Geometry(), start_url="file:///app/form.html")
        seconds = time.monotonic() - mark
        pss = (await env.exec(PSS, cwd="/")).stdout.strip()
        return seconds, int(pss or 0), env, desktop
    except BaseException:
        await env.stop()
        raise


async def round_trips(desktop: Desktop, steps: int) -> tuple[list[float], list[float], int]:
    """Per step: a move plus the screenshot by stdout, and a capture fetched by
    `download` instead; the PNG's size."""
    await desktop.screenshot()  # warm: the page painted, the capture's first run
    by_stdout, by_download, size = [], [], 0
    scratch = Path(tempfile.mkdtemp(prefix="helios-desktop-bench-"))
    try:
        for i in range(steps):
            mark = time.monotonic()
            await desktop.execute(Action("move", point=(100 + i % 50, 300)))
            png = await desktop.screenshot()
            by_stdout.append(time.monotonic() - mark)
            size = len(png)
            mark = time.monotonic()
            await desktop.execute(Action("move", point=(200 + i % 50, 300)))
            await desktop.run("import -silent -window root /tmp/shot.png")
            target = scratch / f"{i}.png"
            await desktop.env.download("/tmp/shot.png", target)
            by_download.append(time.monotonic() - mark)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return by_stdout, by_download, size


async def settle_cost(desktop: Desktop, steps: int) -> dict[str, tuple[float, float]]:
    """Per kind of step (a move, a scroll of one notch back and forth): the median
    seconds of the action plus one screenshot, and plus a settled one."""
    await capture(desktop, None, None, DEFAULT_SETTLE_SECONDS)
    found: dict[str, tuple[float, float]] = {}
    for kind in ("move", "scroll"):
        plain: list[float] = []
        settled: list[float] = []
        for i in range(steps):
            for settle, into in ((0.0, plain), (DEFAULT_SETTLE_SECONDS, settled)):
                if kind == "move":
                    action = Action("move", point=(100 + i % 50, 300 + len(into) % 7))
                else:
                    action = Action("scroll", point=(500, 400), dy=1 if i % 2 == 0 else -1)
                mark = time.monotonic()
                await desktop.execute(action)
                await capture(desktop, None, None, settle)
                into.append(time.monotonic() - mark)
        found[kind] = statistics.median(plain), statistics.median(settled)
    return found


@dataclass
class Figures:
    starts: list[tuple[float, int]]
    round_trips: tuple[list[float], list[float], int]
    settle: dict[str, tuple[float, float]]


async def desktop_figures(provider: str, starts: int, steps: int) -> Figures:
    """--starts desktop starts, each in a new sandbox; the round trips and the settle
    cost on the last one's desktop (a desktop each would only add starts)."""
    found: list[tuple[float, int]] = []
    for index in range(max(1, starts)):
        seconds, pss, env, desktop = await one_start(provider)
        found.append((seconds, pss))
        if index < max(1, starts) - 1:
            await env.stop()
    try:
        trips = await round_trips(desktop, steps)
        settle = await settle_cost(desktop, steps)
    finally:
        await env.stop()
    return Figures(found, trips, settle)


def gui_trials(provider: str, trials: int, desktops: int) -> tuple[float, int, int, list[str]]:
    """Wall seconds for `trials` oracle trials of browser-form, `desktops` at once;
    how many passed, how many ran, and why the others did not pass."""
    from helios.tasks.runner import ParallelRunner

    out = Path(tempfile.mkdtemp(prefix="helios-desktop-bench-"))
    try:
        runner = ParallelRunner(
            [REPO / "examples" / "gui" / "browser-form"], n_concurrent=desktops,
            n_attempts=trials, agent="oracle", provider=provider, output_dir=out,
            quiet=True, show_progress=False,
        )  # fmt: skip
        mark = time.monotonic()
        batch = asyncio.run(runner.run())
        wall = time.monotonic() - mark
        passed = sum(1 for r in batch.results if r.reward >= 1.0)
        why = [_why(out, r.folder, r.error) for r in batch.results if r.reward < 1.0]
        return wall, passed, len(batch.results), why
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _why(run: Path, folder: str, error: object) -> str:
    """A failed trial's error, else the last lines of its oracle's and tests' output."""
    if error is not None:
        return str(error)[:300]
    lines = []
    for name in ("agent/oracle.txt", "verifier/test-stdout.txt"):
        for path in run.glob(f"*/{folder}/{name}"):
            lines += path.read_text(errors="replace").strip().splitlines()[-2:]
    return " | ".join(lines)[:300]


def ratio(name: str, value: float) -> str:
    goal = GOALS[name]
    verdict = "MET" if value <= goal else "MISSED"
    return f"{value / goal:.2f}x the goal of {goal * 1000:.0f} ms ({verdict})"


def report(provider: str, args: argparse.Namespace) -> None:
    figures = asyncio.run(desktop_figures(provider, args.starts, args.steps))
    starts = figures.starts
    start = statistics.median(s for s, _ in starts)
    pss = statistics.median(p for _, p in starts) / 1024
    print(f"{provider:6} start {start * 1000:.0f} ms (median of {args.starts}; "
          f"{min(s for s, _ in starts) * 1000:.0f}-{max(s for s, _ in starts) * 1000:.0f}): "
          f"{ratio('start', start)}; {load()}")  # fmt: skip
    print(f"{provider:6} memory {pss:.0f} MiB PSS per desktop (the sandbox's processes)")
    stdout, download, size = figures.round_trips
    rt = statistics.median(stdout)
    print(f"{provider:6} round trip {rt * 1000:.0f} ms (move + screenshot, median of "
          f"{args.steps}; PNG {size / 1024:.0f} KiB by base64 on stdout): "
          f"{ratio('round trip', rt)}; {load()}")  # fmt: skip
    print(f"{provider:6} round trip {statistics.median(download) * 1000:.0f} ms with the PNG "
          f"by download instead: stdout/download = "
          f"{statistics.median(stdout) / statistics.median(download):.2f}")  # fmt: skip
    for kind, (plain, settled) in figures.settle.items():
        print(f"{provider:6} settled screenshot adds {(settled - plain) * 1000:+.0f} ms per "
              f"{kind} step ({plain * 1000:.0f} -> {settled * 1000:.0f} ms, median of "
              f"{args.steps}; settle_seconds {DEFAULT_SETTLE_SECONDS:g}); {load()}")  # fmt: skip
    if args.trials:
        wall, passed, ran, why = gui_trials(provider, args.trials, args.desktops)
        print(f"{provider:6} GUI trials {ran / wall:.2f}/s ({ran} oracle trials of browser-form, "
              f"{args.desktops} desktops at once, {os.cpu_count()} cores: {wall:.1f} s, "
              f"{passed} passed); {load()}")  # fmt: skip
        for reason in why:
            print(f"{provider:6}   not passed: {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", default="docker,local")
    parser.add_argument("--starts", type=int, default=5, help="desktop starts per provider")
    parser.add_argument("--steps", type=int, default=20, help="action + screenshot round trips")
    parser.add_argument("--trials", type=int, default=16, help="GUI trials (0: none)")
    parser.add_argument("--desktops", type=int, default=8, help="GUI trials at once")
    args = parser.parse_args()
    for provider in args.providers.split(","):
        report(provider.strip(), args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
