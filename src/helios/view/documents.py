"""The JSON each view of the page gets: a run (its head and summary), a row of the
trial table, a trial, a page of steps. The server's API and `--bundle` both build
them here; they differ only in how a file becomes a URL (`Links`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helios.display.watch import DESKTOPS_FILE
from helios.results.folders import RunFolder
from helios.results.folders import run_folder as find_run_folder
from helios.view import steps, trial
from helios.view.records import RecordIndex, Row
from helios.view.roots import OutsideRoots, Roots
from helios.view.runs import describe, read_summary, summary_file

#: a record's free text sent with a table row is cut to this
MAX_CELL = 300
#: the largest generate row read for the page
MAX_ROW = 16 * 1024 * 1024

#: a file's real path -> the URL the page opens it at (None: not offered)
Links = Callable[[Path], str | None]


def run_folder(folder: Path) -> RunFolder:
    run = find_run_folder(folder)
    if run is None:
        raise FileNotFoundError(f"{folder.name} is not a Helios run folder (no run.json)")
    return run


def run_document(roots: Roots, run: RunFolder, index: RecordIndex) -> dict[str, Any]:
    head = describe(roots, run, index)
    summary: dict[str, Any] | None = None
    summary_at = summary_file(run)
    if summary_at is not None:
        summary, error = read_summary(summary_at)  # the rows: the table's, page by page
        if summary is None:
            head["summary_error"] = error
    desktops = live_desktops(run.folder) if head.get("status") == "running" else []
    return {**head, "summary": summary, "desktops": desktops,
            "summary_file": summary_at.name if summary_at else None}  # fmt: skip


#: where they are served: the watching process's loopback server, nothing else
DESKTOP_URL = re.compile(r"http://127\.0\.0\.1:\d{1,5}/[A-Za-z0-9_-]+/desktops/[^\s\"<>]{1,200}")


def live_desktops(run_dir: Path) -> list[dict[str, str]]:
    """The GUI trials in flight of a watched run, each with its desktop's URL. The file
    is the run folder's, so untrusted: a URL other than a loopback desktop's, or a
    file too big or damaged, gives nothing."""
    path = run_dir / DESKTOPS_FILE
    try:
        if path.stat().st_size > 1 << 20:
            return []
        listing = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return []
    found = []
    entries = listing.get("desktops") if isinstance(listing, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        label, url = entry.get("label"), entry.get("url")
        if isinstance(label, str) and isinstance(url, str) and DESKTOP_URL.fullmatch(url):
            found.append({"label": _cell(label), "url": url})
    return found


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL:
        return value[:MAX_CELL] + "…"
    return value if isinstance(value, str | int | float) or value is None else str(value)


def error_text(error: Any) -> Any:
    """An error as one line: a string as it is, an error record as "type: message"."""
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return error


def capped(value: Any, depth: int = 0) -> Any:
    """`value` with every string cut to steps.MAX_TEXT characters (and nesting past
    64 levels shown as text), for a record sent whole to the page."""
    if isinstance(value, str):
        return steps.cut(value)
    if depth > 64:
        return "(nested too deep to show)"
    if isinstance(value, dict):
        return {str(k): capped(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [capped(v, depth + 1) for v in value]
    return value


def record_document(roots: Roots, run: RunFolder, index: RecordIndex,
                    number: int) -> dict[str, Any]:  # fmt: skip
    """Record `number` of the run whole (a generate prompt, a tool-call test run, or a
    trial without a folder), with the Hermes row it points at for a generate run."""
    if not 0 <= number < len(index.rows):
        raise FileNotFoundError(f"results.jsonl has no record {number + 1} "
                                f"({len(index.rows)} records)")  # fmt: skip
    row = index.rows[number]
    record = index.record(row)
    document: dict[str, Any] = {"index": number, "task": row.task, "status": row.status,
                                "error": error_text(record.get("error")),
                                "record": capped(record)}  # fmt: skip
    file, offset, length = record.get("file"), record.get("offset"), record.get("length")
    if isinstance(file, str) and isinstance(offset, int) and isinstance(length, int):
        document["row"], document["row_error"] = _hermes_row(roots, run, file, offset, length)
    return document


def _hermes_row(roots: Roots, run: RunFolder, file: str, offset: int,
                length: int) -> tuple[Any, str | None]:  # fmt: skip
    """The row a generate record points at, in its batch file inside the run folder."""
    name = Path(file).name
    if length > MAX_ROW or offset < 0 or length < 0:
        return None, f"{name}: the row at {offset} is {length:,} bytes (past {MAX_ROW:,})"
    try:
        path = roots.inside(run.folder, name)
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
        return capped(json.loads(data)), None
    except OutsideRoots as exc:
        return None, str(exc)
    except FileNotFoundError:
        return None, f"{name} is missing"
    except (ValueError, RecursionError) as exc:
        return None, f"{name}: the row at byte {offset} is not JSON ({exc})"


def table_row(index: RecordIndex, row: Row) -> dict[str, Any]:
    record = index.record(row)
    return {
        "index": row.index,
        "task": row.task,
        "attempt": row.attempt or None,  # a generate prompt has none (never "0")
        "status": row.status,
        "reward": row.reward,
        "duration": row.duration,
        "cost": row.cost,
        "error_type": row.error_type,
        "folder": row.folder,
        "model": row.model,
        "agent": row.agent,
        # a retry (`--retry-failed-below`), and a row a newer one replaced in the counts
        "retry": row.retry or None,
        "superseded": row.superseded,
        "trial_id": _cell(record.get("trial_id")),
        "error": _cell(error_text(record.get("error") or record.get("damaged"))),
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
