"""`helios view`'s JSON API against hand-written run folders: the runs, a page of a
run's trials (sort, filter, growth while running), a trial, its steps, raw files,
and what must be refused (paths out of the folders, a missing token, a wrong Host)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helios.view.server import make_app, token_cookie

from .view_helpers import (
    add_gui_trial,
    record,
    view_server,
    write_generate_run,
    write_run,
    write_toolcalls_run,
)
from .waiting import wait_until

Call = Callable[..., Awaitable[tuple[int, Any]]]


def query(folders: list[Path], requests: list[tuple[str, dict[str, str]]], *,
          token: str = "", cookies: dict[str, str] | None = None,
          headers: dict[str, str] | None = None) -> list[tuple[int, Any, Any]]:  # fmt: skip
    """Each request's status, body (JSON when it is) and headers, from one app."""

    async def go() -> list[tuple[int, Any, Any]]:
        app = make_app(folders, token=token)
        async with TestClient(TestServer(app), cookies=cookies) as client:
            answers = []
            for path, params in requests:
                response = await client.get(path, params=params, headers=headers)
                body = await response.read()
                try:
                    value: Any = json.loads(body)
                except ValueError:
                    value = body
                answers.append((response.status, value, response.headers))
            return answers

    return asyncio.run(go())


def one(folders: list[Path], route: str, **params: str) -> tuple[int, Any]:
    status, body, _ = query(folders, [(route, params)])[0]
    return status, body


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "output"
    items = [record(0, task_name="alpha"), record(1, task_name="beta", status="failed", reward=0.0),
             record(2, task_name="gamma", status="error", reward=None,
                    error="ConnectionError: cannot connect to URL"),
             record(3, task_name="alpha", attempt=2, reward=1.0)]  # fmt: skip
    items[3]["folder"] = "001_alpha/attempt_002"
    write_run(root / "batch_a", items)
    add_gui_trial(root / "batch_a", items[0])
    return root


def test_the_runs_list_names_each_run_with_its_counts(runs: Path) -> None:
    store = runs / "gen_b" / ".helios"
    write_run(runs / "gen_tmp", [record(0)], summary=False, kind="generate")
    store.mkdir(parents=True)
    os.replace(runs / "gen_tmp" / "run.json", store / "run.json")
    os.replace(runs / "gen_tmp" / "results.jsonl", store / "results.jsonl")
    status, body = one([runs], "/api/runs")
    assert status == 200
    by_name = {run["name"]: run for run in body["runs"]}
    batch = by_name["batch_a"]
    assert (batch["door"], batch["trials"], batch["status"]) == ("batch", 4, "done")
    assert batch["statuses"] == {"passed": 2, "failed": 1, "error": 1}
    assert batch["pass_rate"] == 0.5 and batch["errors"] == {"ConnectionError": 1}
    assert batch["cost_usd"] == pytest.approx(0.004) and batch["model"] == "mock/m-1"
    assert by_name["gen_b"]["door"] == "generate" and by_name["gen_b"]["trials"] == 1
    assert by_name["gen_b"]["status"] == "interrupted"  # no statistics.json, no writer


def test_a_page_of_trials_sorts_and_filters(runs: Path) -> None:
    key = "0/batch_a"
    answers = query([runs], [
        ("/api/trials", {"run": key, "sort": "task", "desc": "1"}),
        ("/api/trials", {"run": key, "status": "passed"}),
        ("/api/trials", {"run": key, "task": "ALP", "attempt": "2"}),
        ("/api/trials", {"run": key, "error_type": "ConnectionError"}),
        ("/api/trials", {"run": key, "duration_min": "2", "duration_max": "3.5"}),
        ("/api/trials", {"run": key, "sort": "reward", "limit": "2", "offset": "1"}),
        ("/api/trials", {"run": key, "sort": "nonsense"}),
        ("/api/trials", {"run": key, "reward_min": "high"}),
        ("/api/trials", {"run": key, "sort": "reward", "desc": "1"}),
    ])  # fmt: skip
    tasks = lambda n: [row["task"] for row in answers[n][1]["rows"]]  # noqa: E731
    assert tasks(0) == ["gamma", "beta", "alpha", "alpha"]
    assert answers[1][1]["matched"] == 2 and set(tasks(1)) == {"alpha"}
    assert [row["attempt"] for row in answers[2][1]["rows"]] == [2]
    assert tasks(3) == ["gamma"] and "cannot connect" in answers[3][1]["rows"][0]["error"]
    assert tasks(4) == ["beta", "gamma"]
    page = answers[5][1]  # rewards 1, 0, None, 1 ascending: 0, 1, 1, None (missing last)
    assert page["matched"] == 4 and [row["reward"] for row in page["rows"]] == [1.0, 1.0]
    assert answers[6][0] == 400 and "sort must be one of" in answers[6][1]["error"]
    assert answers[7][0] == 400 and "reward_min must be a number" in answers[7][1]["error"]
    descending = [row["reward"] for row in answers[8][1]["rows"]]
    assert descending == [1.0, 1.0, 0.0, None]  # a missing reward last either way


