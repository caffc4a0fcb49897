"""`helios view` in real headless Chromium says the numbers the terminal says (issue
28, points 4, 5 and 10): an unknown cost is "unknown" (null in the API), never
$0.0000; a generate run shows the rows it wrote, not a pass rate, and no "Attempt
0"; percentages round half to even as the terminal's (0.5625 is 56.2%); the compare
page writes points as "pp" and money as "$"; `helios tasks check`'s runs are
labelled as such.

The module's tests share one Chromium (a tab each, without cookies) and run the
viewer on a thread (`view_in_process`), as tests/test_view_browser.py does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from helios.figures import percent

from .headless_browser import VIEW_SIZE, Chromium, Page, open_page
from .view_helpers import record, view_in_process, write_generate_run, write_run

SIZE = VIEW_SIZE


async def _api(page: Page, path: str) -> Any:
    """What the viewer's API answers the page (its token is the page's)."""
    await page.evaluate(f"""window.__answer = undefined; fetch('api/{path}', {{credentials:
        'same-origin'}}).then(r => r.json()).then(j => {{ window.__answer = j; }})""")
    return json.loads(await page.until("window.__answer && JSON.stringify(window.__answer)"))


async def _cells(page: Page, run: str) -> list[str]:
    """The runs list's row of `run`, without the pick box."""
    row: list[str] = await page.until(f"""(() => {{
        const tr = [...document.querySelectorAll('#runs-table tbody tr')]
            .find(tr => tr.textContent.includes({json.dumps(run)}));
        return tr && [...tr.children].slice(1).map(td => td.textContent);
    }})()""")
    return row


def _unpriced(index: int, **fields: Any) -> dict[str, Any]:
    usage = {"input_tokens": 100, "output_tokens": 10, "cost_usd": None,
             "cost_unknown_reason": "no price for openai-compatible/scripted"}  # fmt: skip
    return record(index, usage=usage, **fields)


def test_an_unknown_cost_is_unknown_not_zero(browser: Chromium, tmp_path: Path) -> None:
    out = tmp_path / "output"
    errored = _unpriced(1, status="error", reward=0.0, error="BadRequestError: no")
    write_run(out / "batch_unpriced", [_unpriced(0), errored])

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            runs = (await _api(page, "runs"))["runs"]
            assert [r["cost_usd"] for r in runs] == [None]
            run = await _api(page, "run?run=" + runs[0]["key"])
            assert run["cost_usd"] is None
            cells = await _cells(page, "batch_unpriced")
            assert "unknown" in cells and not any("$0.0000" in c for c in cells), cells
            await page.evaluate(f"location.hash = '#/run?run={runs[0]['key']}'")
            cost = await page.until("(document.getElementById('run-cost') || {}).textContent")
            assert cost == "unknown"

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_a_generate_run_shows_rows_written_and_no_attempt(
    browser: Chromium, tmp_path: Path
) -> None:
    out = tmp_path / "output"
    write_generate_run(out / "gen")

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            cells = await _cells(page, "gen")
            assert cells[1] == "generate" and "1 rows" in cells, cells
            assert not any(c.endswith("%") for c in cells), cells
            key = (await _api(page, "runs"))["runs"][0]["key"]
            await page.evaluate(f"location.hash = '#/run?run={key}'")
            rows = await page.until("(document.getElementById('rows-written') || {}).textContent")
            assert rows == "1"
            assert not await page.evaluate("document.getElementById('run-pass-rate')")
            await page.until("document.querySelectorAll('#trials tbody tr').length === 3")
            heads = await page.evaluate(
                "[...document.querySelectorAll('#trials th')].map(th => th.textContent)"
            )
            assert "Attempt" not in heads, heads

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_percentages_round_as_the_terminals(browser: Chromium, tmp_path: Path) -> None:
    """9 of 16 passed: 0.5625, a tie at one decimal; the terminal says 56.2%."""
    out = tmp_path / "output"
    items = [record(i, status="passed" if i < 9 else "failed", reward=1.0 if i < 9 else 0.0)
             for i in range(16)]  # fmt: skip
    write_run(out / "batch_ties", items)
    assert percent(9 / 16) == "56.2%"

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            cells = await _cells(page, "batch_ties")
            assert "56.2%" in cells, cells
            key = (await _api(page, "runs"))["runs"][0]["key"]
            await page.evaluate(f"location.hash = '#/run?run={key}'")
            shown = await page.until("(document.getElementById('run-pass-rate') || {}).textContent")
            assert shown == "56.2%"
            # the rule itself, on more ties and non-ties (Python's format is the reference)
            for value in (0.5625, 0.0625, 0.1875, 0.3125, 0.123456, 0.99999, 0.0005, 0.00125):
                assert await page.evaluate(f"pct({value!r})") == percent(value), value

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_the_compare_page_writes_points_and_dollars(browser: Chromium, tmp_path: Path) -> None:
    out = tmp_path / "output"
    write_run(out / "batch_a", [record(i) for i in range(10)])
    b_items = [record(i, status="failed" if i < 3 else "passed", reward=0.0 if i < 3 else 1.0,
                      usage={"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.0025})
               for i in range(10)]  # fmt: skip
    write_run(out / "batch_b", b_items)

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            runs = (await _api(page, "runs"))["runs"]
            keys = {r["name"]: r["key"] for r in runs}
            query = f"run={keys['batch_a']}&run={keys['batch_b']}"
            await page.evaluate(f"location.hash = '#/compare?{query}'")
            await page.until("document.querySelectorAll('.comparison').length === 1")
            delta = await page.evaluate("document.querySelector('.comparison .delta').textContent")
            assert "100.0% → 70.0%: -30.0 pp" in delta, delta
            assert " pp to " in delta and "%:" not in delta.replace("70.0%:", ""), delta
            muted = await page.evaluate("document.querySelector('.comparison p.muted').textContent")
            assert "cost +$0.0150" in muted and " $ " not in muted, muted

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_tasks_check_runs_are_labelled_tasks_check(browser: Chromium, tmp_path: Path) -> None:
    out = tmp_path / "output"
    write_run(out / "check_oracle_20261126", [record(0)], kind="check_oracle")

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            cells = await _cells(page, "check_oracle_20261126")
            assert cells[1] == "tasks check", cells

    with view_in_process(out) as url:
        asyncio.run(go(url))


def test_the_pass_rate_is_the_batchs_one_pass_rate(browser: Chromium, tmp_path: Path) -> None:
    """1 valid task passed, 1 invalid: the panel, batch_summary.json and --fail-under say
    50%, and so does the viewer (the raw 100% is beside it, named)."""
    out = tmp_path / "output"
    run = write_run(out / "batch_invalid", [record(0)])
    summary = json.loads((run / "batch_summary.json").read_text())
    summary |= {"pass_rate": 0.5, "raw_pass_rate": 1.0, "invalid": 1, "total_tasks": 2}
    (run / "batch_summary.json").write_text(json.dumps(summary))

    async def go(url: str) -> None:
        async with open_page(url, SIZE, browser) as page:
            cells = await _cells(page, "batch_invalid")
            assert "50.0%" in cells and "100.0%" not in cells, cells
            key = (await _api(page, "runs"))["runs"][0]["key"]
            await page.evaluate(f"location.hash = '#/run?run={key}'")
            shown = await page.until("(document.getElementById('run-pass-rate') || {}).textContent")
            assert shown == "50.0%"
            text = await page.evaluate("document.getElementById('run-summary').textContent")
            assert "Raw pass rate100.0% of the trials run" in text, text

    with view_in_process(out) as url:
        asyncio.run(go(url))
