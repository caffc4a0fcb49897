"""`helios cleanup` (`helios tasks check` is in `cli.tasks_check`)."""

from __future__ import annotations

from typing import Annotated

import typer

from helios.cli.common import Interrupted, err_console, handle_errors, run_coroutine, shown
from helios.display.console import SafeConsole

console = SafeConsole()


def cleanup_command(
    run: Annotated[
        str | None, typer.Option("--run", help="Only what this run id left behind.")
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Also take sandboxes of batches that are still running."),
    ] = False,
    images: Annotated[
        bool, typer.Option("--images", help="Also remove images Helios built.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Remove leftover Helios containers and local sandboxes (and Daytona sandboxes,
    when DAYTONA_API_KEY is set).

    Without --run it skips every batch whose process is still alive (--force
    takes them too)."""
    from helios.environments.daytona import DaytonaEnvironment
    from helios.environments.daytona.client import keys as daytona_keys
    from helios.environments.docker import DockerEnvironment
    from helios.environments.docker.cleanup import remove_images
    from helios.environments.local import LocalEnvironment

    with_daytona = daytona_keys() is not None

    async def go() -> tuple[list[str], list[str], list[str], list[str]]:
        try:
            containers = await DockerEnvironment.cleanup_run(run, force=force)
        except Exception as exc:
            err_console.print(
                f"[yellow]docker skipped:[/] {shown(str(exc))}", highlight=False, soft_wrap=True
            )
            containers = []
        removed_images = await remove_images() if images else []
        sandboxes = await LocalEnvironment.cleanup_run(run, force=force)
        clouds: list[str] = []
        if with_daytona:  # by label, in the account the keys name
            try:
                clouds = await DaytonaEnvironment.cleanup_run(run, force=force)
            except Exception as exc:
                err_console.print(f"[yellow]daytona skipped:[/] {shown(str(exc))}",
                                  highlight=False, soft_wrap=True)  # fmt: skip
        return containers, removed_images, sandboxes, clouds

    try:
        containers, removed_images, sandboxes, clouds = run_coroutine(go())
    except (Exception, Interrupted) as exc:
        handle_errors(exc, debug)
    daytona = f", {len(clouds)} Daytona sandbox(es)" if with_daytona else ""
    console.print(
        f"removed {len(containers)} container(s), {len(removed_images)} image(s), "
        f"{len(sandboxes)} orphaned local sandbox(es){daytona}"
    )
