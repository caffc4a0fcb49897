"""Hermes's terminal and file tools, run inside a real local (bubblewrap) sandbox."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from helios.agents.tools import ToolRunner
from helios.agents.toolsets import resolve_tools
from helios.environments.local import LocalEnvironment
from helios.environments.spec import SandboxSpec

pytestmark = pytest.mark.usefixtures("need_bwrap")


class Sandbox:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.env = LocalEnvironment(SandboxSpec(workdir="/app"), trial_id="t", run_id="tools")
        self.loop.run_until_complete(self.env.start())
        tools = resolve_tools(["terminal", "file"])
        self.runner = ToolRunner(self.env, workdir="/app", tools=tools, max_output_chars=4000)

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        outcome = self.loop.run_until_complete(self.runner.run(name, arguments))
        result: dict[str, Any] = json.loads(outcome.output)
        failed = result.get("error") is not None or result.get("success") is False
        assert outcome.is_error == failed
        return result

    def close(self) -> None:
        self.loop.run_until_complete(self.env.stop())
        self.loop.close()


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    sandbox = Sandbox()
    yield sandbox
    sandbox.close()


def test_terminal_output_exit_code_and_timeout(box: Sandbox) -> None:
    assert box.call("terminal", command="echo ok") == {"output": "ok", "exit_code": 0,
                                                       "error": None}  # fmt: skip
    failed = box.call("terminal", command="echo out; echo err >&2; exit 3")
    assert failed == {"output": "out\nerr", "exit_code": 3, "error": None}  # not a failure
    slow = box.call("terminal", command="sleep 5", timeout=1)
    assert slow["exit_code"] == 124 and "timed out after 1s" in slow["error"]
    assert box.call("terminal", command="pwd", workdir="/tmp")["output"] == "/tmp"
    assert "600" in box.call("terminal", command="true", timeout=601)["error"]
    assert "missing required argument 'command'" in box.call("terminal")["error"]
    assert "background" in box.call("terminal", command="sleep 1", background=True)["error"]
    # pty and other Hermes-only arguments are accepted and ignored
    assert box.call("terminal", command="echo hi", pty=True)["output"] == "hi"


def test_write_then_read_with_pagination(box: Sandbox) -> None:
    text = "".join(f"line {n}\n" for n in range(1, 31))
    written = box.call("write_file", path="notes/a.txt", content=text)
    assert written == {"path": "/app/notes/a.txt", "bytes_written": len(text), "created": True}
    assert box.call("write_file", path="/app/notes/a.txt", content=text)["created"] is False
    read = box.call("read_file", path="notes/a.txt", offset=5, limit=3)
    assert read["content"] == "     5|line 5\n     6|line 6\n     7|line 7"
    assert read["total_lines"] == 30 and read["truncated"] is True and "offset=8" in read["hint"]
    assert box.call("read_file", path="~/../app/notes/a.txt")["total_lines"] == 30
    missing = box.call("read_file", path="notes/b.txt")
    assert missing["error"] == "File not found: /app/notes/b.txt"
    assert missing["similar_files"] == ["/app/notes/a.txt"]
    assert "directory" in box.call("read_file", path="/app/notes")["error"]
    assert "less than or equal to 2000" in box.call("read_file", path="x", limit=5000)["error"]


def test_read_file_keeps_the_json_whole_when_the_file_is_long(box: Sandbox) -> None:
    box.call("write_file", path="big.txt", content="x" * 300 + "\n" * 1 + ("y" * 300 + "\n") * 40)
    read = box.call("read_file", path="big.txt")
    assert read["truncated"] is True and len(json.dumps(read)) <= 4000


def test_patch_replaces_unique_text_and_reports_a_diff(box: Sandbox) -> None:
    box.call("write_file", path="p.py", content="a = 1\nb = 1\nc = 2\n")
    done = box.call("patch", path="p.py", old_string="c = 2", new_string="c = 3")
    assert done["success"] is True and done["replacements"] == 1
    assert "-c = 2\n+c = 3" in done["diff"]
    ambiguous = box.call("patch", path="p.py", old_string="= 1", new_string="= 9")
    assert ambiguous["success"] is False and "2 times" in ambiguous["error"]
    assert box.call("patch", mode="replace", path="p.py", old_string="= 1", new_string="= 9",
                    replace_all=True)["replacements"] == 2  # fmt: skip
    assert box.call("read_file", path="p.py")["content"].endswith("3|c = 3")
    assert "Could not find" in box.call("patch", path="p.py", old_string="zzz",
                                        new_string="y")["error"]  # fmt: skip
    assert "File not found" in box.call("patch", path="nope.py", old_string="a",
                                        new_string="b")["error"]  # fmt: skip


def test_search_files_content_files_and_counts(box: Sandbox) -> None:
    box.call("write_file", path="src/one.py", content="import os\nprint('needle')\n")
    box.call("write_file", path="src/two.txt", content="needle\nneedle\n")
    found = box.call("search_files", pattern="needle", path="src")
    assert found["total_count"] == 3
    assert "src/one.py:2:print('needle')" in found["output"]
    only_py = box.call("search_files", pattern="needle", path="src", file_glob="*.py")
    assert only_py["total_count"] == 1
    counts = box.call("search_files", pattern="needle", path="src", output_mode="count")
    assert sorted(counts["output"].splitlines()) == ["/app/src/one.py:1", "/app/src/two.txt:2"]
    files = box.call("search_files", pattern="*.py", target="files", path="/app")
    assert "/app/src/one.py" in files["output"] and "two.txt" not in files["output"]
    paged = box.call("search_files", pattern="needle", path="src", limit=1, offset=1)
    assert paged["output"].count("\n") == 0 and paged["truncated"] is True
    assert "error" in box.call("search_files", pattern="(", path="src")


def test_tool_schemas_use_hermes_names_and_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIOS_SEARXNG_URL", "http://127.0.0.1:9")
    specs = {t.spec.name: t.spec.parameters for t in resolve_tools(["terminal", "file", "web"])}
    assert list(specs) == ["terminal", "read_file", "write_file", "patch", "search_files",
                           "web_search", "web_extract"]  # fmt: skip
    assert specs["read_file"]["properties"]["offset"] == {
        "default": 1, "description": "Line number to start reading from (1-indexed, default: 1)",
        "minimum": 1, "type": "integer"}  # fmt: skip
    assert specs["patch"]["properties"]["mode"]["enum"] == ["replace"]
    assert specs["terminal"]["properties"]["workdir"]["type"] == "string"  # no anyOf/null
    assert specs["web_extract"]["properties"]["urls"]["maxItems"] == 5
    for schema in specs.values():
        assert "title" not in json.dumps(schema)