def test_a_damaged_line_is_a_row_saying_so_and_later_records_count(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [record(0)])
    with (run / "results.jsonl").open("a") as handle:
        handle.write('{"trial_id": "x", "task_na\n')  # torn in the middle of the file
        handle.write(json.dumps(record(2, task_name="after")) + "\n")
        handle.write('{"trial_id": "half-written"')  # the writer is still on this line
    status, body = one([tmp_path], "/api/trials", run="0/r")
    assert status == 200 and body["total"] == 3
    rows = body["rows"]
    assert rows[1]["status"] == "damaged" and "line 2" in rows[1]["error"]
    assert rows[2]["task"] == "after"
    assert body["run"]["errors"] == {"damaged line": 1}


def test_a_running_run_grows_and_is_marked_running(tmp_path: Path) -> None:
    run = write_run(tmp_path / "live", [record(0)], summary=False)

    async def go() -> list[dict[str, Any]]:
        async with TestClient(TestServer(make_app([tmp_path]))) as client:
            seen = []
            with (run / ".lock").open("a+") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                lock.write(str(os.getpid()))
                lock.flush()
                seen.append(await (await client.get("/api/trials?run=0/live")).json())
                with (run / "results.jsonl").open("a") as handle:
                    handle.write(json.dumps(record(1)) + "\n")
                seen.append(await (await client.get("/api/trials?run=0/live")).json())
            seen.append(await (await client.get("/api/trials?run=0/live")).json())
            return seen

    first, second, after = asyncio.run(go())
    assert (first["total"], first["run"]["status"]) == (1, "running")
    assert (second["total"], second["run"]["status"]) == (2, "running")
    assert after["run"]["status"] == "interrupted"  # no summary, and no writer any more


def test_a_trial_has_its_files_steps_marks_and_verifier_output(runs: Path) -> None:
    answers = query([runs], [
        ("/api/trial", {"run": "0/batch_a", "folder": "001_alpha"}),
        ("/api/steps", {"path": "0/batch_a/001_alpha/agent/trajectory.json"}),
        ("/api/steps", {"path": "0/batch_a/001_alpha/agent/trajectory.json", "offset": "2",
                        "limit": "1"}),
    ])  # fmt: skip
    trial = answers[0][1]
    assert trial["stdout"]["text"] == "verifier of alpha\n"
    assert trial["trajectory"] == "0/batch_a/001_alpha/agent/trajectory.json"
    assert {f["path"] for f in trial["files"]} >= {"result.json", "agent/images/a.png"}
    steps = answers[1][1]
    assert steps["total"] == 3
    click = steps["steps"][1]
    assert click["tool_calls"][0]["mark"] == {"kind": "click", "action": "click",
                                              "points": [[120.0, 80.0]]}  # fmt: skip
    assert click["acted_on"].endswith("agent/images/a.png")  # the screen it acted on
    assert click["observations"][0]["content"][0]["src"].endswith("b.png")
    (drag,) = answers[2][1]["steps"]
    assert drag["tool_calls"][0]["mark"]["points"] == [[10.0, 10.0], [200.0, 150.0]]
    assert drag["acted_on"].endswith("b.png")


