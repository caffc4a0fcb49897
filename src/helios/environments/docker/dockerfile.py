"""What a Dockerfile asks of its builder, and the copy of it that an older or
offline BuildKit can build.

Two things stop an ordinary BuildKit-era Dockerfile here: a `# syntax=` line names a
frontend image on Docker Hub (unreachable offline), and heredocs (`RUN <<EOF`) need a
Dockerfile frontend newer than the one built into engines before Docker 23. `derive`
drops a `docker/dockerfile` syntax line (the built-in frontend then reads the file)
and turns each `RUN` heredoc into the shell command it stands for, so the file builds
with what the engine has. The user's file is never changed: the builder reads the
copy with `-f`. `buildkit_features` names what the classic builder cannot do, for a
one-line error. Tested by tests/test_docker_buildkit.py."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: `# syntax=docker/dockerfile:1.7` (any tag or digest, with or without docker.io/):
#: the official frontend, whose features the built-in one largely has
_SYNTAX = re.compile(r"^#\s*syntax\s*=\s*(?:docker\.io/)?docker/dockerfile(?::[\w.+-]+)?"
                     r"(?:@sha256:[0-9a-f]+)?\s*$", re.IGNORECASE)  # fmt: skip
_ANY_SYNTAX = re.compile(r"^#\s*syntax\s*=\s*(\S+)", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^#\s*\w+\s*=")
#: a heredoc operator `<<EOF`, `<<-EOF`, `<<"EOF"`, never a here-string `<<<`
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)(\s+|$)(.*)$")
_FLAG = re.compile(r"--[a-z-]+(?:=\S*)?\s+")

#: the features of BuildKit's Dockerfile that the classic builder refuses, by the
#: pattern that finds them in one instruction
_FEATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("`# syntax=`", re.compile(r"^#\s*syntax\s*=", re.IGNORECASE)),
    ("`COPY --chmod`", re.compile(r"^\s*(COPY|ADD)\s+(--\S+\s+)*--chmod", re.IGNORECASE)),
    ("`COPY --link`", re.compile(r"^\s*(COPY|ADD)\s+(--\S+\s+)*--link", re.IGNORECASE)),
    ("`RUN --mount`", re.compile(r"^\s*RUN\s+(--\S+\s+)*--mount", re.IGNORECASE)),
    ("`RUN --network`", re.compile(r"^\s*RUN\s+(--\S+\s+)*--network", re.IGNORECASE)),
    ("`RUN --security`", re.compile(r"^\s*RUN\s+(--\S+\s+)*--security", re.IGNORECASE)),
    ("a heredoc (`<<EOF`)", re.compile(r"^\s*(RUN|COPY|ADD)\s.*(?<!<)<<(?!<)-?[\"']?\w",
                                       re.IGNORECASE)),
)  # fmt: skip


@dataclass(frozen=True)
class Feature:
    """A BuildKit-only feature, and the line of the Dockerfile that uses it."""

    name: str
    line: int


def buildkit_features(text: str) -> list[Feature]:
    """The BuildKit-only features `text` uses, in order, each at its first line."""
    found: dict[str, int] = {}
    in_directives = True
    for number, line in enumerate(text.splitlines(), 1):
        in_directives = in_directives and bool(_DIRECTIVE.match(line))
        for name, pattern in _FEATURES:
            if name == "`# syntax=`" and not in_directives:
                continue
            if name not in found and pattern.search(line):
                found[name] = number
    return [Feature(name, line) for name, line in sorted(found.items(), key=lambda f: f[1])]


def syntax_frontend(text: str) -> str | None:
    """The frontend image that a `# syntax=` directive names, if any."""
    for line in text.splitlines():
        if not _DIRECTIVE.match(line):
            break
        match = _ANY_SYNTAX.match(line)
        if match:
            return match.group(1)
    return None


def has_heredoc(text: str) -> bool:
    return any(_is_heredoc_run(line) for line in text.splitlines())


def derive(text: str) -> str | None:
    """`text` with an official `# syntax=` line dropped and each `RUN` heredoc
    rewritten as the shell command it stands for; None if that changes nothing."""
    lines = text.splitlines()
    out: list[str] = []
    changed = False
    in_directives = True
    shell = ["/bin/sh", "-c"]
    i = 0
    while i < len(lines):
        line = lines[i]
        in_directives = in_directives and bool(_DIRECTIVE.match(line))
        if in_directives and _SYNTAX.match(line):
            changed = True
            out.append("# (syntax line dropped by Helios: the built-in frontend reads this file)")
            i += 1
            continue
        instruction = _INSTRUCTION.match(line)
        keyword = instruction.group(1).upper() if instruction else ""
        if keyword == "FROM":
            shell = ["/bin/sh", "-c"]
        elif keyword == "SHELL" and instruction:
            shell = _shell_of(instruction.group(3)) or shell
        if _is_heredoc_run(line):
            rewritten, i = _rewrite_run(lines, i, shell)
            out.append(rewritten)
            changed = True
            continue
        out.append(line)
        i += 1
    return "\n".join(out) + "\n" if changed else None


def _shell_of(args: str) -> list[str] | None:
    try:
        value = json.loads(args)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def _is_heredoc_run(line: str) -> bool:
    instruction = _INSTRUCTION.match(line)
    return bool(instruction and instruction.group(1).upper() == "RUN"
                and _HEREDOC.search(instruction.group(3)))  # fmt: skip


def _rewrite_run(lines: list[str], start: int, shell: list[str]) -> tuple[str, int]:
    """The `RUN` at `lines[start]` with its heredoc bodies, as one exec-form `RUN`,
    and the index of the line after its last body."""
    instruction = _INSTRUCTION.match(lines[start])
    assert instruction is not None
    rest = instruction.group(3)
    flags = ""
    while match := _FLAG.match(rest):
        flags += match.group(0)
        rest = rest[match.end() :]
    bodies: list[tuple[str, bool, list[str]]] = []
    i = start + 1
    for heredoc in _HEREDOC.finditer(rest):
        strip_tabs, word = heredoc.group(1) == "-", heredoc.group(3)
        body: list[str] = []
        while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != word:
            body.append(lines[i])
            i += 1
        i += 1  # the closing word
        bodies.append((word, strip_tabs, body))
    only = _HEREDOC.fullmatch(rest.strip())
    if only and len(bodies) == 1:
        # `RUN <<EOF`: the body is the script (a shebang: a program to run)
        word, strip_tabs, body = bodies[0]
        if strip_tabs:
            body = [b.lstrip("\t") for b in body]
        script = "\n".join(body)
        if body and body[0].startswith("#!"):
            script = (f"f=$(mktemp) && cat > \"$f\" <<'{word}'\n{script}\n{word}\n"
                      'chmod +x "$f" && "$f"; s=$?; rm -f "$f"; exit $s')  # fmt: skip
    else:
        # `RUN python3 <<EOF`, `RUN cat <<EOF > f`: the line and its bodies are one
        # shell script, as BuildKit runs them
        parts = [rest]
        for word, _, body in bodies:
            parts += [*body, word]
        script = "\n".join(parts)
    return f"RUN {flags}{json.dumps([*shell, script])}", i
