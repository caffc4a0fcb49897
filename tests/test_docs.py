"""The docs site (mkdocs.yml, docs/): it builds with `mkdocs build --strict` (a broken link,
a page missing from the nav or a docstring that cannot be read fails it), its CLI reference
is written from the typer app, and its Python API reference from the docstrings."""

from __future__ import annotations

import html
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from helios.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))
import cli_reference  # noqa: E402


def _commands(command: Any, prefix: str = "helios") -> set[str]:
    """Every command path of the app, through click's interface (lazy groups answer it too)."""
    ctx = command.context_class(command, info_name=prefix.split()[-1])
    found = {prefix}
    for name in command.list_commands(ctx) if hasattr(command, "list_commands") else []:
        child = command.get_command(ctx, name)
        if child is not None and not child.hidden:
            found |= _commands(child, f"{prefix} {name}")
    return found


def test_the_cli_reference_has_every_command_with_its_help() -> None:
    commands = _commands(typer.main.get_command(app))
    assert {"helios batch", "helios run", "helios tasks check", "helios view"} <= commands
    walked = cli_reference.walk(typer.main.get_command(app))
    assert {path for path, _, _ in walked} == commands
    page = cli_reference.reference()
    for path, _, text in walked:
        assert f"## `{path}`" in page
        assert text.rstrip() in page  # the --help itself, verbatim
    assert "Usage: helios tasks check [OPTIONS]" in page
    # the page is the hook's: docs/cli.md holds the marker and no hand-written reference
    assert cli_reference.MARKER in (DOCS / "cli.md").read_text("utf-8")


def test_the_first_screen_says_how_to_run_without_a_key_and_where_outputs_go() -> None:
    # a newcomer's first screen: about 30 source lines of the home page
    first = "\n".join((DOCS / "index.md").read_text("utf-8").splitlines()[:30])
    assert "## Run a batch without an API key" in first and "make demo" in first
    assert "## Where each output lives" in first
    for output in ("batch_summary.json", "results.jsonl", "result.json", "trajectory.json",
                   "test-stdout.txt", "trajectories.jsonl"):  # fmt: skip
        assert output in first


def test_every_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text("utf-8"), Loader=yaml.BaseLoader)

    def pages(entries: Any) -> set[str]:
        found: set[str] = set()
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                found |= pages(value) if isinstance(value, list) else {value}
        return found

    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "hooks" not in p.parts}
    assert on_disk == pages(config["nav"])


def _text(page: Path) -> str:
    """A built page's text, without its tags, whitespace runs made one space."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.read_text("utf-8"))))


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if not all(importlib.util.find_spec(name) for name in ("mkdocs", "mkdocstrings")):
        pytest.fail("the docs tools are not installed: scripts/venv.sh dev (the docs extra)")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(site)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the CLI reference, generated: every command's usage line
    cli = _text(site / "cli" / "index.html")
    for path, _, text in cli_reference.walk(typer.main.get_command(app)):
        usage = re.sub(r"\s+", " ", text.split("\n\n", 1)[0]).strip()
        assert usage in cli, f"the CLI reference lacks {path}'s usage: {usage}"
    # the Python API reference, from the docstrings
    from helios.results.compare import compare_runs
    from helios.tasks.runner import ParallelRunner

    api = _text(site / "python-api" / "index.html")
    for documented in (ParallelRunner, compare_runs):
        first = (inspect.getdoc(documented) or "").splitlines()[0].replace("`", "")
        assert first in api, f"the API page lacks {documented.__name__}'s docstring: {first}"
    # the first screen of the home page: a batch without a key, and where the outputs are
    home = _text(site / "index.html")
    assert "Run a batch without an API key" in home and "Where each output lives" in home
