"""The model ids a run's provider reported, kept in its run.json.

A provider may serve a name from a snapshot of its choosing (`gpt-4o` from
`gpt-4o-2024-08-06`), and move it. Each model call notes the id its response named
(`Usage.reported_models`, summed into every trial's and unit's usage); when a run
ends, its door adds them to run.json under `"rerun"` → `"models"`: each model asked
for (as the run names it) with the ids reported, in the order first seen, bounded
(`helios.usage.MAX_REPORTED`). A resume adds to what is there, never removes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from helios.engine.store import RUN_FILE, write_json_atomic
from helios.usage import merge_reported

#: the section of run.json that holds what a rerun needs (`helios.tasks.reproduce`)
RERUN_KEY = "rerun"
#: its key for the reported model ids
MODELS_KEY = "models"


def reported_models(value: object) -> dict[str, list[str]]:
    """A recorded `"models"` (model asked for -> the ids reported), bounded; anything
    else in a hand-edited run.json is left out."""
    if not isinstance(value, dict):
        return {}
    found = {str(k): [i for i in v if isinstance(i, str)] for k, v in value.items()
             if isinstance(v, list)}  # fmt: skip
    bounded: dict[str, list[str]] = {}
    merge_reported(bounded, found)
    return bounded


def record_models(store_dir: Path, reported: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Add the model ids the provider reported to the run.json in `store_dir` (merged
    with what it holds); returns the merged ids. Call it where the run's one writer
    is (the door's finish). A run.json that cannot be read or written costs only this
    record: the records keep the ids too."""
    path = store_dir / RUN_FILE
    try:
        metadata = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return dict(reported)
    if not isinstance(metadata, dict):
        return dict(reported)
    record = metadata.get(RERUN_KEY)
    if not isinstance(record, dict):
        record = metadata[RERUN_KEY] = {}
    merged = reported_models(record.get(MODELS_KEY))
    merge_reported(merged, dict(reported))
    if merged and merged != record.get(MODELS_KEY):
        record[MODELS_KEY] = merged
        with suppress(OSError):
            write_json_atomic(path, metadata)
    return merged
