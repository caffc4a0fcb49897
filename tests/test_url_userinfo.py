"""A key in a URL's userinfo (`http://user:sk-…@host/v1`) is a key: URLs are shown
and stored without their userinfo, and the userinfo is redacted like any key."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helios.testing.mock_llm import MockLLMServer
from tests.conftest import TaskMaker, helios_cmd
from tests.datagen.conftest import SCRIPT, hermes_args, read_jsonl, run_generate, write_dataset

KEY = "sk-userinfo-Zq81xKv93"


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://helios:{KEY}@", 1)


def _assert_nowhere(text: str, folder: Path) -> None:
    assert KEY not in text, text[-3000:]
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_public_url_and_register_url() -> None:
    from helios.secrets import public_url, redact, register_url

    url = f"http://helios:{KEY}@127.0.0.1:8000/v1"
    assert public_url(url) == "http://127.0.0.1:8000/v1"
    assert public_url("https://a@b:c@host/x?y=z@w") == "https://host/x?y=z@w"  # the last "@"
    assert public_url("http://127.0.0.1:8000/v1?q=a@b") == "http://127.0.0.1:8000/v1?q=a@b"
    register_url(url.replace(KEY, "sk-%41bc-encoded"))  # percent-encoded: both forms count
    decoded = url.replace(KEY, "sk-Abc-encoded")
    assert redact(f"at {decoded}") == "at http://[REDACTED]@127.0.0.1:8000/v1"
    register_url(url)
    assert KEY not in redact(f"GET {url} failed: {KEY}")


@pytest.fixture
def mock_server() -> Iterator[MockLLMServer]:
    with MockLLMServer(script=SCRIPT) as server:
        yield server


@pytest.mark.usefixtures("need_bwrap")
def test_generate_never_shows_or_stores_the_userinfo(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    dataset = write_dataset(tmp_path / "p.jsonl", ["Task 1: go.", "Task 2: go."])
    args = hermes_args(mock_server, dataset, "u")
    args = [_with_userinfo(a) if a.startswith("--base_url=") else a for a in args]
    result = run_generate(tmp_path, *args, check=True)
    assert f"@ {mock_server.openai_base_url}" in result.stdout  # the header, without it
    _assert_nowhere(result.stdout + result.stderr, tmp_path / "data")
    # The userinfo is the endpoint's credentials: sent as Basic auth, as the SDKs do.
    basic = "Basic " + base64.b64encode(f"helios:{KEY}".encode()).decode()
    assert {r.headers.get("authorization") for r in mock_server.requests} == {basic}
    assert len(read_jsonl(tmp_path / "data/u/trajectories.jsonl")) == 2


@pytest.mark.usefixtures("need_bwrap")
def test_batch_redacts_the_userinfo_of_an_unreachable_endpoint(
    make_task: TaskMaker, tmp_path: Path, closed_port: int
) -> None:
    make_task("t0")
    out = tmp_path / "out"
    url = _with_userinfo(f"http://127.0.0.1:{closed_port}/v1")
    result = subprocess.run(
        helios_cmd("batch", str(tmp_path / "tasks"), "--provider", "local", "-m",
                   "openai-compatible/x", "--base-url", url, "-o", str(out)),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert f"cannot connect to http://127.0.0.1:{closed_port}" in result.stdout + result.stderr
    _assert_nowhere(result.stdout + result.stderr, out)
