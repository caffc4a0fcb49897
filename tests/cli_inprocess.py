"""`helios ARGS` run inside the test's own process: the same typer app, its output
captured, its working folder and environment set for the call and restored after.

For CLI tests where a fresh interpreter adds nothing but its start (about a second
each). Tests of signals, of exit codes set by the process itself, of the console
script and of what a fresh process imports keep `helios_cmd` in a subprocess."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import click
from click.testing import CliRunner


def _command() -> click.Command:
    from helios.cli import app as app_module

    app = app_module.app
    if isinstance(app, click.Command):
        return app
    import typer.main

    return typer.main.get_command(app)


def helios_inprocess(*args: str, cwd: Path, env: Mapping[str, str | None] | None = None,
                     timeout: float | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """What `subprocess.run(helios_cmd(*args), capture_output=True, text=True, cwd=cwd)`
    gives, without a new process. `timeout` is accepted for symmetry and not enforced.
    `env` adds (or, with None, removes) variables for the call."""
    del timeout
    runner = CliRunner()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        result = runner.invoke(_command(), list(args), prog_name="helios", env=dict(env or {}),
                               catch_exceptions=True)  # fmt: skip
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["helios", *args], result.exit_code, result.stdout,
                                       result.stderr)  # fmt: skip
