"""MkDocs hook: the CLI reference page, written from the `helios` typer app at build time.

`docs/cli.md` holds the marker `<!-- cli-reference -->`; this hook replaces it with one
section per command (the commands of groups included, e.g. `helios tasks check`), each
with its `--help` exactly as the command prints it at 80 columns. The page is made from
the app itself, so it cannot drift from it.

The tree is walked through click's own interface (`list_commands` / `get_command`), which
a group that loads its commands lazily also answers, so no command is missed for not
having been imported yet.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- cli-reference -->"
PAGE = "cli.md"
WIDTH = 80


def _app_command() -> Any:
    """The click command behind `helios` (typer builds it from the app)."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    import typer.main

    from helios.cli.app import app

    return typer.main.get_command(app)


def _context(command: Any, name: str, parent: Any | None) -> Any:
    return command.context_class(
        command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
    )


def walk(
    command: Any, name: str = "helios", parent: Any | None = None
) -> list[tuple[str, str, str]]:
    """(full name, one-line summary, --help text) for the command and everything under it."""
    ctx = _context(command, name, parent)
    path = ctx.command_path
    found = [(path, command.get_short_help_str(limit=200), command.get_help(ctx))]
    if hasattr(command, "list_commands"):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is None or getattr(child, "hidden", False):
                continue
            found.extend(walk(child, sub, ctx))
    return found


def reference() -> str:
    """The Markdown of the reference: an index of the commands, then a section each."""
    commands = walk(_app_command())
    lines = ["| command | what it does |", "|---|---|"]
    for path, summary, _ in commands[1:]:
        anchor = path.replace(" ", "-")
        lines.append(f"| [`{path}`](#{anchor}) | {summary} |")
    for path, _, text in commands:
        anchor = path.replace(" ", "-")
        lines += ["", f"## `{path}` {{ #{anchor} }}", "", "```text", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lacks the marker {MARKER}")
    return markdown.replace(MARKER, reference())
