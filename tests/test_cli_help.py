"""Every command's `--help` reads at 80 columns: names for values, nothing cut."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from helios.cli.app import app
from helios.models.routing import DEFAULT_MODEL, openrouter_name

#: typer's placeholders: `<str>`, `<int range>`, `{tasks_dir}`
PLACEHOLDER = re.compile(r"<(bool|str|int|float|path)[^>]*>|\{[a-z_]+\}")


def _commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    paths: list[list[str]] = [[]]
    for name, command in group.commands.items():
        paths.append([name])
        for sub in getattr(command, "commands", {}):
            paths.append([name, sub])
    return paths


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("args", _commands(), ids=lambda args: " ".join(args) or "helios")
def test_help_is_readable_at_80_columns(args: list[str]) -> None:
    text = _help(args)
    for line in text.splitlines():
        assert len(line) <= 80, line
        assert not PLACEHOLDER.search(line), line
        # rich's cut (`anthropic/claude-sonne…`), or a value split at a hyphen
        assert not re.search(r"\w…$", line), line
        assert not re.search(r"\w-$", line), line
    assert "Usage:" in text


def test_help_shows_the_default_model_whole() -> None:
    assert DEFAULT_MODEL in _help(["batch"])
    assert DEFAULT_MODEL in _help(["run"])
    generate = _help(["generate"])
    assert openrouter_name(DEFAULT_MODEL) in generate and DEFAULT_MODEL in generate


def test_generate_help_marks_its_required_flags() -> None:
    entries = re.split(r"\n(?=  -)", _help(["generate"]))  # one per option
    for flag in ("--dataset_file", "--batch_size", "--run_name"):
        (entry,) = [e for e in entries if e.lstrip().startswith(flag + ",")]
        assert "Required" in entry, entry


def test_arguments_are_named_in_capitals() -> None:
    usage = _help(["batch"]).splitlines()[0]
    assert usage.endswith("[OPTIONS] [TASKS_DIR]") or usage.endswith("[OPTIONS] TASKS_DIR")
