"""The viewer's JSON API: the runs, a run, a page of its trials, a trial, a page of
a trajectory's steps, and a raw file. Every path in a request is a name under the
served folders (`roots.Roots`); every failure is a JSON `{"error": ...}`."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from helios.view.documents import (
    Links,
    record_document,
    run_document,
    run_folder,
    steps_document,
    table_row,
    trial_document,
)
from helios.view.query import BadQuery, Query
from helios.view.records import RecordIndex
from helios.view.roots import Roots
from helios.view.runs import RESULTS, RunFolder, describe, find_runs

ROOTS = web.AppKey("roots", Roots)
INDEXES = web.AppKey("indexes", dict[Path, RecordIndex])
#: the image types a raw file is shown inline as (anything else is a download or text)
INLINE_IMAGES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                 ".gif": "image/gif", ".webp": "image/webp"}  # fmt: skip
_TEXT = (".txt", ".log", ".json", ".jsonl", ".md", ".toml", ".yaml", ".yml", ".py", ".sh", ".csv")


def _param(request: web.Request, name: str) -> str:
    value = request.query.get(name)
    if not value:
        raise BadQuery(f"the request needs the parameter {name!r}")
    return value


def _number(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name, "")
    if not text:
        return default
    if not text.isdigit():
        raise BadQuery(f"{name} must be a whole number, not {text[:40]!r}")
    return int(text)


def _run(request: web.Request) -> tuple[RunFolder, RecordIndex]:
    run = run_folder(request.app[ROOTS].resolve(_param(request, "run")))
    return run, _index(request, run)


def _index(request: web.Request, run: RunFolder) -> RecordIndex:
    indexes = request.app[INDEXES]
    index = indexes.get(run.store)
    if index is None:
        index = indexes[run.store] = RecordIndex(run.store / RESULTS)
    return index


def _links(roots: Roots) -> Links:
    return lambda path: "api/file?path=" + quote(roots.key(path))


async def runs(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    found = [describe(roots, run, _index(request, run)) for run in find_runs(roots)]
    return web.json_response({"runs": found, "folders": [str(f) for f in roots.folders]})


async def run(request: web.Request) -> web.Response:
    folder, index = _run(request)
    return web.json_response(run_document(request.app[ROOTS], folder, index))


async def trials(request: web.Request) -> web.Response:
    query = Query.parse(request.query)
    folder, index = _run(request)
    index.refresh()
    matched, rows = query.page(index)
    return web.json_response({
        "run": describe(request.app[ROOTS], folder, index),
        "total": len(index.rows),
        "matched": matched,
        "offset": query.offset,
        "rows": [table_row(index, row) for row in rows],
        "error_types": sorted(index.totals.errors),
    })  # fmt: skip


async def trial_view(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    folder, _ = _run(request)
    document = trial_document(roots, folder, _param(request, "folder"), _links(roots))
    return web.json_response(document)


async def record(request: web.Request) -> web.Response:
    folder, index = _run(request)
    number = _number(request, "index", -1)
    return web.json_response(record_document(request.app[ROOTS], folder, index, number))


async def trajectory_steps(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    path = roots.resolve(_param(request, "path"))
    offset, limit = _number(request, "offset", 0), _number(request, "limit", 50)
    return web.json_response(steps_document(roots, path, offset, limit, _links(roots)))


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
        web.get("/api/record", record),
        web.get("/api/steps", trajectory_steps),
        web.get("/api/file", raw_file),
    ]
