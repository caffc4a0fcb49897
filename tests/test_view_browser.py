"""`helios view` in real headless Chromium (Debian's, over the DevTools protocol):
the runs list, a run's table with a filter, a trial with its screenshot and the
click drawn on it, a run that grows while the page watches, and hostile text that
must stay text. Each test saves a screenshot of what it checked, under
$HELIOS_VIEW_ARTIFACTS when set (else the test's tmp_path).

The module's tests share one Chromium (each page a tab of its own that starts
without cookies: no token of another test's), and the viewer runs on a thread of the
test's process (`view_in_process`: the server the CLI starts, without a new
interpreter each time); the tokened URL's test starts it as a user does, and
tests/test_view_api.py checks the CLI's own options."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
from pathlib import Path
from urllib.parse import urlencode

from .cli_inprocess import helios_inprocess
from .conftest import TaskMaker, helios_cmd
from .headless_browser import VIEW_SIZE, Chromium, Page, open_page
from .view_helpers import (
    add_gui_trial,
    record,
    view_in_process,
    view_server,
    write_generate_run,
    write_run,
    write_toolcalls_run,
)

SIZE = VIEW_SIZE


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("HELIOS_VIEW_ARTIFACTS") or tmp_path / "screens")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def save(page: Page, tmp_path: Path, name: str) -> None:
    shot = await page.screenshot()
    assert shot.startswith(b"\x89PNG")
    (artifacts(tmp_path) / f"view-{name}.png").write_bytes(shot)


def hash_url(url: str, path: str, **params: str) -> str:
    return f"{url}#{path}" + (f"?{urlencode(params)}" if params else "")


def test_the_runs_list_shows_a_real_batch(
    browser: Chromium, need_bwrap: None, make_task: TaskMaker, tmp_path: Path
) -> None:
    make_task("hello", solve="true\n")
    make_task("broken", test="echo 0 > /logs/verifier/reward.txt\n")
    out = tmp_path / "output"
    subprocess.run(helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "--agent",
                              "oracle", "-q", "-o", str(out)),
                   check=True, capture_output=True, timeout=180)  # fmt: skip
    write_run(out / "batch_handwritten", [record(i) for i in range(3)])

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            await page.until("document.querySelectorAll('#runs-table tbody tr').length === 2")
            # the first cell is the box that picks a run for a comparison
            rows = await page.evaluate("""[...document.querySelectorAll('#runs-table tbody tr')]
                .map(tr => [...tr.children].slice(1).map(td => td.textContent))""")
            real = next(row for row in rows if row[0].startswith("batch_2"))
            assert real[1] == "batch" and real[3] == "oracle" and real[5] == "2"
            assert real[6] == "50.0%" and real[-1] == "done"
            await save(page, tmp_path, "runs")

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_a_runs_table_with_a_filter_applied(browser: Chromium, tmp_path: Path) -> None:
    statuses = ("passed", "failed", "error")
    items = [record(i, status=statuses[i % 3], reward=1.0 if i % 3 == 0 else 0.0,
                    error="TimeoutError: agent took too long" if i % 3 == 2 else None)
             for i in range(120)]  # fmt: skip
    write_run(tmp_path / "output" / "batch_big", items)

    async def go(url: str) -> None:
        async with open_page(hash_url(url, "/run", run="0/batch_big"), SIZE, browser) as page:
            await page.until("document.querySelectorAll('#trials-table tbody tr').length === 50")
            assert await page.evaluate("document.getElementById('trial-count').textContent") == (
                "120 of 120 trials, page 1 of 3"
            )
            # a person picks "failed" and a reward range, then presses Filter
            await page.evaluate("""(() => {
                const form = document.getElementById('filters');
                form.elements.status.value = 'failed';
                form.elements.reward_max.value = '0.5';
                form.querySelector('button[type=submit]').click();
            })()""")
            await page.until(
                "document.getElementById('trial-count')?.textContent.startsWith('40 of 120')"
            )
            cells = await page.evaluate("""[...document.querySelectorAll('#trials-table tbody tr')]
                .map(tr => tr.children[3].textContent)""")
            assert len(cells) == 40 and set(cells) == {"failed"}
            # sorting by duration, longest first, keeps the filter
            await page.evaluate("document.querySelector('th[data-sort=duration]').click()")
            await page.until("!!document.querySelector('th[data-sort=duration].sorted')")
            await page.evaluate("document.querySelector('th[data-sort=duration]').click()")
            await page.until("location.hash.includes('desc=1')")
            await page.until(
                "document.querySelector('#trials-table tbody tr td:nth-child(2)')"
                "?.textContent === 'task-118'"
            )
            await save(page, tmp_path, "run-filtered")

    with view_in_process(tmp_path / "output") as url:
        asyncio.run(go(url))


def test_a_trial_shows_its_screenshot_with_the_click_drawn(
    browser: Chromium, tmp_path: Path
) -> None:
    item = record(0, task_name="click-ok")
    run = write_run(tmp_path / "output" / "batch_gui", [item])
    agent = add_gui_trial(run, item)
    document = json.loads((agent / "trajectory.json").read_text())
    document["steps"].append({"step_id": 4, "source": "agent", "message": "Gemini clicks",
                              "tool_calls": [{"tool_call_id": "g", "function_name": "click_at",
                                              "arguments": {"x": 500, "y": 250}}]})  # fmt: skip
    (agent / "trajectory.json").write_text(json.dumps(document))

    async def go(url: str) -> None:
        target = hash_url(url, "/trial", run="0/batch_gui", folder=item["folder"])
        async with open_page(target, SIZE, browser) as page:
            await page.until("document.querySelectorAll('#steps .step').length === 4")
            await page.until(
                "[...document.querySelectorAll('img')].filter("
                "i => i.complete && i.naturalWidth === 320).length >= 4"
            )
            click = await page.evaluate("""(() => {
                const ring = document.querySelector('.screen svg .mark.click');
                const svg = ring.ownerSVGElement;
                return [ring.getAttribute('cx'), ring.getAttribute('cy'),
                        svg.getAttribute('viewBox')];
            })()""")
            assert click == ["120", "80", "0 0 320 200"]
            gemini = await page.evaluate("""(() => {
                const ring = document.querySelector('[data-step="3"] .screen svg .mark.click');
                return [ring.getAttribute('cx'), ring.getAttribute('cy')];
            })()""")
            assert gemini == ["160", "50"]  # (500, 250) on the 0-999 grid of a 320x200 screen
            assert await page.evaluate("document.querySelectorAll('.mark.drag').length") == 1
            text = await page.evaluate("document.body.innerText")
            assert "verifier of click-ok" in text and '"action": "click"' in text
            assert "prompt 1500" in text  # per-step tokens
            await page.evaluate("document.querySelector('[data-step=\"1\"]').scrollIntoView()")
            await save(page, tmp_path, "trial")

    with view_in_process(tmp_path / "output") as url:
        asyncio.run(go(url))


def test_a_running_run_updates_while_the_page_watches(browser: Chromium, tmp_path: Path) -> None:
    run = write_run(tmp_path / "output" / "batch_live", [record(0)], summary=False)

    async def go(url: str) -> None:
        async with open_page(hash_url(url, "/run", run="0/batch_live"), SIZE, browser) as page:
            await page.until("document.getElementById('run-status')?.textContent === 'running'")
            assert await page.evaluate("document.getElementById('run-trials').textContent") == "1"
            await page.evaluate("window.__samePage = 1")  # gone if the page reloaded
            for index in (1, 2):
                with (run / "results.jsonl").open("a") as handle:
                    handle.write(json.dumps(record(index, status="failed", reward=0.0)) + "\n")
                await page.until(f"document.getElementById('run-trials').textContent === "
                                 f"'{index + 1}'")  # fmt: skip
                await page.until(f"document.querySelectorAll('#trials-table tbody tr').length"
                                 f" === {index + 1}")  # fmt: skip
            assert await page.evaluate("window.__samePage") == 1
            # a watched batch: its GUI trial in flight links to its live desktop
            desktop = "http://127.0.0.1:40123/tok/desktops/t9/"
            (run / "desktops.json").write_text(json.dumps({"desktops": [
                {"trial_id": "t9", "label": "<i>click-ok</i>", "url": desktop}]}))  # fmt: skip
            await page.until("document.querySelectorAll('#desktops a').length === 1")
            link = await page.evaluate(
                "[...document.querySelectorAll('#desktops a')].map(a => [a.href, a.textContent])"
            )
            assert link == [[desktop, "<i>click-ok</i>"]]
            await save(page, tmp_path, "run-live")

    with (run / ".lock").open("a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(str(os.getpid()))
        lock.flush()
        with view_in_process(tmp_path / "output") as url:
            asyncio.run(go(url))


HOSTILE = (
    '<script>window.__pwned = "script"</script>',
    "<img src=x onerror=\"window.__pwned = 'onerror'\">",
    "<a href=\"javascript:window.__pwned = 'link'\">javascript:window.__pwned=1</a>",
)


def test_hostile_text_stays_text(browser: Chromium, tmp_path: Path) -> None:
    payload = " ".join(HOSTILE)
    item = record(0, task_name=HOSTILE[1], error=f"RuntimeError: {payload}",
                  verifier_note=HOSTILE[0], model=HOSTILE[2])  # fmt: skip
    item["folder"] = "001_x"
    run = write_run(tmp_path / "output" / "batch_hostile", [item], model=HOSTILE[2])
    agent = add_gui_trial(run, item)
    document = json.loads((agent / "trajectory.json").read_text())
    document["steps"][1]["message"] = payload
    document["steps"][1]["reasoning_content"] = payload
    document["steps"][1]["tool_calls"][0]["function_name"] = HOSTILE[1]
    document["steps"][2]["observation"]["results"][0]["content"] = payload
    document["steps"][0]["message"][1]["source"] = {
        "media_type": "image/png",
        "path": "javascript:window.__pwned=5",
    }
    (agent / "trajectory.json").write_text(json.dumps(document))
    (run / "001_x" / "verifier" / "test-stdout.txt").write_text(payload)
    (run / "001_x" / "verifier" / "test-stderr.txt").write_text(HOSTILE[2])

    async def visit(page: Page, name: str, ready: str, shown: str = "true") -> str:
        """The view's text once `ready`, and once `shown` with every detail opened
        (parts of a page load after it), after a screenshot, following every in-page
        link as a curious person would."""
        await page.until(ready)
        await page.until("(document.querySelectorAll('details').forEach(d => d.open = true), "
                         f"{shown})")  # fmt: skip
        await save(page, tmp_path, f"hostile-{name}")
        text: str = await page.evaluate("document.body.innerText")
        hrefs = await page.evaluate("[...document.querySelectorAll('a')].map(a => a.href)")
        assert hrefs and not [href for href in hrefs if not href.startswith("http://")]
        planted = "document.querySelectorAll('#main img[onerror], #main script').length"
        assert await page.evaluate(planted) == 0
        await page.evaluate("""[...document.querySelectorAll('a')]
            .filter(a => !a.getAttribute('href').startsWith('api/'))
            .forEach(a => { a.dispatchEvent(new MouseEvent('click', {cancelable: true})); })""")
        assert await page.evaluate("typeof window.__pwned") == "undefined"
        return text

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            text = await visit(page, "runs", "document.querySelectorAll('#runs-table tr').length")
            assert HOSTILE[2] in text  # the model, shown as it is
            await page.evaluate(f"location.hash = {json.dumps('#/run?run=0/batch_hostile')}")
            text = await visit(page, "run", "document.querySelectorAll('#trials-table tr').length")
            assert HOSTILE[0] in text and HOSTILE[1] in text  # the note and the task name
            await page.evaluate("location.hash = '#/trial?run=0/batch_hostile&folder=001_x'")
            # message, reasoning, observation, verifier stdout: each may come late
            four = f"document.body.innerText.split({json.dumps(payload)}).length > 4"
            text = await visit(page, "trial", "document.querySelectorAll('#steps .step').length",
                               four)  # fmt: skip
            assert text.count(payload) >= 4  # message, reasoning, observation, verifier stdout
            assert HOSTILE[1] in text and HOSTILE[2] in text  # the tool's name, stderr
            assert await page.evaluate("document.querySelectorAll('script').length") == 1

    with view_in_process(tmp_path / "output") as url:
        asyncio.run(go(url))


def test_bad_input_is_a_message_in_the_page(browser: Chromium, tmp_path: Path) -> None:
    run = write_run(tmp_path / "output" / "batch_bad", [record(0), record(1)])
    with (run / "results.jsonl").open("a") as handle:
        handle.write("{damaged\n")
    (run / "002_task-001" / "agent").mkdir()
    (run / "002_task-001" / "agent" / "trajectory.json").write_text('{"not": "atif"}')

    async def go(url: str) -> None:
        async with open_page(hash_url(url, "/run", run="0/batch_bad"), SIZE, browser) as page:
            await page.until("document.querySelectorAll('#trials-table tbody tr').length === 3")
            damaged = await page.evaluate(
                "document.querySelector('#trials-table tbody tr:nth-child(3)').innerText"
            )
            assert "damaged" in damaged and "line 3" in damaged
            await page.evaluate("location.hash = '#/trial?run=0/batch_bad&folder=001_task-000'")
            await page.until("!!document.getElementById('no-trajectory')")
            await page.evaluate("location.hash = '#/trial?run=0/batch_bad&folder=002_task-001'")
            message = await page.until("document.getElementById('trajectory-error')?.textContent")
            assert message == "trajectory.json is not an ATIF trajectory (schema_version None)"
            await page.evaluate("location.hash = '#/trial?run=0/batch_bad&folder=../../..'")
            error = await page.until(
                "!document.getElementById('error').hidden && "
                "document.getElementById('error').textContent"
            )
            assert error == "'../../..' is not a path inside the run"
            await save(page, tmp_path, "bad-input")

    with view_in_process(tmp_path / "output") as url:
        asyncio.run(go(url))


def test_a_bundle_works_from_file_urls(browser: Chromium, tmp_path: Path) -> None:
    statuses = ("passed", "failed")
    items = [record(i, status=statuses[i % 2], reward=float(i % 2 == 0)) for i in range(60)]
    items[0]["task_name"] = HOSTILE[1]
    run = write_run(tmp_path / "output" / "batch_shared", items)
    add_gui_trial(run, items[1])
    out = tmp_path / "bundle"
    done = subprocess.run(helios_cmd("view", str(tmp_path / "output"), "--bundle", str(out)),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out / 'index.html'}: 1 run(s), 60 trial(s)"
    # the refusal in this process (tests/cli_inprocess.py): it writes nothing
    again = helios_inprocess("view", str(tmp_path / "output"), "--bundle", str(out),
                             cwd=tmp_path)  # fmt: skip
    assert again.returncode == 2 and "exists and is not an empty folder" in again.stderr

    async def go() -> None:
        base = (out / "index.html").as_uri()
        async with open_page(base, SIZE, browser) as page:
            await page.until("document.querySelectorAll('#runs-table tbody tr').length === 1")
            await save(page, tmp_path, "bundle-runs")
            query = urlencode({"run": "0/batch_shared", "status": "failed", "sort": "duration",
                               "desc": "1"})  # fmt: skip
            await page.evaluate(f"location.hash = {json.dumps('#/run?' + query)}")
            await page.until("document.getElementById('trial-count')?.textContent"
                             ".startsWith('30 of 60')")  # fmt: skip
            first = await page.evaluate(
                "document.querySelector('#trials-table tbody tr td:nth-child(2)').textContent"
            )
            assert first == "task-059"
            folder = items[1]["folder"]
            target = "#/trial?" + urlencode({"run": "0/batch_shared", "folder": folder})
            await page.evaluate(f"location.hash = {json.dumps(target)}")
            await page.until("!!document.querySelector('.screen svg .mark.click')")
            await page.until(
                "[...document.querySelectorAll('.screen img')].every("
                "i => i.complete && i.naturalWidth === 320)"
            )
            await save(page, tmp_path, "bundle-trial")
            assert await page.evaluate("typeof window.__pwned") == "undefined"

    asyncio.run(go())


def test_a_generate_chat_and_a_toolcalls_mismatch(browser: Chromium, tmp_path: Path) -> None:
    payload = " ".join(HOSTILE)
    write_generate_run(tmp_path / "output" / "hermes_run", hostile=payload)
    write_toolcalls_run(tmp_path / "output" / "toolcalls_1", hostile=payload)

    async def go(url: str) -> None:
        async with open_page(hash_url(url, "/run", run="0/hermes_run"), SIZE, browser) as page:
            await page.until("document.querySelectorAll('#trials-table tbody tr').length === 3")
            await page.evaluate("document.querySelector('#trials-table tbody tr').click()")
            await page.until("document.querySelectorAll('#chat .turn').length === 5")
            roles = await page.evaluate(
                "[...document.querySelectorAll('#chat .turn .who')].map(n => n.textContent)"
            )
            assert roles == ["system", "human", "gpt", "tool", "gpt"]
            assert "terminal" in await page.evaluate(
                "document.getElementById('tool-stats').textContent"
            )
            assert payload in await page.evaluate("document.body.innerText")
            await save(page, tmp_path, "generate-chat")
            await page.evaluate("location.hash = '#/record?run=0/toolcalls_1&index=1'")
            await page.until("document.querySelectorAll('#tool-calls tr.mismatch').length === 1")
            row = await page.evaluate("document.querySelector('#tool-calls tr.mismatch').innerText")
            assert "✗" in row and '{"city":"Paris"}' in row and "city differs" in row
            assert payload in await page.evaluate("document.body.innerText")
            await save(page, tmp_path, "toolcalls-mismatch")
            assert await page.evaluate("typeof window.__pwned") == "undefined"

    with view_in_process(tmp_path / "output") as url:
        asyncio.run(go(url))


def test_beyond_loopback_the_page_works_from_its_tokened_url(
    browser: Chromium, tmp_path: Path
) -> None:
    write_run(tmp_path / "output" / "batch_remote", [record(0), record(1)])

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:  # the page's fetches carry the cookie
            await page.until("document.querySelectorAll('#runs-table tbody tr').length === 1")
            await page.evaluate("location.hash = '#/run?run=0/batch_remote'")
            await page.until("document.querySelectorAll('#trials-table tbody tr').length === 2")
        async with open_page(url.split("?", 1)[0], SIZE, browser) as page:  # without the token
            text = await page.until("document.body.innerText")
            assert "needs the token" in text

    with view_server(str(tmp_path / "output"), "--host", "127.0.0.2") as url:
        assert "?token=" in url
        asyncio.run(go(url))


def test_two_runs_picked_in_the_list_are_compared(browser: Chromium, tmp_path: Path) -> None:
    """A person ticks two runs (the first ticked is the baseline) and presses Compare:
    the page shows the delta, the verdict and the tasks that flipped, names as text."""
    out = tmp_path / "output"
    names = [HOSTILE[0] if i == 0 else f"t{i:02d}" for i in range(30)]
    write_run(out / "batch_a", [record(i, task_name=names[i]) for i in range(30)])
    b_items = [record(i, task_name=names[i], status="failed" if i < 9 else "passed",
                      reward=0.0 if i < 9 else 1.0) for i in range(30)]  # fmt: skip
    write_run(out / "batch_b", b_items, model="mock/m-2")

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            await page.until("document.querySelectorAll('#runs-table input.pick').length === 2")
            assert await page.evaluate("document.getElementById('compare-selected').disabled")
            await page.evaluate("""(() => {
                const row = (name) => [...document.querySelectorAll('#runs-table tbody tr')]
                    .find(tr => tr.textContent.includes(name));
                row('batch_a').querySelector('input.pick').click();
                row('batch_b').querySelector('input.pick').click();
                document.getElementById('compare-selected').click();
            })()""")
            await page.until("document.querySelectorAll('.comparison').length === 1")
            hash_now = await page.evaluate("location.hash")
            assert hash_now.startswith("#/compare?run=0%2Fbatch_a")
            items = await page.evaluate(
                "[...document.querySelectorAll('#regressions-B li')].map(li => li.textContent)"
            )
            assert sorted(items) == sorted(names[:9])
            delta = await page.evaluate("document.querySelector('.comparison .delta').textContent")
            assert "100.0% → 70.0%: -30.0 pp" in delta
            verdict = await page.evaluate("document.querySelector('.verdict').textContent")
            assert verdict == "B is significantly worse than A"
            models = await page.evaluate(
                "[...document.querySelectorAll('#compare-runs tbody tr')]"
                ".map(tr => tr.children[2].textContent)"
            )
            assert models == ["mock/m-1", "mock/m-2"]
            assert await page.evaluate("typeof window.__pwned") == "undefined"
            await save(page, tmp_path, "compare")

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_names_tags_folders_and_the_model_breakdown(browser: Chromium, tmp_path: Path) -> None:
    """A named, tagged run of two models and two agents (hostile name and tags: text),
    two runs whose folders share a name (told apart by their parent), and a run.json
    whose name and tags have the wrong types (one line; the run still listed)."""
    from .multi_model_run import write_multi_model_run

    out = tmp_path / "output"
    write_multi_model_run(out / "jobs" / "batch_x", {
        ("openai/alpha", "tool"): {"t1": [True], "t2": [False]},
        ("openai/beta", "tool"): {"t1": [True], "t2": [True]},
        ("openai/beta", "oracle"): {"t1": [False], "t2": [False]},
    }, name=HOSTILE[1], tags={"html": HOSTILE[0], "ansi": "\x1b[31mred"})  # fmt: skip
    for parent in ("model-a", "model-b"):
        write_run(out / parent / "batch_same", [record(0)])
    bad = write_run(out / "bad" / "batch_bad", [record(0)])
    meta = json.loads((bad / "run.json").read_text())
    (bad / "run.json").write_text(json.dumps({**meta, "name": 42, "tags": ["x"]}))

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            await page.until("document.querySelectorAll('#runs-table tbody tr').length === 4")
            cells = await page.evaluate("""Object.fromEntries([...document.querySelectorAll(
                '#runs-table tbody tr')].map(tr => [tr.dataset.key, tr.children[1].innerText]))""")
            assert cells["0/jobs/batch_x"].startswith(HOSTILE[1])  # the name, as text
            assert "output/jobs/batch_x" in cells["0/jobs/batch_x"]
            assert f"html={HOSTILE[0]}" in cells["0/jobs/batch_x"]
            # a control character is shown as its escape, never sent to the page
            assert "ansi=\\x1b[31mred" in cells["0/jobs/batch_x"]
            # same folder name: each shows its parent
            assert "output/model-a/batch_same" in cells["0/model-a/batch_same"]
            assert "output/model-b/batch_same" in cells["0/model-b/batch_same"]
            assert "field name: expected a string, got int" in cells["0/bad/batch_bad"]
            assert "field tags: expected an object, got list" in cells["0/bad/batch_bad"]
            planted = "document.querySelectorAll('#main img[onerror], #main script').length"
            assert await page.evaluate(planted) == 0
            await save(page, tmp_path, "runs-named")
            await page.evaluate("location.hash = '#/run?run=0/jobs/batch_x'")
            await page.until("document.querySelectorAll('#breakdown tbody tr').length === 3")
            rows = await page.evaluate("""[...document.querySelectorAll('#breakdown tbody tr')]
                .map(tr => [...tr.children].map(td => td.textContent))""")
            assert [row[:5] for row in rows] == [
                ["openai/alpha", "tool", "2", "1", "50.0%"],
                ["openai/beta", "oracle", "2", "0", "0.0%"],
                ["openai/beta", "tool", "2", "2", "100.0%"],
            ]
            await page.until("document.querySelectorAll('#trials-table .trial-model').length === 6")
            models = await page.evaluate(
                "[...document.querySelectorAll('#trials-table .trial-model')]"
                ".map(td => td.textContent)"
            )
            assert sorted(set(models)) == ["openai/alpha", "openai/beta"]
            title = await page.evaluate("document.getElementById('run-title').textContent")
            assert title == HOSTILE[1]
            assert await page.evaluate(planted) == 0
            assert await page.evaluate("typeof window.__pwned") == "undefined"
            await save(page, tmp_path, "run-breakdown")
            # a run of one model and agent has no breakdown
            await page.evaluate("location.hash = '#/run?run=0/model-a/batch_same'")
            await page.until("document.getElementById('run-where')?.textContent"
                             " === 'output/model-a/batch_same'")  # fmt: skip
            assert await page.evaluate("document.getElementById('breakdown')") is None
            assert await page.evaluate("document.querySelector('.trial-model')") is None

    with view_in_process(out) as url:
        asyncio.run(go(url))