def test_missing_and_foreign_trajectories_are_clear_errors(runs: Path) -> None:
    agent = runs / "batch_a" / "002_beta" / "agent"
    agent.mkdir()
    (agent / "trajectory.json").write_text('{"messages": []}')
    (runs / "batch_a" / "003_gamma" / "agent").mkdir()
    (runs / "batch_a" / "003_gamma" / "agent" / "trajectory.json").write_text("{not json")
    answers = query([runs], [
        ("/api/trial", {"run": "0/batch_a", "folder": "001_alpha/attempt_002"}),
        ("/api/steps", {"path": "0/batch_a/002_beta/agent/trajectory.json"}),
        ("/api/steps", {"path": "0/batch_a/003_gamma/agent/trajectory.json"}),
        ("/api/trial", {"run": "0/batch_a", "folder": "009_none"}),
    ])  # fmt: skip
    assert answers[0][0] == 200 and answers[0][1]["trajectory"] is None  # none written
    assert answers[1][0] == 400
    assert answers[1][1]["error"] == (
        "trajectory.json is not an ATIF trajectory (schema_version None)"
    )
    assert answers[2][0] == 400 and "is not valid JSON" in answers[2][1]["error"]
    assert answers[3][0] == 404 and "009_none" in answers[3][1]["error"]  # a folder gone


@pytest.mark.parametrize("path", [
    "0/../secret.txt", "0/batch_a/../../secret.txt", "../secret.txt", "0//etc/passwd",
    "/etc/passwd", "0/batch_a/link-out", "0/batch_a/dir-out/secret.txt", "1/secret.txt",
    "0/batch_a\\..\\..\\secret.txt", "0/batch_a/\x00",
])  # fmt: skip
def test_no_file_outside_the_folders_is_served(runs: Path, path: str) -> None:
    secret = runs.parent / "secret.txt"
    secret.write_text("SECRET")
    (runs / "batch_a" / "link-out").symlink_to(secret)
    (runs / "batch_a" / "dir-out").symlink_to(runs.parent)
    status, body = one([runs], "/api/file", path=path)
    assert status in (403, 404) and "error" in body, body
    assert b"SECRET" not in json.dumps(body).encode()


def test_encoded_dot_dot_in_the_raw_url_is_refused(runs: Path) -> None:
    (runs.parent / "secret.txt").write_text("SECRET")

    async def go() -> list[tuple[int, bytes]]:
        async with TestClient(TestServer(make_app([runs]))) as client:
            answers = []
            for raw in (
                "/api/file?path=0/%2e%2e/secret.txt",
                "/api/file?path=0%2F..%2Fsecret.txt",
                "/api/trial?run=0/batch_a&folder=%2e%2e/%2e%2e",
                "/api/run?run=0/%2E%2E",
                "/%2e%2e/secret.txt",
                "/api/../../secret.txt",
            ):
                response = await client.get(raw)
                answers.append((response.status, await response.read()))
            return answers

    for status, body in asyncio.run(go()):
        assert status in (403, 404) and b"SECRET" not in body, (status, body)


def test_an_image_path_leading_out_of_the_run_or_missing_is_not_linked(runs: Path) -> None:
    document = json.loads((runs / "batch_a/001_alpha/agent/trajectory.json").read_text())
    document["steps"][0]["message"][1]["source"]["path"] = "../../../../secret.png"
    document["steps"][1]["observation"]["results"][0]["content"][0]["source"]["path"] = "gone.png"
    (runs / "batch_a/001_alpha/agent/trajectory.json").write_text(json.dumps(document))
    status, body = one([runs], "/api/steps", path="0/batch_a/001_alpha/agent/trajectory.json")
    assert status == 200 and body["steps"][0]["message"][1] == {"type": "image", "src": None}
    assert body["steps"][1]["observations"][0]["content"] == [{"type": "image", "src": None}]


def test_raw_files_cannot_run_in_the_viewers_origin(runs: Path) -> None:
    (runs / "batch_a" / "page.html").write_text("<script>alert(1)</script>")
    (runs / "batch_a" / "image.svg").write_text("<svg onload='alert(1)'/>")
    answers = query(
        [runs],
        [
            ("/api/file", {"path": "0/batch_a/page.html"}),
            ("/api/file", {"path": "0/batch_a/image.svg"}),
            ("/api/file", {"path": "0/batch_a/001_alpha/agent/images/a.png"}),
        ],
    )
    for status, _, headers in answers[:2]:
        assert status == 200 and headers["Content-Disposition"].startswith("attachment")
        assert headers["Content-Type"] == "application/octet-stream"
        assert headers["Content-Security-Policy"].startswith("sandbox")
    assert answers[2][2]["Content-Type"] == "image/png"


