"""Resuming a run that Hermes's own batch runner started: its rows are adopted.

A run folder with batch files but no Helios store was written by Hermes (or its
store was removed). On `--resume`, each readable row gets a completion record
pointing at it, matched to a dataset prompt by its human turn (Hermes's own
content matching), so finished prompts are not run again and the merge keeps
every row, as Hermes's merge would.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helios.datagen.folder import batch_files
from helios.datagen.units import PromptUnit


def _reasoning_turns(conversations: list[Any]) -> tuple[int, int]:
    gpt = [t for t in conversations if isinstance(t, dict) and t.get("from") == "gpt"]
    with_reasoning = sum(
        1 for t in gpt
        if str(t.get("value", "")).startswith("<think>\n")
        and not str(t.get("value", "")).startswith("<think>\n</think>")
    )  # fmt: skip
    return len(gpt), with_reasoning


def _human(row: dict[str, Any]) -> str | None:
    for turn in row.get("conversations") or []:
        if isinstance(turn, dict) and turn.get("from") == "human":
            return str(turn.get("value", "")).strip()
    return None


def adopt_rows(run_dir: Path, units: Sequence[PromptUnit]) -> list[dict[str, Any]]:
    """Completion records for the rows already in the batch files."""
    waiting: dict[str, list[PromptUnit]] = defaultdict(list)
    for unit in units:
        waiting[unit.row.prompt.strip()].append(unit)
    records: list[dict[str, Any]] = []
    for number, path in sorted(batch_files(run_dir).items()):
        offset = 0
        with path.open("rb") as handle:
            for raw in handle:
                start, offset = offset, offset + len(raw)
                record = _record(raw, path.name, number, start, waiting)
                if record is not None:
                    records.append(record)
    return records


def _record(
    raw: bytes, name: str, number: int, start: int, waiting: dict[str, list[PromptUnit]]
) -> dict[str, Any] | None:
    if not raw.endswith(b"\n"):
        return None
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(row, dict) or row.get("failed"):
        return None
    human = _human(row)
    if human is None:
        return None
    matches = waiting.get(human)
    unit = matches.pop(0) if matches else None
    digest = hashlib.sha256(raw).hexdigest()[:16]
    turns, with_reasoning = _reasoning_turns(row.get("conversations") or [])
    stats = {name: entry for name, entry in (row.get("tool_stats") or {}).items()
             if isinstance(entry, dict) and entry.get("count")}  # fmt: skip
    return {
        "trial_id": unit.trial_id if unit else f"adopted-{digest}",
        "status": "ok",
        "prompt_key": unit.key if unit else f"adopted-{digest}",
        "prompt_index": row.get("prompt_index"),
        "batch_num": number,
        "toolsets": row.get("toolsets_used") or [],
        "api_calls": row.get("api_calls", 0),
        "completed": bool(row.get("completed")),
        "partial": bool(row.get("partial")),
        "tool_stats": stats,
        "turns": turns,
        "turns_with_reasoning": with_reasoning,
        "file": name,
        "offset": start,
        "length": len(raw),
        "adopted": True,
    }
