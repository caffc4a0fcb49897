"""`--help` that reads at 80 columns: click's plain layout, with names for values.

typer (0.29) shows each value as `<str>`, `<int range>` or `{tasks_dir}`, and its
rich layout cuts long help at the panel's edge (the default model was cut to
`anthropic/claude-sonne…` at 80 columns). Every command here uses click's plain
layout (`rich_markup_mode=None`), with:
- a value's name in capitals (`TASKS_DIR`, `-n N`, `--model TEXT`, `-o PATH`);
- help text wrapped at spaces only, never inside a value such as a model name
  (`anthropic/claude-sonnet-4-5`) or a flag (`--num-workers`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from typer.core import TyperCommand, TyperGroup

#: the click typer runs on (typer 0.29 carries its own copy): its context and formatter
_Context: Any = TyperCommand.context_class
_Formatter: Any = _Context.formatter_class

#: a value's type → its name in help (anything else: TEXT)
_TYPE_NAMES: dict[Any, str] = {Path: "PATH", int: "N", float: "NUMBER", str: "TEXT"}
_CLICK_TYPE_NAMES = {"path": "PATH", "integer": "N", "integer range": "N", "float": "NUMBER",
                     "float range": "NUMBER"}  # fmt: skip


def _value_name(param: Any) -> str:
    descriptor = getattr(param, "type_descriptor", None)  # typer >= 0.29
    if descriptor is not None:
        return _TYPE_NAMES.get(descriptor.annotation, "TEXT")
    return _CLICK_TYPE_NAMES.get(getattr(param.type, "name", ""), "TEXT")


def _name_values(params: Iterable[Any]) -> None:
    """Give every parameter without a metavar a readable one."""
    for param in params:
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            _name_argument(param)
        elif not (param.is_flag or param.count):
            param.metavar = _value_name(param)


def _name_argument(param: Any) -> None:
    """`TASKS_DIR` in the usage line and the help, as click writes it (typer 0.29
    writes `{tasks_dir}` and `tasks_dir <path>`; its argument class is not ours
    to choose, so this instance's two display methods are replaced)."""
    name = param.metavar = (param.name or "value").upper()
    if param.nargs == -1:  # any number of values: `RUNS...`
        name += "..."
    usage = name if param.required else f"[{name}]"
    if hasattr(param, "_usage_display_name"):
        param._usage_display_name = lambda: usage
    if hasattr(param, "display_type_rich"):
        param.display_type_rich = lambda ctx: None


class ReadableFormatter(_Formatter):  # type: ignore[misc]
    """click's formatter, except that help text breaks at spaces only."""

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        rows = list(rows)
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        indent = " " * (first_col + self.current_indent)
        text_width = max(self.width - first_col - 2, 10)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + indent)
            lines = textwrap.wrap(
                " ".join(second.split()), text_width,
                break_on_hyphens=False, break_long_words=False,
            )  # fmt: skip
            self.write(lines[0] + "\n" if lines else "\n")
            for line in lines[1:]:
                self.write(f"{indent}{line}\n")


class ReadableContext(_Context):  # type: ignore[misc]
    formatter_class = ReadableFormatter


class ReadableCommand(TyperCommand):
    context_class = ReadableContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_values(self.params)


class ReadableGroup(TyperGroup):
    context_class = ReadableContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_values(self.params)
