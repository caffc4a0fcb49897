"""Agent skills (Harbor's `[environment] skills_dir`): folders inside the sandbox,
each with a `SKILL.md` whose YAML front matter names it and says what it is for.
The tool agent lists them (name, description, path) in its system prompt; their
files are read in the sandbox like any other, with the agent's own tools."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helios.environments.base import Environment

#: skills listed at most, and the bounds on what one says about itself
MAX_SKILLS = 100
MAX_DESCRIPTION_CHARS = 1000
_HEAD_BYTES = 8192
_SEPARATOR = "\x1e@@helios-skill@@"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    #: the skill's SKILL.md inside the sandbox
    path: str


def parse_front_matter(text: str) -> dict[str, object]:
    """The YAML between the leading `---` lines of a SKILL.md ({} without one)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    for end, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            import yaml  # a task with skills only: the tool agent's runs import no YAML

            try:
                data = yaml.safe_load("\n".join(lines[1:end]))
            except yaml.YAMLError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


async def find_skills(env: Environment, skills_dir: str, workdir: str) -> list[Skill]:
    """The skills in the sandbox's `skills_dir` (relative: to the workdir)."""
    root = posixpath.normpath(posixpath.join(workdir, skills_dir))
    q = shlex.quote(root)
    script = (
        f'for f in {q}/*/SKILL.md; do [ -f "$f" ] || continue; '
        f"printf '%s%s\\n' '{_SEPARATOR}' \"$f\"; head -c {_HEAD_BYTES} \"$f\"; echo; done"
    )
    result = await env.exec(script, cwd="/", timeout=60)
    skills: list[Skill] = []
    for chunk in result.stdout.split(_SEPARATOR)[1:]:
        path, _, text = chunk.partition("\n")
        meta = parse_front_matter(text)
        folder = posixpath.basename(posixpath.dirname(path))
        name = str(meta.get("name") or folder).strip()
        description = " ".join(str(meta.get("description") or "").split())[:MAX_DESCRIPTION_CHARS]
        skills.append(Skill(name, description, path))
        if len(skills) >= MAX_SKILLS:
            break
    return skills


def skills_prompt(skills: list[Skill]) -> str:
    """The system prompt's paragraph on the skills ("" without any)."""
    if not skills:
        return ""
    lines = [
        "\nSkills are available in this sandbox. Each is a folder with a SKILL.md that "
        "says how to use it: when one fits the task, read its SKILL.md (and the files "
        "it names) first, then follow it.",
    ]
    lines += [f"- {s.name}: {s.description} ({s.path})" for s in skills]
    return "\n".join(lines) + "\n"
