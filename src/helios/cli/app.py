"""The `helios` command: one typer app, one module per command group.

The commands are listed here by name and imported only when used
(`helios.cli.lazy_group`): `helios --help` imports none of them. To add a command,
add a `LazyCommand` to `_Helios.lazy_commands` (or `_Tasks`') pointing at its function.
"""

from __future__ import annotations

from typing import Any

import typer

from helios import __version__
from helios.cli.lazy_group import LazyCommand, LazyGroup, load_all


class _Helios(LazyGroup):
    lazy_commands = (
        LazyCommand("run", "helios.cli.batch:run_command", "Run one task and show its result."),
        LazyCommand(
            "batch",
            "helios.cli.batch:batch_command",
            "Run every task under TASKS_DIR, k attempts each, n at a time.",
        ),
        LazyCommand(
            "rerun",
            "helios.cli.rerun:rerun_command",
            "Run a task run again, in a new folder, with the settings it saved.",
        ),
        LazyCommand(
            "generate",
            "helios.cli.generate:generate_command",
            "Turn a JSONL file of prompts into trajectories.",
            own_line=True,
        ),
        LazyCommand(
            "export",
            "helios.cli.export:export_command",
            "Export a run for training, or as a Harbor job folder.",
        ),
        LazyCommand(
            "cleanup",
            "helios.cli.maintenance:cleanup_command",
            "Remove leftover Helios containers and local sandboxes (and Daytona sandboxes,"
            "\nwhen DAYTONA_API_KEY is set).",
        ),
        LazyCommand(
            "toolcalls",
            "helios.cli.toolcalls:toolcalls_command",
            "Run the tool-call tests of a config.",
            own_line=True,
        ),
        LazyCommand(
            "compare",
            "helios.cli.compare:compare_command",
            "Compare runs task by task (flips, pass rates).",
            own_line=True,
        ),
        LazyCommand(
            "view",
            "helios.cli.view:view_command",
            "Look at runs in the browser.",
            own_line=True,
        ),
    )


class _Tasks(LazyGroup):
    lazy_commands = (
        LazyCommand(
            "check",
            "helios.cli.tasks_check:tasks_check_command",
            "Check tasks: the oracle must reach 1.0 and nop must stay below it.",
        ),
        LazyCommand(
            "list",
            "helios.cli.tasks_list:tasks_list_command",
            "List the tasks a batch would run (name, path, tags, difficulty); runs nothing.",
        ),
    )


class _Config(LazyGroup):
    lazy_commands = (
        LazyCommand(
            "show",
            "helios.cli.rerun:config_show_command",
            "Print the settings a run saved, as a job file (YAML) that runs it again.",
        ),
    )


class _Cache(LazyGroup):
    lazy_commands = (
        LazyCommand("stats", "helios.cli.cache:cache_stats_command",
                    "Show where the response cache is, its entries and its size against its cap."),
        LazyCommand("clear", "helios.cli.cache:cache_clear_command",
                    "Remove every entry of the response cache."),
        LazyCommand("show", "helios.cli.cache:cache_show_command",
                    "Explain an entry: what went into its key, and the answer it holds."),
    )  # fmt: skip


app = typer.Typer(
    name="helios",
    cls=_Helios,
    help="Run AI agents over many tasks at once, each in its own sandbox, scored by a verifier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
tasks_app = typer.Typer(
    help="Work with task folders.", no_args_is_help=True, rich_markup_mode=None, cls=_Tasks
)
app.add_typer(tasks_app, name="tasks")
config_app = typer.Typer(
    help="Work with the settings runs saved.", no_args_is_help=True, rich_markup_mode=None,
    cls=_Config,
)  # fmt: skip
app.add_typer(config_app, name="config")
cache_app = typer.Typer(
    help="The response cache of --cache: stats, clear, show KEY.", no_args_is_help=True,
    rich_markup_mode=None, cls=_Cache,
)  # fmt: skip
app.add_typer(cache_app, name="cache")


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


def command_tree() -> Any:
    """The whole `helios` click command, every command imported: what the CLI
    reference is generated from (`typer.main.get_command(app)` gives the same tree,
    each command imported when first read)."""
    return load_all(typer.main.get_command(app))


def main() -> None:
    app()
