"""Text from outside Helios made safe to show on a terminal.

A task's folder name, a dataset's prompt, a config's test id, a model's reply or
a sandbox's output may hold escape sequences: `ESC[2J` clears the screen, an OSC
sequence retitles the window or writes the clipboard, a bidi override reorders
what the reader sees. Everything such text passes through on its way to the
terminal goes through `visible`, which shows each dangerous character as a
Python-style escape (`\\x1b`, `\\u202e`) instead of sending it.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls (0x9b is an 8-bit CSI), the
#: bidi marks, embeddings, overrides and isolates, and the line and paragraph
#: separators (they break lines where the reader sees none)
_DANGEROUS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ANY = re.compile(f"[{_DANGEROUS}]")
_ONE_LINE = re.compile(f"[{_DANGEROUS}\n]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with every terminal control character shown as an escape. Tabs and
    newlines stay (`one_line=True` shows newlines too). Idempotent: the result
    holds no control character, and backslashes are left as they are."""
    return (_ONE_LINE if one_line else _ANY).sub(_shown, text)


#: escape sequences as a program writes them to colour its output: CSI (`ESC [ … final`)
#: and OSC (`ESC ] … BEL` or `ESC ] … ESC \\`)
_SEQUENCES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def one_line(text: str, limit: int = 160) -> str:
    """`text` as one short line for a terminal: colour and cursor sequences removed,
    whatever control character is left shown (`visible`), runs of white space
    collapsed, at most `limit` characters (cut with "…")."""
    shown = visible(" ".join(_SEQUENCES.sub("", text).split()), one_line=True)
    return shown if len(shown) <= limit else shown[: max(limit - 1, 0)] + "…"
