"""The run store under damage: bad lines, torn tails, full disks, two writers."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from helios.engine.jsonl import RecordStream
from helios.engine.store import INCOMPLETE_DIR, KEEP_LEFTOVERS, RunInUse, RunStore
from helios.errors import ConfigError


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_bad_middle_line_is_quarantined_and_later_records_count(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", {})
    for tid in "abc":
        store.append({"trial_id": tid, "status": "passed"})
    store.close()
    path = tmp_path / "run" / "results.jsonl"
    good = path.read_text().splitlines()
    path.write_text("\n".join([good[0], '{"trial_id": "x", bro', "[1, 2]", *good[1:]]) + "\n")

    reopened = RunStore.open_existing(tmp_path / "run")
    assert set(reopened.load_records()) == {"a", "b", "c"}
    assert [(bad.line, bad.reason[:8]) for bad in reopened.quarantined] == [
        (2, "not JSON"),
        (3, "not a JS"),
    ]
    reopened.close()
    assert [r["trial_id"] for r in _lines(path)] == ["a", "b", "c"]
    quarantine = _lines(tmp_path / "run" / "results.quarantine.jsonl")
    assert [q["line"] for q in quarantine] == [2, 3] and "bro" in quarantine[0]["text"]


def test_a_torn_tail_is_cut_but_kept_as_evidence(tmp_path: Path) -> None:
    stream = RecordStream(tmp_path / "s.jsonl")
    stream.append({"trial_id": "a"})
    stream.close()
    with stream.path.open("ab") as handle:
        handle.write(b'{"trial_id": "b", "sta')
    loaded = stream.load()
    assert [r["trial_id"] for r in loaded.records] == ["a"]
    assert loaded.quarantined[0].reason.startswith("torn")
    assert "sta" in stream.quarantine_path.read_text()
    stream.append({"trial_id": "b"})
    stream.close()
    assert [r["trial_id"] for r in _lines(stream.path)] == ["a", "b"]


def test_a_failed_append_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = RecordStream(tmp_path / "s.jsonl")
    stream.append({"trial_id": "a"})
    handle = stream._handle
    assert handle is not None
    real_write = handle.write

    def half_then_full(data: bytes) -> int:
        real_write(data[: len(data) // 2])
        handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(handle, "write", half_then_full)
    with pytest.raises(OSError):
        stream.append({"trial_id": "b", "pad": "x" * 100})
    stream.append({"trial_id": "c"})  # the disk has room again
    stream.close()
    assert [r["trial_id"] for r in _lines(stream.path)] == ["a", "c"]


def test_one_writer_per_run_folder(tmp_path: Path) -> None:
    first = RunStore.create(tmp_path / "run", {"run_id": "r"})
    with pytest.raises(RunInUse, match="in use by another Helios process"):
        RunStore.open_existing(tmp_path / "run")
    reader = RunStore.open_existing(tmp_path / "run", readonly=True)  # readers need no lock
    assert reader.load_records() == {}
    first.close()
    RunStore.open_existing(tmp_path / "run").close()


def test_resume_with_other_settings_is_refused_unless_forced(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", {"agent": "oracle", "n_attempts": 3})
    store.check_settings({"agent": "oracle", "n_attempts": 3})
    with pytest.raises(ConfigError, match="agent='oracle', not 'nop'"):
        store.check_settings({"agent": "nop", "n_attempts": 3})
    store.check_settings({"agent": "nop"}, force=True)
    store.close()


def test_incomplete_keeps_only_the_last_few_leftovers(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", {})
    for attempt in range(KEEP_LEFTOVERS + 3):
        folder = store.trial_dir("001_t")
        folder.mkdir()
        (folder / "n.txt").write_text(str(attempt))
        store.clear_leftover("001_t")
    kept = sorted((tmp_path / "run" / INCOMPLETE_DIR).iterdir())
    assert len(kept) == KEEP_LEFTOVERS and len(store.pruned) == 3
    assert sorted(int((k / "n.txt").read_text()) for k in kept) == [3, 4, 5]  # the newest
    store.close()
