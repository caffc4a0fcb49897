"""The consoles Helios prints through: nothing but rich's own styling reaches the terminal raw.

Every string from a task, a dataset, a config, a model or a sandbox is passed
through `helios.text.visible` where it is printed (so tables keep their widths).
`SafeConsole` applies the same function to whatever is written, as a backstop for
text that reaches a renderable some other way (a summary table, a library's
message): rich measures and styles text but leaves control characters in it
(`rich.markup.escape` only escapes brackets).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from helios.text import visible


def _visible_segments(buffer: Iterable[Segment]) -> Iterator[Segment]:
    for segment in buffer:
        text, style, control = segment
        # Control segments are rich's own cursor moves (the live display's).
        yield segment if control else Segment(visible(text), style, control)


class SafeConsole(Console):
    """A rich Console that shows the control characters of the text it prints."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # The one place rich turns segments into the string it writes (15.x).
        return super()._render_buffer(_visible_segments(buffer))


def plain(text: str, style: str = "") -> Text:
    """Untrusted text for a table cell: one line, controls shown, never markup."""
    return Text(visible(text, one_line=True), style=style)


def markup_safe(text: str) -> str:
    """Untrusted text for a console markup string: one line, controls shown, brackets
    escaped."""
    return escape(visible(text, one_line=True))
