"""A run's name and tags: what a person calls a run and how they sort runs.

`helios batch|run|generate|toolcalls --name NAME --tag key=value ...` keeps them in
`run.json` (`"name"`, `"tags"`); `helios view` shows them and `helios compare` selects
and groups runs by tag. They label a run and never change its results, so they are no
part of its identity: a resume keeps them (and a resume that names them again
relabels the run).

What is accepted on the command line:
- a name: 1 to MAX_NAME printable characters (no control character, no newline),
  not only spaces;
- a tag: `key=value`, the key an identifier (a letter or `_`, then letters, digits,
  `_`, `.` or `-`; at most MAX_KEY), the value printable, at most MAX_VALUE; at
  most MAX_TAGS tags. A key given twice keeps its last value.

A run folder is shared input, so `read_labels` takes what run.json holds without
trusting it: a name or tags of the wrong type are left out with one line saying so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from helios.errors import ConfigError

MAX_NAME = 100
MAX_KEY = 64
MAX_VALUE = 200
MAX_TAGS = 32
#: characters a name keeps in a folder's name; any run of others becomes one `-`
_FOLDER_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
#: the longest folder name stem a name gives (before `_YYYYMMDD_HHMMSS`)
MAX_STEM = 48


@dataclass(frozen=True)
class RunLabels:
    """A run's name (None: unnamed) and its tags."""

    name: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.name is not None or bool(self.tags)

    def recorded(self) -> dict[str, Any]:
        """The keys run.json holds (none for an unnamed, untagged run)."""
        kept: dict[str, Any] = {}
        if self.name is not None:
            kept["name"] = self.name
        if self.tags:
            kept["tags"] = dict(self.tags)
        return kept

    def folder_stem(self) -> str | None:
        """What the run's folder is named after (`<stem>_YYYYMMDD_HHMMSS`), or None."""
        if self.name is None:
            return None
        stem = _FOLDER_UNSAFE.sub("-", self.name).strip("-.")[:MAX_STEM].strip("-.")
        return stem or None


def _printable(text: str) -> bool:
    return text.isprintable()


def check_name(name: str) -> str:
    """`name` if it is a run name, else ConfigError (one line, naming --name)."""
    if not name.strip():
        raise ConfigError("a run's name cannot be empty", field="--name")
    if len(name) > MAX_NAME:
        raise ConfigError(
            f"a run's name is at most {MAX_NAME} characters, not {len(name)}", field="--name"
        )
    if not _printable(name):
        raise ConfigError(
            f"a run's name must be printable (no control characters): {name[:40]!r}",
            field="--name",
        )
    return name


def parse_tag(text: str) -> tuple[str, str]:
    """`key=value` as (key, value), else ConfigError (one line, naming --tag)."""
    key, equals, value = text.partition("=")
    if not equals:
        raise ConfigError(f"a tag is key=value, not {text[:40]!r}", field="--tag")
    if len(key) > MAX_KEY or not _KEY.fullmatch(key):
        raise ConfigError(
            f"a tag's key is an identifier of at most {MAX_KEY} characters (letters, digits, "
            f"_ . -; not starting with a digit): {key[:40]!r}",
            field="--tag",
        )
    if len(value) > MAX_VALUE:
        raise ConfigError(
            f"tag {key}: a value is at most {MAX_VALUE} characters, not {len(value)}",
            field="--tag",
        )
    if not _printable(value):
        raise ConfigError(
            f"tag {key}: a value must be printable (no control characters): {value[:40]!r}",
            field="--tag",
        )
    return key, value


def labels_of(name: str | None, tags: Iterable[str] | None) -> RunLabels:
    """The labels given on a command line, checked (ConfigError: one line)."""
    parsed = dict(parse_tag(tag) for tag in tags or ())
    if len(parsed) > MAX_TAGS:
        raise ConfigError(f"at most {MAX_TAGS} tags, not {len(parsed)}", field="--tag")
    return RunLabels(name=None if name is None else check_name(name), tags=parsed)


def checked(labels: RunLabels) -> RunLabels:
    """`labels` built in Python (`TaskBatchSettings(labels=…)`), checked as the command
    line's are (ConfigError: one line)."""
    return labels_of(labels.name, [f"{key}={value}" for key, value in labels.tags.items()])


def read_labels(meta: Mapping[str, Any]) -> tuple[RunLabels, list[str]]:
    """The labels a run.json holds, and one line per field left out because it is
    not what Helios writes (a hand-edited or hostile folder). A long name or value is
    cut, never refused: the run is still shown."""
    problems: list[str] = []
    name = meta.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(f"field name: expected a string, got {type(name).__name__}; ignored")
        name = None
    if isinstance(name, str):
        name = name[:MAX_NAME]
    tags: dict[str, str] = {}
    raw = meta.get("tags")
    if raw is not None and not isinstance(raw, dict):
        problems.append(f"field tags: expected an object, got {type(raw).__name__}; ignored")
    elif isinstance(raw, dict):
        bad = 0
        for key, value in raw.items():
            if isinstance(value, str) and len(tags) < MAX_TAGS:
                tags[str(key)[:MAX_KEY]] = value[:MAX_VALUE]
            else:
                bad += 1
        if bad:
            problems.append(f"field tags: {bad} tag(s) not a string (or past {MAX_TAGS}); ignored")
    return RunLabels(name=name, tags=tags), problems
