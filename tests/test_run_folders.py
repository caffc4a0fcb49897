"""One way to find run folders (`helios.results.folders`), which `helios compare` and
`helios view` both use: what one lists, the other does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helios.results.folders import RunFolder, find_runs, run_folder
from helios.results.runs import load_runs
from helios.view.roots import Roots
from helios.view.runs import find_runs as viewer_runs


def _run(folder: Path, kind: str = "batch") -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"kind": kind, "run_id": folder.name}))
    (folder / "results.jsonl").write_text("")
    return folder


def _generate(folder: Path) -> Path:
    _run(folder / ".helios", "generate")
    return folder


def test_the_viewer_and_compare_find_the_same_run_folders(tmp_path: Path) -> None:
    root = tmp_path / "results"
    a = _run(root / "model-a" / "batch_1")
    b = _run(root / "model-b" / "batch_2")
    g = _generate(root / "data" / "gen")
    _run(a / "001_t0" / "inner")  # a run's own subfolders are not searched
    _run(root / "_incomplete" / "batch_x")  # nor folders starting with _ or .
    _run(root / ".git" / "batch_y")
    (root / "link").symlink_to(a)  # nor links
    _run(root / "1" / "2" / "3" / "4" / "5" / "deep")  # nor past MAX_DEPTH

    found = find_runs(root)
    assert found == [RunFolder(g, g / ".helios"), RunFolder(a, a), RunFolder(b, b)]
    assert {run.folder for run in viewer_runs(Roots.of([root]))} == {a, b, g}
    loaded = load_runs([root])
    assert sorted(run.path for run in loaded.runs) == [a, b]
    (skipped,) = loaded.skipped  # the generate run: one line, not an error
    assert "generate" in skipped and str(g) in skipped


def test_a_run_folder_is_told_apart_by_its_run_json(tmp_path: Path) -> None:
    batch = _run(tmp_path / "batch")
    gen = _generate(tmp_path / "gen")
    assert run_folder(batch) == RunFolder(batch, batch)
    assert run_folder(gen) == RunFolder(gen, gen / ".helios")
    assert run_folder(gen / ".helios") == RunFolder(gen, gen / ".helios")
    assert run_folder(gen).is_generate_store and not run_folder(batch).is_generate_store
    assert run_folder(tmp_path) is None


def test_a_run_file_too_large_to_parse_is_one_line_not_a_read_of_it_whole(
    tmp_path: Path,
) -> None:
    """A hostile or damaged summary of gigabytes is not read (the viewer and compare
    share the bound): compare still reads the run from its records, with one line;
    a run.json that large is not a run it can read."""
    from helios.results.folders import MAX_JSON_BYTES
    from helios.results.runs import NotARun, load_run

    run = _run(tmp_path / "batch")
    with (run / "batch_summary.json").open("wb") as summary:
        summary.truncate(MAX_JSON_BYTES + 1)  # sparse: costs no disk
    loaded = load_run(run)
    assert [p for p in loaded.problems if "larger than 64 MB, not read" in p], loaded.problems
    with (run / "run.json").open("r+b") as meta:
        meta.truncate(MAX_JSON_BYTES + 1)
    with pytest.raises(NotARun, match=r"run\.json: larger than 64 MB, not read"):
        load_run(run)
