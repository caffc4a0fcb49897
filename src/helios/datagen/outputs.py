"""What the completion records become at the end of an invocation: the merged
`trajectories.jsonl`, the tombstones and failures files, `checkpoint.json` and
`statistics.json`. All are derived from the records, so they always agree: every
prompt is in exactly one of trajectories, tombstones and failures. While prompts
finish, `RunningCheckpoint` keeps `checkpoint.json` current.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from helios.datagen.folder import CHECKPOINT, FAILURES, TOMBSTONES, TRAJECTORIES
from helios.datagen.units import PromptUnit
from helios.engine.store import write_json_atomic
from helios.safe_json import dumps

TERMINAL = ("ok", "discarded")
#: seconds between two checkpoints while prompts finish (a finished batch file: at once)
CHECKPOINT_INTERVAL = 2.0


def final_records(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per prompt: its row or tombstone if it has one, else its last failure."""
    chosen: dict[str, dict[str, Any]] = {}
    for record in records:
        key = str(record.get("prompt_key") or record.get("trial_id"))
        held = chosen.get(key)
        if held is None or held.get("status") not in TERMINAL:
            # a later record replaces a failure; nothing replaces a row or a tombstone
            chosen[key] = record
    return chosen


@dataclass
class MergeResult:
    rows: int = 0
    invalid_json: int = 0
    invalid_tools: int = 0
    missing: int = 0
    #: prompt key → why its row was left out of trajectories.jsonl
    dropped: dict[str, str] = field(default_factory=dict)


def _row_problem(raw: bytes, valid_tools: set[str]) -> str | None:
    try:
        row = json.loads(raw)
    except ValueError:
        return "invalid_json"
    if not isinstance(row, dict):
        return "invalid_json"
    stats = row.get("tool_stats")
    if isinstance(stats, dict) and any(name not in valid_tools for name in stats):
        return "invalid_tool_names"
    return None


def merge_rows(
    run_dir: Path, finals: Iterable[dict[str, Any]], valid_tools: set[str]
) -> MergeResult:
    """Write trajectories.jsonl from the rows the records point at (batch order)."""
    result = MergeResult()
    wanted = sorted(
        (r for r in finals if r.get("status") == "ok" and "file" in r),
        key=lambda r: (int(r.get("batch_num", 0)), int(r["offset"])),
    )
    target = run_dir / TRAJECTORIES
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    handles: dict[str, Any] = {}
    try:
        with temp.open("wb") as out:
            for record in wanted:
                raw = _read_row(run_dir, record, handles)
                problem = "row_missing" if raw is None else _row_problem(raw, valid_tools)
                if problem is not None:
                    result.dropped[str(record["prompt_key"])] = problem
                    attribute = {"row_missing": "missing", "invalid_json": "invalid_json"}
                    name = attribute.get(problem, "invalid_tools")
                    setattr(result, name, getattr(result, name) + 1)
                    continue
                assert raw is not None
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
                result.rows += 1
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    finally:
        for handle in handles.values():
            handle.close()
        temp.unlink(missing_ok=True)
    return result


def _read_row(run_dir: Path, record: dict[str, Any], handles: dict[str, Any]) -> bytes | None:
    name = str(record["file"])
    if name not in handles:
        try:
            handles[name] = (run_dir / Path(name).name).open("rb")
        except OSError:
            return None
    handle = handles[name]
    handle.seek(int(record["offset"]))
    raw: bytes = handle.read(int(record["length"]))
    return raw if len(raw) == int(record["length"]) else None


def write_jsonl_atomic(path: Path, items: Iterable[dict[str, Any]]) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temp.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(dumps(item, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _stamp(record: dict[str, Any]) -> str:
    return datetime.fromtimestamp(float(record.get("finished_at", 0))).isoformat()


def write_tombstones_and_failures(
    run_dir: Path,
    finals: dict[str, dict[str, Any]],
    dropped: dict[str, str],
    units: Sequence[PromptUnit],
) -> tuple[int, int]:
    prompts = {u.key: u.row.prompt for u in units}
    tombstones, failures = [], []
    for key, record in finals.items():
        base = {"prompt_index": record.get("prompt_index"), "trial_id": record.get("trial_id"),
                "batch_num": record.get("batch_num"), "timestamp": _stamp(record),
                "prompt": prompts.get(key)}  # fmt: skip
        if record.get("status") == "discarded" or key in dropped:
            tombstones.append({**base, "reason": record.get("reason") or dropped.get(key)})
        elif record.get("status") == "error" and key in prompts:
            failures.append({**base, "error": record.get("error")})

    def order(item: dict[str, Any]) -> tuple[int, int]:
        index = item.get("prompt_index")
        return (0, int(index)) if isinstance(index, int) else (1, 0)

    write_jsonl_atomic(run_dir / TOMBSTONES, sorted(tombstones, key=order))
    write_jsonl_atomic(run_dir / FAILURES, sorted(failures, key=order))
    return len(tombstones), len(failures)


def checkpoint_document(
    run_name: str, records: Iterable[dict[str, Any]], units: Sequence[PromptUnit]
) -> dict[str, Any]:
    """Hermes's checkpoint: completed prompt indices and per-batch counts."""
    done_keys: set[str] = set()
    batches: dict[int, dict[str, int]] = {}
    for record in records:
        status = record.get("status")
        if status in TERMINAL:
            done_keys.add(str(record.get("prompt_key")))
        entry = batches.setdefault(
            int(record.get("batch_num", 0)),
            {"processed": 0, "skipped": 0, "discarded_no_reasoning": 0},
        )
        entry["processed"] += 1  # fmt: skip
        if status == "discarded":
            entry["discarded_no_reasoning"] += 1
    return {
        "run_name": run_name,
        "completed_prompts": sorted(u.row.index for u in units if u.key in done_keys),
        "batch_stats": {str(n): batches[n] for n in sorted(batches)},
        "last_updated": datetime.now().isoformat(),
    }


def write_checkpoint(run_dir: Path, document: dict[str, Any]) -> None:
    write_json_atomic(run_dir / CHECKPOINT, document)


class RunningCheckpoint:
    """`checkpoint.json` kept current as prompts finish: when a batch file is complete
    and at least every `CHECKPOINT_INTERVAL` seconds, one write at a time (in a thread)."""

    def __init__(self, run_dir: Path, run_name: str, records: dict[str, dict[str, Any]],
                 units: Sequence[PromptUnit], pending: Iterable[PromptUnit]) -> None:  # fmt: skip
        self.run_dir, self.run_name, self.units = run_dir, run_name, units
        self.records = dict(records)
        #: prompts still to finish in each batch file
        self.remaining: dict[int, int] = {}
        for unit in pending:
            self.remaining[unit.batch_num] = self.remaining.get(unit.batch_num, 0) + 1
        self._written_at, self._writing = 0.0, False

    def record(self, unit: PromptUnit, record: dict[str, Any]) -> bool:
        """Keep a finished prompt's record; True when its batch file is now complete."""
        self.records[unit.trial_id] = record
        self.remaining[unit.batch_num] -= 1
        return self.remaining[unit.batch_num] == 0

    async def update(self, batch_done: bool) -> None:
        due = time.monotonic() - self._written_at >= CHECKPOINT_INTERVAL
        if (batch_done or due) and not self._writing:
            self._writing = True
            try:
                document = checkpoint_document(self.run_name, self.records.values(), self.units)
                await asyncio.to_thread(write_checkpoint, self.run_dir, document)
                self._written_at = time.monotonic()
            finally:
                self._writing = False
