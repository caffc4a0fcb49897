"""The README against the code: what it tells a new user to type must be what exists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main

from helios.cli.app import app

README = Path(__file__).resolve().parent.parent / "README.md"
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
    table = _section(README.read_text("utf-8"), "`helios batch DIR` options:", "\n\n`helios run")
    missing = _options("batch") - _table_flags(table)
    assert missing == set(), f"README's `helios batch` options table lacks {sorted(missing)}"


def test_the_readme_names_every_option_of_helios_run() -> None:
    # `helios run` takes batch's options (the table) and a few of its own (the next paragraph).
    text = _section(README.read_text("utf-8"), "`helios batch DIR` options:", "Exit codes:")
    named = set(OPTION.findall(text))
    missing = _options("run") - named
    assert missing == set(), f"README does not name `helios run`'s {sorted(missing)}"


# The project's work log ("issue 13's table", "this session's other two changes") means
# nothing to a user: the README, the benchmarks' README and the benchmarks' --help speak
# to users.
WORK_LOG = re.compile(r"\bissue\s+\d+|\bthe issue's|\bthis session\b|\bclosing note\b", re.I)


def test_user_facing_texts_carry_no_work_log_wording() -> None:
    import subprocess
    import sys

    root = README.parent
    texts = {
        "README.md": README.read_text("utf-8"),
        "benchmarks/README.md": (root / "benchmarks" / "README.md").read_text("utf-8"),
    }
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

    tree = _section(README.read_text("utf-8"), "output/batch_20261122_143000/", "```")
    entries = {line.split()[0].rstrip("/") for line in tree.splitlines()[1:] if line[2:3] != " "}
    kept = {store.LOCK_FILE, store.RUN_FILE, store.RESULTS_FILE, store.INCOMPLETE_DIR, SUMMARY_FILE}
    assert kept - entries == set()
