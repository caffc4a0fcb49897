"""The JSON each view of the page gets: a run (its head and summary), a row of the
trial table, a trial, a page of steps. The server's API and `--bundle` both build
them here; they differ only in how a file becomes a URL (`Links`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from helios.view import steps, trial
from helios.view.records import RecordIndex, Row
from helios.view.roots import OutsideRoots, Roots
from helios.view.runs import RUN_FILE, STORE_DIR, RunFolder, describe, read_summary

#: a record's free text sent with a table row is cut to this
MAX_CELL = 300

#: a file's real path -> the URL the page opens it at (None: not offered)
Links = Callable[[Path], str | None]


def run_folder(folder: Path) -> RunFolder:
    if (folder / RUN_FILE).is_file():
        return RunFolder(folder, folder)
    if (folder / STORE_DIR / RUN_FILE).is_file():
        return RunFolder(folder, folder / STORE_DIR)
    raise FileNotFoundError(f"{folder.name} is not a Helios run folder (no run.json)")


def run_document(roots: Roots, run: RunFolder, index: RecordIndex) -> dict[str, Any]:
    head = describe(roots, run, index)
    summary: dict[str, Any] | None = None
    summary_file = run.summary_file
    if summary_file is not None:
        summary, error = read_summary(summary_file)  # the rows: the table's, page by page
        if summary is None:
            head["summary_error"] = error
    return {**head, "summary": summary,
            "summary_file": summary_file.name if summary_file else None}  # fmt: skip


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL:
        return value[:MAX_CELL] + "…"
    return value if isinstance(value, str | int | float) or value is None else str(value)


def table_row(index: RecordIndex, row: Row) -> dict[str, Any]:
    record = index.record(row)
    return {
        "index": row.index,
        "task": row.task,
        "attempt": row.attempt,
        "status": row.status,
        "reward": row.reward,
        "duration": row.duration,
        "cost": row.cost,
        "error_type": row.error_type,
        "folder": row.folder,
        "trial_id": _cell(record.get("trial_id")),
        "error": _cell(record.get("error") or record.get("damaged")),
        "note": _cell(record.get("verifier_note")),
    }


def trial_document(roots: Roots, run: RunFolder, folder: str, links: Links) -> dict[str, Any]:
    path = roots.inside(run.folder, folder)
    if not path.is_dir():
        raise FileNotFoundError(f"the trial folder {folder!r} is missing")
    document = trial.describe(roots, path)
    for entry in document["files"]:
        entry["href"] = links(path / entry["path"])
    return document


def steps_document(roots: Roots, path: Path, offset: int, limit: int,
                   links: Links) -> dict[str, Any]:  # fmt: skip
    loaded = steps.load(path)

    def url_of(relative: str) -> str | None:
        try:
            image = roots.inside(path.parent, relative)
        except OutsideRoots:
            return None
        return links(image) if image.is_file() else None

    document = loaded.document
    agent = document.get("agent")
    final = document.get("final_metrics")
    return {
        "total": len(loaded.steps),
        "offset": offset,
        "steps": steps.page(loaded, offset, limit, url_of),
        "agent": agent if isinstance(agent, dict) else None,
        "final_metrics": final if isinstance(final, dict) else None,
        "schema_version": document.get("schema_version"),
    }
