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
import shlex
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
    return any(_heredoc_keyword(line) for line in text.splitlines())


def derive(text: str) -> str | None:
    """`text` with an official `# syntax=` line dropped and each `RUN` or `COPY`
    heredoc rewritten as the shell command it stands for; None if that changes
    nothing. Line numbers stay those of `text` up to the first heredoc."""
    lines = text.splitlines()
    out: list[str] = []
    changed = False
    shell = ["/bin/sh", "-c"]
    i = 0
    dropped = 0
    while i < len(lines) and _DIRECTIVE.match(lines[i]):
        if _SYNTAX.match(lines[i]):
            dropped += 1  # a comment here would end the directives: it goes after them
        else:
            out.append(lines[i])
        i += 1
    if dropped:
        changed = True
        out += ["# (a `# syntax=` line dropped by Helios: the built-in frontend reads this)"]
        out += [""] * (dropped - 1)
    while i < len(lines):
        line = lines[i]
        instruction = _INSTRUCTION.match(line)
        keyword = instruction.group(1).upper() if instruction else ""
        if keyword == "FROM":
            shell = ["/bin/sh", "-c"]
        elif keyword == "SHELL" and instruction:
            shell = _shell_of(instruction.group(3)) or shell
        heredoc = _heredoc_keyword(line)
        if heredoc == "RUN":
            rewritten, i = _rewrite_run(lines, i, shell)
        elif heredoc == "COPY":
            rewritten, i = _rewrite_copy(lines, i)
        else:
            out.append(line)
            i += 1
            continue
        out.append(rewritten)
        changed = True
    return "\n".join(out) + "\n" if changed else None


def _shell_of(args: str) -> list[str] | None:
    try:
        value = json.loads(args)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def _heredoc_keyword(line: str) -> str | None:
    """RUN or COPY (ADD too) when `line` is one with a heredoc, else None."""
    instruction = _INSTRUCTION.match(line)
    if not instruction or not _HEREDOC.search(instruction.group(3)):
        return None
    keyword = instruction.group(1).upper()
    return {"RUN": "RUN", "COPY": "COPY", "ADD": "COPY"}.get(keyword)


def _split_flags(rest: str) -> tuple[str, str]:
    flags = ""
    while match := _FLAG.match(rest):
        flags += match.group(0)
        rest = rest[match.end() :]
    return flags, rest


def _bodies(
    lines: list[str], start: int, rest: str
) -> tuple[list[tuple[str, bool, list[str]]], int]:
    """The heredocs of `rest` (the instruction at `lines[start]`): each one's word,
    whether it strips tabs, and its body; and the index of the line after them."""
    bodies: list[tuple[str, bool, list[str]]] = []
    i = start + 1
    for heredoc in _HEREDOC.finditer(rest):
        strip_tabs, word = heredoc.group(1) == "-", heredoc.group(3)
        body: list[str] = []
        while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != word:
            body.append(lines[i].lstrip("\t") if strip_tabs else lines[i])
            i += 1
        bodies.append((word, strip_tabs, body))
        i += 1  # the closing word
    return bodies, i


def _rewrite_copy(lines: list[str], start: int) -> tuple[str, int]:
    """`COPY <<EOF /dest` as a `RUN` that writes the file (with its `--chmod` and
    `--chown`); the other flags (`--link`) change nothing a file's bytes."""
    instruction = _INSTRUCTION.match(lines[start])
    assert instruction is not None
    flags, rest = _split_flags(instruction.group(3))
    bodies, end = _bodies(lines, start, rest)
    dest = _HEREDOC.sub("", rest).split()
    mode = re.search(r"--chmod=(\S+)", flags)
    owner = re.search(r"--chown=(\S+)", flags)
    steps: list[str] = []
    for (word, _, body), heredoc in zip(bodies, _HEREDOC.finditer(rest), strict=True):
        target = dest[-1] if dest else "."
        if target.endswith("/") or len(bodies) > 1:
            target = target.rstrip("/") + "/" + word
        quoted = shlex.quote(target)
        steps.append(f'mkdir -p "$(dirname {quoted})" && cat > {quoted} <<{heredoc.group(2)}'
                     f"{word}{heredoc.group(2)}\n" + "\n".join(body) + f"\n{word}")  # fmt: skip
        if mode:
            steps.append(f"chmod {shlex.quote(mode.group(1))} {quoted}")
        if owner:
            steps.append(f"chown {shlex.quote(owner.group(1))} {quoted}")
    return f"RUN {json.dumps(['/bin/sh', '-c', chr(10).join(steps)])}", end


def _rewrite_run(lines: list[str], start: int, shell: list[str]) -> tuple[str, int]:
    """The `RUN` at `lines[start]` with its heredoc bodies, as one exec-form `RUN`,
    and the index of the line after its last body."""
    instruction = _INSTRUCTION.match(lines[start])
    assert instruction is not None
    flags, rest = _split_flags(instruction.group(3))
    bodies, end = _bodies(lines, start, rest)
    if _HEREDOC.fullmatch(rest.strip()) and len(bodies) == 1:
        # `RUN <<EOF`: the body is the script (a shebang: a program to run)
        word, _, body = bodies[0]
        script = "\n".join(body)
        if body and body[0].startswith("#!"):
            script = (f"f=$(mktemp) && cat > \"$f\" <<'{word}'\n{script}\n{word}\n"
                      'chmod +x "$f" && "$f"; s=$?; rm -f "$f"; exit $s')  # fmt: skip
    else:
        # `RUN python3 <<EOF`, `RUN cat <<EOF > f`: the line and its bodies are one
        # shell script, as BuildKit runs them (tabs already stripped for `<<-`)
        parts = [_HEREDOC.sub(lambda m: "<<" + m.group(2) + m.group(3) + m.group(2), rest)]
        for word, _, body in bodies:
            parts += [*body, word]
        script = "\n".join(parts)
    return f"RUN {flags}{json.dumps([*shell, script])}", end
