"""The `helios` command: one typer app, one module per command group."""

from __future__ import annotations

import typer

from helios import __version__
from helios.cli.batch import batch_command, run_command
from helios.cli.generate import export_command, generate_command
from helios.cli.maintenance import cleanup_command
from helios.cli.tasks_check import tasks_check_command
from helios.cli.toolcalls import toolcalls_command

app = typer.Typer(
    name="helios",
    help="Run AI agents over many tasks at once, each in its own sandbox, scored by a verifier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tasks_app = typer.Typer(help="Work with task folders.", no_args_is_help=True)

app.command("run")(run_command)
app.command("batch")(batch_command)
app.command("generate")(generate_command)
app.command("export")(export_command)
app.command("cleanup")(cleanup_command)
app.command("toolcalls")(toolcalls_command)
tasks_app.command("check")(tasks_check_command)
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
