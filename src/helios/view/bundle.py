"""`helios view --bundle OUT`: the viewer as a static folder that works from file://
or any static host, for sharing.

The page is the same (index.html, app.js, app.css); the documents the server would
answer are written as scripts under `data/` (a browser does not let a file:// page
fetch files, but it does load scripts), one per run (with all of its table rows:
the page sorts and filters them itself), per trial and per trajectory. Screenshots
and the trials' files up to `MAX_FILE` bytes are copied under `files/`; a file that
is not an image is copied as .txt or .bin, so opening it never runs it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from helios.results.folders import RunFolder
from helios.view.documents import (
    record_document,
    run_document,
    steps_document,
    table_row,
    trial_document,
)
from helios.view.records import RecordIndex
from helios.view.roots import OutsideRoots, Roots
from helios.view.runs import RESULTS, describe, find_runs
from helios.view.steps import MAX_STEPS_PAGE, NotATIF

#: trials of one run whose details (files, steps) go into the bundle; the table has all
MAX_TRIALS = 2000
#: the largest file copied (images and text alike)
MAX_FILE = 5 * 1024 * 1024
IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
TEXT = (".txt", ".log", ".json", ".jsonl", ".md", ".toml", ".yaml", ".yml", ".py", ".sh", ".csv")
#: the bundle's page: the server's Content-Security-Policy, as a meta tag
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'")  # fmt: skip


@dataclass
class Bundle:
    out: Path
    files: dict[str, str] = field(default_factory=dict)  # document key -> data/ file
    copied: dict[Path, str] = field(default_factory=dict)  # real path -> files/ URL

    def put(self, key: str, document: dict[str, Any]) -> None:
        name = hashlib.sha256(key.encode()).hexdigest()[:24] + ".js"
        body = json.dumps(document, ensure_ascii=True, separators=(",", ":"))
        (self.out / "data" / name).write_text(f"HELIOS_DATA[{json.dumps(key)}] = {body};\n")
        self.files[key] = name

    def link(self, path: Path) -> str | None:
        """Copy `path` (once) and give its URL in the bundle; None past MAX_FILE."""
        if path in self.copied:
            return self.copied[path]
        try:
            if path.stat().st_size > MAX_FILE:
                return None
        except OSError:
            return None
        suffix = path.suffix.lower()
        kept = suffix if suffix in IMAGES else ".txt" if suffix in TEXT else ".bin"
        name = hashlib.sha256(str(path).encode()).hexdigest()[:24] + kept
        shutil.copyfile(path, self.out / "files" / name)
        self.copied[path] = url = f"files/{name}"
        return url


def write_bundle(folders: list[Path], out: Path) -> tuple[int, int]:
    """Write the bundle of every run under `folders` into `out` (new or empty);
    returns how many runs and trials it holds."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder")
    roots = Roots.of(folders)
    for part in ("data", "files"):
        (out / part).mkdir(parents=True, exist_ok=True)
    bundle = Bundle(out)
    heads = []
    trials = 0
    for run in find_runs(roots):
        index = RecordIndex(run.store / RESULTS)
        index.refresh()
        head = describe(roots, run, index)
        heads.append(head)
        document = run_document(roots, run, index)
        document["rows"] = [table_row(index, row) for row in index.rows]
        document["error_types"] = sorted(index.totals.errors)
        bundle.put(f"run:{head['key']}", document)
        trials += len(index.rows)
        for row in index.rows[:MAX_TRIALS]:
            if row.folder is not None:
                _trial(bundle, roots, run, head["key"], row.folder)
            elif row.status != "damaged":
                record = record_document(roots, run, index, row.index)
                bundle.put(f"record:{head['key']}:{row.index}", record)
    bundle.put("runs", {"runs": heads, "folders": [str(f) for f in roots.folders]})
    _page(out, bundle)
    return len(heads), trials


def _trial(bundle: Bundle, roots: Roots, run: RunFolder, key: str, folder: str) -> None:
    try:
        document = trial_document(roots, run, folder, bundle.link)
    except (OutsideRoots, FileNotFoundError):
        return  # the table row stays; its page says it is not in the bundle
    bundle.put(f"trial:{key}:{folder}", document)
    trajectory = document["trajectory"]
    if trajectory is None:
        return
    try:
        path = roots.resolve(trajectory)
        steps = steps_document(roots, path, 0, MAX_STEPS_PAGE, bundle.link)
        while len(steps["steps"]) < steps["total"]:
            more = steps_document(roots, path, len(steps["steps"]), MAX_STEPS_PAGE, bundle.link)
            steps["steps"] += more["steps"]
    except (NotATIF, OutsideRoots, FileNotFoundError) as exc:
        bundle.put(f"steps:{trajectory}", {"error": str(exc)})
        return
    bundle.put(f"steps:{trajectory}", steps)


def _page(out: Path, bundle: Bundle) -> None:
    static = resources.files("helios.view").joinpath("static")
    for name in ("app.js", "app.css"):
        (out / name).write_bytes(static.joinpath(name).read_bytes())
    index = static.joinpath("index.html").read_text("utf-8")
    index = index.replace('<html lang="en">', '<html lang="en" data-bundle="1">')
    index = index.replace(
        '<script src="app.js" defer></script>',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<script src="data/index.js" defer></script>\n<script src="app.js" defer></script>',
    )
    (out / "index.html").write_text(index, "utf-8")
    files = json.dumps(bundle.files, ensure_ascii=True)
    (out / "data" / "index.js").write_text(
        f"window.HELIOS_DATA = {{}};\nwindow.HELIOS_BUNDLE = {{files: {files}}};\n"
    )
