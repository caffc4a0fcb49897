"""The README and the docs against the code: what they tell a new user to type must be what
exists, and the README stays a short front page that points into the docs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main

from helios.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: the page with `helios batch`'s options table and `helios run`'s own options
GETTING_STARTED = DOCS / "getting-started.md"
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _section(text: str, start: str, end: str) -> str:
    """The README's text from the line holding `start` to the next line holding `end`."""
    head = text.index(start)
    return text[head : text.index(end, head + len(start))]


def _options(command: str) -> set[str]:
    """Every flag (long and short) of `helios COMMAND`, but --help."""
    group: Any = typer.main.get_command(app)  # typer vendors its click: no isinstance
    found: set[str] = set()
    for param in group.commands[command].params:
        if param.param_type_name == "option" and not param.hidden:
            found.update(param.opts, param.secondary_opts)
    return found - {"--help"}


def _table_flags(table: str) -> set[str]:
    """The flags named in the first cell of each row of a Markdown table."""
    cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {flag for cell in cells for flag in OPTION.findall(cell)}


def test_the_options_table_names_every_option_of_helios_batch() -> None:
    text = GETTING_STARTED.read_text("utf-8")
    table = _section(text, "`helios batch DIR` options:", "\n\n`helios run")
    missing = _options("batch") - _table_flags(table)
    assert missing == set(), f"the docs' `helios batch` options table lacks {sorted(missing)}"


def test_the_docs_name_every_option_of_helios_run() -> None:
    # `helios run` takes batch's options (the table) and a few of its own (the next paragraph).
    page = GETTING_STARTED.read_text("utf-8")
    text = _section(page, "`helios batch DIR` options:", "Exit codes:")
    named = set(OPTION.findall(text))
    missing = _options("run") - named
    assert missing == set(), f"the docs do not name `helios run`'s {sorted(missing)}"


# The project's work log ("issue 13's table", "this session's other two changes") means
# nothing to a user: the README, the docs, the benchmarks' README and the benchmarks' --help
# speak to users.
WORK_LOG = re.compile(r"\bissue\s+\d+|\bthe issue's|\bthis session\b|\bclosing note\b", re.I)


def test_user_facing_texts_carry_no_work_log_wording() -> None:
    import subprocess
    import sys

    root = README.parent
    texts = {
        "README.md": README.read_text("utf-8"),
        "benchmarks/README.md": (root / "benchmarks" / "README.md").read_text("utf-8"),
    }
    for page in sorted(DOCS.rglob("*.md")):
        texts[str(page.relative_to(root))] = page.read_text("utf-8")
    for script in ("run.py", "desktop.py", "toolcalls.py"):
        shown = subprocess.run(
            [sys.executable, str(root / "benchmarks" / script), "--help"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        texts[f"benchmarks/{script} --help"] = shown.stdout
    found = {name: WORK_LOG.findall(text) for name, text in texts.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_output_tree_names_every_file_the_store_keeps_in_a_run_folder() -> None:
    from helios.engine import store
    from helios.tasks.runner import SUMMARY_FILE

    page = (DOCS / "outputs.md").read_text("utf-8")
    tree = _section(page, "output/batch_20261122_143000/", "```")
    entries = {line.split()[0].rstrip("/") for line in tree.splitlines()[1:] if line[2:3] != " "}
    kept = {store.LOCK_FILE, store.RUN_FILE, store.RESULTS_FILE, store.INCOMPLETE_DIR, SUMMARY_FILE}
    assert kept - entries == set()


# The README is the front page: what Helios is, install, the two commands, a tour, links.
README_MAX_LINES = 200
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_a_short_front_page() -> None:
    text = README.read_text("utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Install", "## The two commands", "## A five-minute tour, without a key", "## The docs",
    ]  # fmt: skip


def test_every_page_the_readme_links_to_exists_and_every_docs_page_is_linked() -> None:
    targets = {t for t in LINK.findall(README.read_text("utf-8")) if "://" not in t}
    assert [t for t in sorted(targets) if not (ROOT / t).exists()] == []
    pages = {str(p.relative_to(ROOT)) for p in DOCS.glob("*.md")}
    # every top-level page is on the README's map (the design notes through architecture.md)
    assert pages - targets == set()


def test_extras_are_installed_from_the_checkout() -> None:
    # Helios is not on the package index: `pip install 'helios-harness[x]'` cannot work.
    texts = [README, *sorted(DOCS.rglob("*.md"))]
    wrong = [str(p.relative_to(ROOT)) for p in texts if "helios-harness[" in p.read_text("utf-8")]
    assert wrong == []
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    table = _section(GETTING_STARTED.read_text("utf-8"), "| extra |", "\n\n")
    named = {cell.strip("` ") for cell in re.findall(r"^\| (`\w+`)", table, re.M)}
    assert extras - {"dev"} <= named