def test_every_page_has_a_strict_content_security_policy(runs: Path) -> None:
    answers = query([runs], [("/", {}), ("/app.js", {}), ("/api/runs", {})])
    for status, _, headers in answers:
        assert status == 200
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert b'<script src="app.js"' in answers[0][1]


def test_a_token_is_needed_when_one_is_set(runs: Path) -> None:
    without = query([runs], [("/", {}), ("/api/runs", {})], token="s3cret")
    assert [status for status, _, _ in without] == [403, 403]
    with_token = query([runs], [("/", {"token": "s3cret"}), ("/api/runs", {})], token="s3cret")
    assert [status for status, _, _ in with_token] == [200, 200]  # the cookie carries it
    assert "HttpOnly" in with_token[0][2]["Set-Cookie"]
    assert with_token[0][2]["Set-Cookie"].startswith(token_cookie("s3cret") + "=s3cret;")
    wrong = query([runs], [("/api/runs", {})], token="s3cret",
                  cookies={token_cookie("s3cret"): "guess"})  # fmt: skip
    assert wrong[0][0] == 403
    assert token_cookie("s3cret") != token_cookie("other")  # two viewers, two cookies


def test_beyond_loopback_the_printed_url_carries_a_token(runs: Path) -> None:
    import urllib.error
    import urllib.request

    with view_server(str(runs), "--host", "127.0.0.2") as url:
        assert url.startswith("http://127.0.0.2:") and "?token=" in url
        bare = url.split("?", 1)[0]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bare + "api/runs", timeout=10)
        assert refused.value.code == 403
        token = url.split("token=", 1)[1]
        with urllib.request.urlopen(f"{bare}api/runs?token={token}", timeout=10) as response:
            assert json.load(response)["runs"][0]["name"] == "batch_a"


