"""The `helios` command: one typer app, one module per command group."""

from __future__ import annotations

import typer

from helios import __version__
from helios.cli.batch import batch_command, run_command
from helios.cli.compare import compare_command
from helios.cli.generate import export_command, generate_command
from helios.cli.help import ReadableCommand, ReadableGroup
from helios.cli.maintenance import cleanup_command
from helios.cli.tasks_check import tasks_check_command
from helios.cli.toolcalls import toolcalls_command
from helios.cli.view import view_command

app = typer.Typer(
    name="helios",
    cls=ReadableGroup,
    help="Run AI agents over many tasks at once, each in its own sandbox, scored by a verifier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
tasks_app = typer.Typer(
    help="Work with task folders.", no_args_is_help=True, rich_markup_mode=None, cls=ReadableGroup
)


app.command("run", cls=ReadableCommand)(run_command)
app.command("batch", cls=ReadableCommand)(batch_command)
app.command(
    "generate", cls=ReadableCommand, short_help="Turn a JSONL file of prompts into trajectories."
)(generate_command)
app.command("export", cls=ReadableCommand)(export_command)
app.command("cleanup", cls=ReadableCommand)(cleanup_command)
app.command("toolcalls", cls=ReadableCommand, short_help="Run the tool-call tests of a config.")(
    toolcalls_command
)
app.command(
    "compare", cls=ReadableCommand, short_help="Compare runs task by task (flips, pass rates)."
)(compare_command)
app.command("view", cls=ReadableCommand, short_help="Look at runs in the browser.")(view_command)
tasks_app.command("check", cls=ReadableCommand)(tasks_check_command)
app.add_typer(tasks_app, name="tasks")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"helios {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version."
    ),
) -> None:
    """Helios: run agents over tasks and prompts, in sandboxes, at scale."""


def main() -> None:
    app()
