"""Resume reads record heads (id, status, folder), not whole records (issue 13):
the fast path agrees with the careful one, and bad lines still go to quarantine."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from helios.engine.batch import BatchService
from helios.engine.config import ConcurrencyConfig
from helios.engine.jsonl import RecordStream
from helios.engine.store import RunStore

from .thin_door import PromptDoor, PromptUnit


def _write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def _record(i: int, status: str = "passed") -> dict[str, object]:
    return {"trial_id": f"id{i}", "status": status, "folder": f"f{i}",
            "big": {"nested": [1, 2, {"x": "y" * 50}]}}  # fmt: skip


def test_heads_of_a_clean_file_match_the_full_records(tmp_path: Path) -> None:
    stream = RecordStream(tmp_path / "results.jsonl")
    records = [_record(i, "error" if i % 3 == 0 else "passed") for i in range(50)]
    _write(stream.path, [json.dumps(r).encode() + b"\n" for r in records])
    heads, bad = stream.load_heads()
    assert bad == []
    assert [(h.trial_id, h.status, h.folder) for h in heads] == [
        (r["trial_id"], r["status"], r["folder"]) for r in records
    ]


def test_a_bad_line_and_a_torn_tail_take_the_careful_path(tmp_path: Path) -> None:
    stream = RecordStream(tmp_path / "results.jsonl")
    lines = [json.dumps(_record(0)).encode() + b"\n", b"[1, 2]\n", b"{not json\n",
             json.dumps(_record(3)).encode() + b"\n", b'{"trial_id": "torn"']  # fmt: skip
    _write(stream.path, lines)
    heads, bad = stream.load_heads()
    assert [h.trial_id for h in heads] == ["id0", "id3"]
    assert [b.line for b in bad] == [2, 3, 5]
    # repaired: the file now holds the good lines only, and the fast path takes it
    assert stream.path.read_bytes() == lines[0] + lines[3]
    assert len(stream.quarantine_path.read_text().splitlines()) == 3
    assert [h.trial_id for h in stream.load_heads()[0]] == ["id0", "id3"]


_VALUES = st.one_of(st.text(max_size=5), st.integers(), st.none(), st.lists(st.integers()))
_LINES = st.one_of(
    st.dictionaries(st.sampled_from(["trial_id", "status", "folder", "x"]), _VALUES),
    st.lists(st.integers(), max_size=2),
    st.text(max_size=8),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_LINES, max_size=12))
def test_fast_and_careful_paths_agree(tmp_path_factory: object, values: list[object]) -> None:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    lines = []
    for value in values:
        text = value if isinstance(value, str) else json.dumps(value)
        lines.append(text.replace("\n", " ").encode() + b"\n")
    fast = RecordStream(folder / "a.jsonl")
    careful = RecordStream(folder / "b.jsonl")
    _write(fast.path, lines)
    _write(careful.path, lines)
    heads, bad = fast.load_heads(repair=False)
    loaded = careful.load(repair=False)
    assert [(h.trial_id, h.status, h.folder) for h in heads] == [
        (r.get("trial_id"), r.get("status"), r.get("folder")) for r in loaded.records
    ]
    assert [b.line for b in bad] == [b.line for b in loaded.quarantined]


def test_plan_uses_heads_and_reads_finished_records_only_when_asked(tmp_path: Path) -> None:
    units = [PromptUnit(f"p{i} good", i) for i in range(6)]
    store = RunStore.create(tmp_path / "run", {"run_id": "r"})
    try:
        for unit in units[:4]:
            status = "error" if unit.line == 1 else "passed"
            store.append({"trial_id": unit.trial_id, "status": status, "payload": "x" * 100})
        service: BatchService[PromptUnit, dict[str, object]] = BatchService(PromptDoor(), store)
        plan = service.plan(units)
        assert [u.line for u in plan.pending] == [4, 5]
        assert plan.records is None  # nothing but heads read so far
        assert [r["trial_id"] for r in plan.finished] == [u.trial_id for u in units[:4]]
        assert plan.finished[0]["payload"] == "x" * 100
        service.concurrency = ConcurrencyConfig(retry_errors=True)
        assert [u.line for u in service.plan(units).pending] == [1, 4, 5]
    finally:
        store.close()


def test_blocks_split_only_at_line_ends(tmp_path: Path, monkeypatch: object) -> None:
    import helios.engine.jsonl as jsonl

    monkeypatch.setattr(jsonl, "HEAD_BLOCK", 64)  # type: ignore[attr-defined]
    stream = RecordStream(tmp_path / "results.jsonl")
    records = [_record(i) for i in range(20)] + [{"trial_id": "long", "pad": "z" * 500}]
    _write(stream.path, [json.dumps(r).encode() + b"\n" for r in records])
    heads, bad = stream.load_heads()
    assert [h.trial_id for h in heads] == [r["trial_id"] for r in records] and bad == []
    with stream.path.open("ab") as handle:
        handle.write(b'{"trial_id": "torn", "pad": "' + b"q" * 300)
    heads, bad = stream.load_heads()
    assert len(heads) == 21 and [b.reason for b in bad] == ["torn final line (cut)"]
