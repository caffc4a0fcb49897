"""The working directory a Dockerfile's text gives: the fallback of the providers
that run no image (local, daytona). Docker reads the built image's own
(`SandboxSpec.workdir_from_image`), which is always right; this reading is right
for what the text alone tells:
- the final stage's WORKDIRs (a `FROM` starts again), each relative one joined onto
  the one before, as docker does (onto `/` for the first: the base image's own
  WORKDIR is not in the text);
- quotes, and `$VAR` / `${VAR}` / `${VAR:-default}` from the stage's `ARG` defaults
  and `ENV` values (an unknown variable is empty, as in docker);
- lines continued with a backslash.

What the base image sets (its WORKDIR, its ENV) is unknown here; a final stage
without a WORKDIR gives None (the caller's default).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import Path

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.DOTALL)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
#: `${NAME}`, `${NAME:-default}` (group 2: the default) or `$NAME`
_VARIABLE = re.compile(rf"\$(?:\{{({_NAME})(?::?-([^}}]*))?\}}|({_NAME}))")


def dockerfile_workdir(dockerfile: Path | None) -> str | None:
    """The final stage's working directory, or None when the text does not say."""
    if dockerfile is None or not dockerfile.is_file():
        return None
    text = dockerfile.read_text("utf-8", errors="replace")
    workdir: str | None = None
    values: dict[str, str] = {}
    for line in _instructions(text):
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        keyword, rest = match.group(1).upper(), match.group(2).strip()
        if keyword == "FROM":
            workdir, values = None, {}
        elif keyword in ("ARG", "ENV"):
            values.update(_assignments(rest, keyword, values))
        elif keyword == "WORKDIR" and rest:
            path = _expand(_unquoted(rest), values)
            workdir = posixpath.normpath(posixpath.join(workdir or "/", path))
    return workdir


def dockerfile_entrypoint(dockerfile: Path | None) -> str | None:
    """The final stage's ENTRYPOINT as its text gives it (None: none, or one that
    `ENTRYPOINT []` clears). One its base image sets is not seen here."""
    if dockerfile is None or not dockerfile.is_file():
        return None
    entrypoint: str | None = None
    for line in _instructions(dockerfile.read_text("utf-8", errors="replace")):
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        keyword, rest = match.group(1).upper(), match.group(2).strip()
        if keyword == "FROM":
            entrypoint = None
        elif keyword == "ENTRYPOINT":
            entrypoint = None if rest.replace(" ", "") in ("[]", '[""]') else rest
    return entrypoint


def _instructions(text: str) -> list[str]:
    """Lines, continuations joined, comments and blank lines left out."""
    found: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if not pending and raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        found.append(pending + raw)
        pending = ""
    if pending:
        found.append(pending)
    return [line for line in found if line.strip()]


def _unquoted(text: str) -> str:
    try:
        words = shlex.split(text, posix=True)
    except ValueError:
        return text
    return " ".join(words) if words else text


def _expand(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        known = values.get(name, "")
        return known if known or match.group(2) is None else match.group(2)

    return _VARIABLE.sub(value, text)


def _assignments(rest: str, keyword: str, values: dict[str, str]) -> dict[str, str]:
    """`ARG a=1 b` / `ENV a=1 b=2` / the legacy `ENV a 1`."""
    try:
        words = shlex.split(rest, posix=True)
    except ValueError:
        return {}
    if keyword == "ENV" and words and "=" not in words[0]:
        return {words[0]: _expand(" ".join(words[1:]), values)}
    found: dict[str, str] = {}
    for word in words:
        name, sep, value = word.partition("=")
        if sep:
            found[name] = _expand(value, {**values, **found})
        elif keyword == "ARG":
            found.setdefault(name, values.get(name, ""))
    return found