def test_on_loopback_a_foreign_host_header_is_refused(runs: Path) -> None:
    import urllib.error
    import urllib.request

    with view_server(str(runs)) as url:
        assert url.startswith("http://127.0.0.1:") and "token" not in url
        with urllib.request.urlopen(url + "api/runs", timeout=10) as response:
            assert response.status == 200
        request = urllib.request.Request(url + "api/runs", headers={"Host": "attacker.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403


def test_view_help_and_a_missing_folder() -> None:
    help_text = subprocess.run([sys.executable, "-m", "helios", "view", "--help"],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    for option in ("--host", "--port", "--open", "token"):
        assert option in help_text
    missing = subprocess.run([sys.executable, "-m", "helios", "view", "/nonexistent/runs"],
                             capture_output=True, text=True)  # fmt: skip
    assert missing.returncode == 2 and "not a folder: /nonexistent/runs" in missing.stderr


def test_a_summary_comes_without_its_per_trial_rows_and_a_damaged_one_says_so(
    runs: Path, tmp_path: Path
) -> None:
    broken = write_run(tmp_path / "other" / "batch_broken", [record(0)])
    (broken / "batch_summary.json").write_text('{"total_tasks": 1, "pass')
    answers = query(
        [runs, tmp_path / "other"],
        [("/api/run", {"run": "0/batch_a"}), ("/api/run", {"run": "1/batch_broken"})],
    )
    summary = answers[0][1]["summary"]
    assert summary["pass_at_k"] == {"pass@1": 0.5} and "tasks" not in summary
    assert answers[1][0] == 200 and answers[1][1]["summary"] is None
    assert answers[1][1]["summary_error"].startswith("batch_summary.json: not valid JSON")


def test_a_generate_run_shows_each_prompts_row_and_its_failures(tmp_path: Path) -> None:
    write_generate_run(tmp_path / "data" / "hermes_run")
    answers = query([tmp_path / "data"], [
        ("/api/trials", {"run": "0/hermes_run"}),
        ("/api/record", {"run": "0/hermes_run", "index": "0"}),
        ("/api/record", {"run": "0/hermes_run", "index": "2"}),
        ("/api/record", {"run": "0/hermes_run", "index": "7"}),
    ])  # fmt: skip
    table = answers[0][1]
    assert table["run"]["door"] == "generate"
    assert [(r["task"], r["status"]) for r in table["rows"]] == [
        ("prompt 0", "ok"),
        ("prompt 1", "discarded"),
        ("prompt 2", "error"),
    ]
    assert table["rows"][2]["error"] == "RateLimitError: 429 " and table["rows"][0]["cost"] == 0.002
    ok = answers[1][1]
    assert [turn["from"] for turn in ok["row"]["conversations"]] == [
        "system",
        "human",
        "gpt",
        "tool",
        "gpt",
    ]
    assert ok["row_error"] is None and ok["record"]["tool_stats"]["terminal"]["count"] == 1
    assert answers[2][1]["error"] == "RateLimitError: 429 " and "row" not in answers[2][1]
    assert answers[3][0] == 404 and "no record 8" in answers[3][1]["error"]


def test_a_toolcalls_report_shows_expected_and_actual_calls(tmp_path: Path) -> None:
    write_toolcalls_run(tmp_path / "output" / "toolcalls_1")
    answers = query([tmp_path / "output"], [
        ("/api/trials", {"run": "0/toolcalls_1"}),
        ("/api/record", {"run": "0/toolcalls_1", "index": "1"}),
    ])  # fmt: skip
    table = answers[0][1]
    assert table["run"]["door"] == "toolcalls" and table["run"]["status"] == "done"
    assert [(r["task"], r["attempt"], r["reward"]) for r in table["rows"]] == [
        ("weather", 1, 1.0),
        ("weather", 2, 0.0),
    ]
    match = answers[1][1]["record"]["eval_result"]["matches"][0]
    assert match["matched"] is False and match["actual"]["arguments"] == {"city": "Lyon "}


def test_open_hands_the_printed_url_to_the_browser(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}.tmp && mv {opened}.tmp {opened}\n')
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(browser))  # webbrowser runs $BROWSER with the URL
    with view_server(str(runs), "--open") as url:
        wait_until(opened.exists, "helios view --open never started the browser")
        assert opened.read_text() == url


@pytest.mark.parametrize(("function", "arguments", "mark"), [
    ("computer", {"action": "left_click", "coordinate": [5, 6]},
     {"kind": "click", "action": "left_click", "points": [[5.0, 6.0]]}),
    ("computer", {"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [3, 4]},
     {"kind": "drag", "action": "left_click_drag", "points": [[1.0, 2.0], [3.0, 4.0]]}),
    ("computer_call", {"action": {"type": "click", "x": 7, "y": 8}},
     {"kind": "click", "action": "click", "points": [[7.0, 8.0]]}),
    ("click_at", {"x": 500, "y": 250},
     {"kind": "click", "action": "click_at", "points": [[500.0, 250.0]], "grid": 1000}),
    ("drag_and_drop", {"x": 1, "y": 2, "destination_x": 900, "destination_y": 800},
     {"kind": "drag", "action": "drag_and_drop", "points": [[1.0, 2.0], [900.0, 800.0]],
      "grid": 1000}),
    ("computer", {"action": "type", "text": "hi"}, None),
    ("computer", {"action": "click", "x": True, "y": "1"}, None),
])  # fmt: skip
def test_each_providers_action_gives_its_mark(
    function: str, arguments: dict[str, Any], mark: dict[str, Any] | None
) -> None:
    from helios.view.steps import action_mark

    assert action_mark(arguments, function) == mark


def test_without_folders_it_serves_output_and_data_on_the_port_given(tmp_path: Path) -> None:
    import socket
    import urllib.request

    write_run(tmp_path / "output" / "batch_1", [record(0)])
    write_generate_run(tmp_path / "data" / "gen_1")
    (tmp_path / "output" / "batch_bad").mkdir()
    (tmp_path / "output" / "batch_bad" / "run.json").write_text("{oops")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with view_server("--port", str(port), cwd=tmp_path) as url:
        assert url == f"http://127.0.0.1:{port}/"
        with urllib.request.urlopen(url + "api/runs", timeout=10) as response:
            found = {run["name"]: run for run in json.load(response)["runs"]}
    assert set(found) == {"batch_1", "gen_1", "batch_bad"}
    assert found["batch_bad"]["error"].startswith("run.json: not valid JSON")


# -- helios compare as a view ----------------------------------------------------------


def _compared_runs(root: Path) -> tuple[Path, Path]:
    """A: ten tasks, all passed. B: the first three failed, t10 only in B."""
    a = write_run(root / "batch_a", [record(i, task_name=f"t{i}") for i in range(10)])
    b_items = [record(i, task_name=f"t{i}", status="failed" if i < 3 else "passed",
                      reward=0.0 if i < 3 else 1.0) for i in range(11)]  # fmt: skip
    b = write_run(root / "batch_b", b_items, model="mock/m-2")
    return a, b


def test_compare_gives_what_helios_compare_gives(tmp_path: Path) -> None:
    a, b = _compared_runs(tmp_path / "output")
    status, body, _ = query([tmp_path / "output"],
                            [("/api/compare", [("run", "0/batch_a"), ("run", "0/batch_b")])])[0]  # type: ignore[list-item]  # fmt: skip
    assert status == 200, body
    command = [sys.executable, "-m", "helios", "compare", str(a), str(b), "--format", "json"]
    cli = subprocess.run(command, capture_output=True, text=True, check=True)
    expected = json.loads(cli.stdout)
    (page,) = body["comparisons"]
    (direct,) = expected["comparisons"]
    assert page["regressions"] == direct["regressions"] == ["t0", "t1", "t2"]
    assert page["only_in_b"] == ["t10"]
    for key in ("pass_rate_delta", "shared_tasks", "significantly_worse"):
        assert page[key] == direct[key]
    assert page["ci"]["low"] == direct["ci"]["low"] and page["ci"]["high"] == direct["ci"]["high"]
    assert body["keys"] == ["0/batch_a", "0/batch_b"]
    assert [run["model"] for run in body["runs"]] == ["mock/m-1", "mock/m-2"]


def test_compare_refuses_one_run_a_path_outside_and_a_folder_that_is_no_run(
    tmp_path: Path,
) -> None:
    _compared_runs(tmp_path / "output")
    (tmp_path / "output" / "empty").mkdir()
    outside = write_run(tmp_path / "elsewhere" / "batch_x", [record(0)])
    answers = query([tmp_path / "output"], [
        ("/api/compare", [("run", "0/batch_a")]),
        ("/api/compare", [("run", "0/batch_a"), ("run", f"0/../../elsewhere/{outside.name}")]),
        ("/api/compare", [("run", "0/batch_a"), ("run", "0/empty")]),
    ])  # type: ignore[list-item]  # fmt: skip
    (one_status, one_body, _), (out_status, out_body, _), (no_status, no_body, _) = answers
    assert one_status == 400 and "two runs or more" in one_body["error"]
    assert out_status == 403 and "'..'" in out_body["error"]
    assert no_status == 400 and "not a Helios run folder" in no_body["error"]


# -- a watched batch's live desktops ---------------------------------------------------


def test_a_watched_running_run_lists_its_loopback_desktops_only(tmp_path: Path) -> None:
    """`desktops.json` is the run folder's, so untrusted: only loopback desktop URLs
    are passed on, and only while the run is running."""
    run = write_run(tmp_path / "live", [record(0)], summary=False)
    good = "http://127.0.0.1:40123/tok_en-1/desktops/abc123/"
    (run / "desktops.json").write_text(json.dumps({"desktops": [
        {"trial_id": "abc123", "label": "<b>click-ok</b>", "url": good},
        {"trial_id": "x", "label": "evil", "url": "javascript:window.__pwned=1"},
        {"trial_id": "y", "label": "far", "url": "http://evil.example/desktops/y/"},
        {"trial_id": "z", "label": 5, "url": good},
        "not a desktop",
    ]}))  # fmt: skip

    async def go() -> list[dict[str, Any]]:
        async with TestClient(TestServer(make_app([tmp_path]))) as client:
            seen = []
            with (run / ".lock").open("a+") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append(await (await client.get("/api/trials?run=0/live")).json())
                seen.append(await (await client.get("/api/run?run=0/live")).json())
            seen.append(await (await client.get("/api/trials?run=0/live")).json())
            return seen

    page, document, after = asyncio.run(go())
    assert page["desktops"] == document["desktops"] == [{"label": "<b>click-ok</b>", "url": good}]
    assert after["run"]["status"] != "running" and after["desktops"] == []
    (run / "desktops.json").write_text("{damaged")
    assert one([tmp_path], "/api/run", run="0/live")[1]["desktops"] == []
