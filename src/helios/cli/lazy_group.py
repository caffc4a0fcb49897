"""Command groups whose commands are imported only when used, so `helios --help`
starts at once.

A command module imports what its command runs (the engine, the sandboxes, the
viewer...), which takes a second. The group knows each command's name and the line
`--help` lists for it without importing anything; the module is imported when the
command is invoked or its own `--help` is asked.

`group.commands` stays the whole tree for whoever walks it (the CLI reference, the
tests): reading a command there imports it, listing the names does not.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand

from helios.cli.help import ReadableCommand, ReadableGroup

#: a click command (typer carries its own copy of click: no public class to name)
Command = Any


@dataclass(frozen=True)
class LazyCommand:
    """One command of a group, known without importing its module.

    - `target`: "module:function", the typer command function;
    - `line`: what the command list shows for it. Either the first paragraph of the
      function's docstring, which click shortens to the list's width, or, with
      `own_line`, a line of its own (typer's `short_help`) shown as is. A test
      checks it against the loaded command.
    """

    name: str
    target: str
    line: str
    own_line: bool = False

    def load(self) -> Command:
        """Import the module and build the click command, as `app.command(...)` would."""
        module, _, function = self.target.partition(":")
        callback = getattr(import_module(module), function)
        one = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False,
                          add_completion=False)  # fmt: skip
        short_help = self.line if self.own_line else None
        one.command(self.name, cls=ReadableCommand, short_help=short_help)(callback)
        return typer.main.get_command(one)

    def stub(self) -> Command:
        """A stand-in that lists like the command and runs nothing."""
        if self.own_line:
            return TyperCommand(name=self.name, short_help=self.line)
        return TyperCommand(name=self.name, help=self.line)


class LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name, the lazy ones imported on first read."""

    def __init__(self, lazy: tuple[LazyCommand, ...], loaded: MutableMapping[str, Command]) -> None:
        self._lazy = {entry.name: entry for entry in lazy}
        # the declared order first, then what typer added (sub-groups)
        self._order = [*self._lazy, *(name for name in loaded if name not in self._lazy)]
        self._loaded = dict(loaded)

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded

    def listing(self, name: str) -> Command:
        """The command if it is loaded, else its stand-in (nothing imported)."""
        if name in self._loaded:
            return self._loaded[name]
        return self._lazy[name].stub()

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            if name not in self._lazy:
                raise KeyError(name)
            self._loaded[name] = self._lazy[name].load()
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        if name not in self._order:
            self._order.append(name)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._order:
            raise KeyError(name)
        self._order.remove(name)
        self._lazy.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)


class LazyGroup(ReadableGroup):
    """A typer group (`typer.Typer(cls=...)`) with the commands of `lazy_commands`.

    Subclass it and set `lazy_commands`; typer's own commands and sub-groups
    (`add_typer`) come after them in the list.
    """

    lazy_commands: ClassVar[tuple[LazyCommand, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: LazyCommands = LazyCommands(self.lazy_commands, self.commands)
        self._listing = False  # writing the command list: stand-ins, no imports

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # typer's reads every command; the names suffice

    def get_command(self, ctx: Any, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands:
            return None
        if self._listing:
            return self.commands.listing(cmd_name)
        return self.commands[cmd_name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list, each line from the stand-in of a command not loaded."""
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


def load_all(command: Command) -> Command:
    """`command` with every command under it imported (recursively): the whole
    click tree, for the CLI reference and for tests that read every command."""
    for name in list(getattr(command, "commands", {})):
        load_all(command.commands[name])
    return command
