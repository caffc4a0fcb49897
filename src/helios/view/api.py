"""The viewer's JSON API: the runs, a run, a page of its trials, a trial, a page of
a trajectory's steps, and a raw file. Every path in a request is a name under the
served folders (`roots.Roots`); every failure is a JSON `{"error": ...}`."""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from helios.results import compare_runs, load_run
from helios.results.folders import RunFolder
from helios.view.documents import (
    Links,
    live_desktops,
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
from helios.view.runs import MAX_FOLDERS, RESULTS, RunList, describe

ROOTS = web.AppKey("roots", Roots)
INDEXES = web.AppKey("indexes", dict[Path, RecordIndex])
WORKER = web.AppKey("worker", ThreadPoolExecutor)
#: the thread that compares runs: a comparison reads whole runs, and must never hold
#: up the pages the one WORKER answers
COMPARER = web.AppKey("comparer", ThreadPoolExecutor)
RUN_LIST = web.AppKey("run_list", RunList)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: the image types a raw file is shown inline as (anything else is a download or text)
INLINE_IMAGES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                 ".gif": "image/gif", ".webp": "image/webp"}  # fmt: skip
#: runs in one comparison (each is read whole: `helios compare` is for a few runs)
MAX_COMPARED = 8
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


def runs(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    found = []
    listed, truncated = request.app[RUN_LIST].get(roots)
    for run in listed:
        index = _index(request, run)
        index.refresh()
        found.append(describe(roots, run, index))
    answer: dict[str, object] = {"runs": found, "folders": [str(f) for f in roots.folders]}
    if truncated:
        answer["truncated"] = (f"the served folders hold more than {MAX_FOLDERS:,} folders: "
                               "the runs in the first ones are listed; serve a narrower "
                               "folder to see the others")  # fmt: skip
    return web.json_response(answer)


def run(request: web.Request) -> web.Response:
    folder, index = _run(request)
    index.refresh()
    return web.json_response(run_document(request.app[ROOTS], folder, index))


def trials(request: web.Request) -> web.Response:
    query = Query.parse(request.query)
    folder, index = _run(request)
    index.refresh()
    matched, rows = query.page(index)
    head = describe(request.app[ROOTS], folder, index)
    return web.json_response({
        "run": head,
        "desktops": live_desktops(folder.folder) if head.get("status") == "running" else [],
        "total": len(index.rows),
        "matched": matched,
        "offset": query.offset,
        "rows": [table_row(index, row) for row in rows],
        "error_types": sorted(index.totals.errors),
    })  # fmt: skip


def trial_view(request: web.Request) -> web.Response:
    roots = request.app[ROOTS]
    folder, _ = _run(request)
    document = trial_document(roots, folder, _param(request, "folder"), _links(roots))
    return web.json_response(document)


def record(request: web.Request) -> web.Response:
    folder, index = _run(request)
    index.refresh()
    number = _number(request, "index", -1)
    return web.json_response(record_document(request.app[ROOTS], folder, index, number))


def trajectory_steps(request: web.Request) -> web.Response:
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


def _in_worker(
    handler: Callable[[web.Request], web.Response], pool: web.AppKey[ThreadPoolExecutor] = WORKER
) -> Handler:
    """`handler` run in one of the app's threads: reading a big run (an index of
    100,000 records, a 50 MB trajectory) never stalls the event loop, and the
    documents, indexes and caches are only ever touched by the one WORKER thread.
    A comparison, which touches none of them, has its own thread (COMPARER)."""

    async def handle(request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(request.app[pool], handler, request)

    return handle


def compare(request: web.Request) -> web.Response:
    """`helios compare` of the runs named by `run` (two or more), as `to_dict` gives it,
    with each run's request name beside its label. The first run is the baseline."""
    roots = request.app[ROOTS]
    keys = request.query.getall("run", [])
    if len(keys) < 2:
        raise BadQuery("comparing needs two runs or more (the parameter 'run', repeated)")
    if len(keys) > MAX_COMPARED:
        raise BadQuery(f"at most {MAX_COMPARED} runs are compared at once, not {len(keys)}")
    loaded = [load_run(roots.resolve(key), label=key) for key in keys]
    report = compare_runs(loaded).to_dict()
    report["keys"] = keys
    return web.json_response(report)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/api/runs", _in_worker(runs)),
        web.get("/api/run", _in_worker(run)),
        web.get("/api/trials", _in_worker(trials)),
        web.get("/api/trial", _in_worker(trial_view)),
        web.get("/api/record", _in_worker(record)),
        web.get("/api/steps", _in_worker(trajectory_steps)),
        web.get("/api/compare", _in_worker(compare, COMPARER)),
        web.get("/api/file", raw_file),
    ]
