"""`helios view`: the web viewer of run folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from helios.cli.common import Interrupted, fail, run_coroutine

DEFAULT_FOLDERS = ("output", "data")


def view_command(
    folders: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run folders, or folders holding runs (searched 4 levels deep). "
            "Default: output/ and data/. Only files under these are ever served.",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on. Anything but 127.0.0.1, localhost or ::1 adds a "
            "random token to the printed URL, and every request must carry it.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="Port to listen on (0: a free port).", min=0, max=65535)
    ] = 0,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the viewer in the default web browser.")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="Write the viewer and the runs' documents into this new (or empty) folder, "
            "to open from file:// or any static host, and exit. Each run's table is whole; "
            "the first 2,000 trials of a run keep their steps and files (up to 5 MB each).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Look at runs in the browser: every door's run folders, their trials (sortable,
    filterable, live while a run is going), and each trial's steps, screenshots,
    verifier output and files.

    The first line of output is the viewer's URL. Ctrl-C stops it. With --bundle it
    writes a static copy instead, for sharing."""
    from helios.view.server import serve

    chosen = list(folders) if folders else [Path(name) for name in DEFAULT_FOLDERS]
    missing = [str(path) for path in chosen if not path.is_dir()]
    if folders and missing:
        fail(f"not a folder: {', '.join(missing)}")
    if bundle is not None:
        from helios.view.bundle import write_bundle

        try:
            runs, trials = write_bundle(chosen, bundle)
        except (FileExistsError, OSError) as exc:
            fail(str(exc))
        typer.echo(f"wrote {bundle / 'index.html'}: {runs} run(s), {trials} trial(s)")
        return
    try:
        run_coroutine(serve(chosen, host=host, port=port, open_browser=open_browser))
    except Interrupted:
        raise typer.Exit(0) from None
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
