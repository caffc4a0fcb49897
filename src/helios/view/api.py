"""The viewer's JSON API: the runs, a run, a page of its trials, a trial, a page of
a trajectory's steps, and a raw file. Every path in a request is a name under the
served folders (`roots.Roots`); every failure is a JSON `{"error": ...}`."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from helios.view import steps, trial
from helios.view.query import BadQuery, Query
from helios.view.records import RecordIndex, Row
from helios.view.roots import OutsideRoots, Roots
from helios.view.runs import (
    RESULTS,
    RUN_FILE,
    STORE_DIR,
    RunFolder,
    describe,
    find_runs,
    read_summary,
)

ROOTS = web.AppKey("roots", Roots)
INDEXES = web.AppKey("indexes", dict[Path, RecordIndex])
#: a record's free text sent with a table row is cut to this
MAX_CELL = 300
#: the image types a raw file is shown inline as (anything else is a download or text)
INLINE_IMAGES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                 ".gif": "image/gif", ".webp": "image/webp"}  # fmt: skip
_TEXT = (".txt", ".log", ".json", ".jsonl", ".md", ".toml", ".yaml", ".yml", ".py", ".sh", ".csv")


def _param(request: web.Request, name: str) -> str:
    value = request.query.get(name)
    if not value:
        raise BadQuery(f"the request needs the parameter {name!r}")
    return value


def _run(request: web.Request) -> tuple[RunFolder, RecordIndex]:
    roots = request.app[ROOTS]
    folder = roots.resolve(_param(request, "run"))
    if (folder / RUN_FILE).is_file():
        run = RunFolder(folder, folder)
    elif (folder / STORE_DIR / RUN_FILE).is_file():
        run = RunFolder(folder, folder / STORE_DIR)
    else:
        raise FileNotFoundError(f"{folder.name} is not a Helios run folder (no run.json)")
    return run, _index(request, run)


def _index(request: web.Request, run: RunFolder) -> RecordIndex:
    indexes = request.app[INDEXES]
    index = indexes.get(run.store)
    if index is None:
        index = indexes[run.store] = RecordIndex(run.store / RESULTS)
    return index


async def runs(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    found = [describe(roots, run, _index(request, run)) for run in find_runs(roots)]
    return web.json_response({"runs": found, "folders": [str(f) for f in roots.folders]})


async def run(request: web.Request) -> web.Response:
    folder, index = _run(request)
    head = describe(request.app[ROOTS], folder, index)
    summary: dict[str, Any] | None = None
    summary_file = folder.summary_file
    if summary_file is not None:
        summary, error = read_summary(summary_file)  # the rows: the table's, page by page
        if summary is None:
            head["summary_error"] = error
    return web.json_response({**head, "summary": summary, "summary_file": summary_file.name
                              if summary_file else None})  # fmt: skip


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL:
        return value[:MAX_CELL] + "…"
    return value if isinstance(value, str | int | float) or value is None else str(value)


def _row(index: RecordIndex, row: Row) -> dict[str, Any]:
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


async def trials(request: web.Request) -> web.Response:
    query = Query.parse(request.query)
    folder, index = _run(request)
    index.refresh()
    matched, rows = query.page(index)
    head = describe(request.app[ROOTS], folder, index)
    return web.json_response({
        "run": head,
        "total": len(index.rows),
        "matched": matched,
        "offset": query.offset,
        "rows": [_row(index, row) for row in rows],
        "error_types": sorted(index.totals.errors),
    })  # fmt: skip


async def trial_view(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    folder, _ = _run(request)
    path = roots.inside(folder.folder, _param(request, "folder"))
    if not path.is_dir():
        raise FileNotFoundError(f"the trial folder {_param(request, 'folder')!r} is missing")
    return web.json_response(trial.describe(roots, path))


async def trajectory_steps(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    path = roots.resolve(_param(request, "path"))
    offset = _number(request, "offset", 0)
    limit = _number(request, "limit", 50)
    loaded = steps.load(path)

    def url_of(relative: str) -> str | None:
        try:
            image = roots.inside(path.parent, relative)
        except OutsideRoots:
            return None
        return "api/file?path=" + quote(roots.key(image)) if image.is_file() else None

    document = loaded.document
    agent = document.get("agent")
    return web.json_response({
        "total": len(loaded.steps),
        "offset": offset,
        "steps": steps.page(loaded, offset, limit, url_of),
        "agent": agent if isinstance(agent, dict) else None,
        "final_metrics": document.get("final_metrics")
        if isinstance(document.get("final_metrics"), dict) else None,
        "schema_version": document.get("schema_version"),
    })  # fmt: skip


def _number(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name, "")
    if not text:
        return default
    if not text.isdigit():
        raise BadQuery(f"{name} must be a whole number, not {text[:40]!r}")
    return int(text)


async def raw_file(request: web.Request) -> web.StreamResponse:
    path = request.app[ROOTS].resolve(_param(request, "path"))
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} is not a file")
    suffix = path.suffix.lower()
    headers = {"Content-Security-Policy": "sandbox; default-src 'none'",
               "X-Content-Type-Options": "nosniff"}  # fmt: skip
    download = request.query.get("download") == "1"
    if suffix in INLINE_IMAGES and not download:
        headers["Content-Type"] = INLINE_IMAGES[suffix]
    elif suffix in _TEXT and not download:
        headers["Content-Type"] = "text/plain; charset=utf-8"
    else:
        guessed = mimetypes.guess_type(path.name)[0]
        headers["Content-Type"] = "application/octet-stream" if guessed else "text/plain"
        ascii_name = path.name.encode("ascii", "replace").decode().replace('"', "_")
        headers["Content-Disposition"] = f'attachment; filename="{ascii_name}"'
    return web.FileResponse(path, headers=headers)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/api/runs", runs),
        web.get("/api/run", run),
        web.get("/api/trials", trials),
        web.get("/api/trial", trial_view),
        web.get("/api/steps", trajectory_steps),
        web.get("/api/file", raw_file),
    ]
