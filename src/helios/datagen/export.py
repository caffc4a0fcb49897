"""`helios export RUN --format sharegpt|openai|parquet`: a run's trajectories for training.

- `sharegpt`: the Hermes rows of `trajectories.jsonl`, checked line by line;
- `openai`: the chat fine-tuning format, `{"messages": [...], "tools": [...]}`, with
  tool calls as structured `tool_calls` (arguments as a JSON string) and tool results
  as `tool` messages. Reasoning stays at the start of the assistant content as
  `<think>…</think>`. Every message has the same keys (null when unused), so the
  rows load as one schema;
- `parquet`: the Hermes rows as a Parquet table (needs pyarrow: the `parquet` extra).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helios.datagen.folder import TRAJECTORIES
from helios.errors import ConfigError, InputError

FORMATS = ("sharegpt", "openai", "parquet")
#: each format's file under RUN/export/, named for the rows it holds and its file type
#: (parquet holds the sharegpt rows, as sharegpt.jsonl does)
FILE_NAMES = {"sharegpt": "sharegpt.jsonl", "openai": "openai.jsonl", "parquet": "sharegpt.parquet"}
_TOOLS = re.compile(r"<tools>\n(.*?)\n</tools>", re.DOTALL)
_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)
_EMPTY_THINK = re.compile(r"^<think>\n</think>\n?")


def read_rows(run_dir: Path) -> Iterator[dict[str, Any]]:
    path = run_dir / TRAJECTORIES
    if not path.is_file():
        raise InputError(f"no {TRAJECTORIES} here: not a finished generate run", file=str(run_dir))
    with path.open("rb") as handle:
        for raw in handle:
            try:
                row = json.loads(raw)
            except ValueError:
                continue  # the merge wrote only whole rows; a hand-edited line is skipped
            if isinstance(row, dict) and isinstance(row.get("conversations"), list):
                yield row


def _message(role: str, content: str, calls: list[dict[str, Any]] | None = None,
             call_id: str | None = None) -> dict[str, Any]:  # fmt: skip
    return {"role": role, "content": content, "tool_calls": calls, "tool_call_id": call_id}


def _tools(system: str) -> list[dict[str, Any]]:
    match = _TOOLS.search(system)
    if match is None:
        return []
    try:
        listed = json.loads(match.group(1))
    except ValueError:
        return []
    return [{"type": "function", "function": tool} for tool in listed if isinstance(tool, dict)]


def _responses(value: str) -> list[dict[str, Any]]:
    found = []
    for block in _RESPONSE.findall(value):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        if isinstance(data, dict):
            found.append(data)
    return found


def _assistant(value: str, ids: list[str], turn: int) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(_CALL.findall(value)):
        try:
            call = json.loads(block)
        except ValueError:
            continue
        call_id = ids[i] if i < len(ids) else f"call_{turn}_{i}"
        arguments = json.dumps(call.get("arguments") or {}, ensure_ascii=False)
        function = {"name": str(call.get("name", "")), "arguments": arguments}
        calls.append({"id": call_id, "type": "function", "function": function})
    content = _EMPTY_THINK.sub("", _CALL.sub("", value)).strip()
    return _message("assistant", content, calls or None)


def to_openai(row: dict[str, Any]) -> dict[str, Any]:
    turns = row["conversations"]
    tools: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for n, turn in enumerate(turns):
        role, value = turn.get("from"), str(turn.get("value", ""))
        if role == "system":
            tools = _tools(value)
        elif role == "human":
            messages.append(_message("user", value))
        elif role == "gpt":
            following = turns[n + 1] if n + 1 < len(turns) else {}
            ids = [str(r.get("tool_call_id", "")) for r in _responses(str(following.get("value",
                   ""))) if following.get("from") == "tool"]  # fmt: skip
            messages.append(_assistant(value, ids, n))
        elif role == "tool":
            for response in _responses(value):
                content = response.get("content")
                text = (
                    content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
                )
                messages.append(_message("tool", text, call_id=str(response.get("tool_call_id"))))
    return {"messages": messages, "tools": tools}


def _write_jsonl(rows: Iterator[dict[str, Any]], target: Path) -> int:
    count = 0
    with target.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def export_run(run_dir: Path, fmt: str, output: Path | None = None) -> tuple[Path, int]:
    """Write the export; returns its path and the number of rows."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r} (use {'|'.join(FORMATS)})", field="--format")
    target = output or run_dir / "export" / FILE_NAMES[fmt]
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = read_rows(run_dir)
    if fmt == "sharegpt":
        return target, _write_jsonl(rows, target)
    if fmt == "openai":
        return target, _write_jsonl((to_openai(row) for row in rows), target)
    try:
        # Optional and untyped here: imported by name so mypy needs no stubs either way.
        pa: Any = importlib.import_module("pyarrow")
        pq: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ConfigError("parquet export needs pyarrow: pip install 'helios-harness[parquet]'",
                          field="--format") from None  # fmt: skip
    table = pa.Table.from_pylist(list(rows))
    pq.write_table(table, target)
    return target, table.num_rows
