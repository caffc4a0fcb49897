"""Job files: a task batch kept in a file (`helios batch --config job.yaml`).

    tasks:                           # one or more task sources
      - examples/tasks               # a folder searched for task.toml files
      - path: more/tasks             # or with its own glob
        pattern: "*/task.toml"
    models:                          # one or more; the run is models × agents
      - openai/gpt-4.1-mini
      - model: openai-compatible/qwen3
        base_url: http://127.0.0.1:8000/v1
        api_key_env: QWEN_KEY        # the NAME of the variable that holds the key
        temperature: 0.2
    agents: [tool, {name: oracle}]   # {name: tool, model: M}: that agent with M only
    n_attempts: 2
    n_concurrent: 4
    timeout_multiplier: 2.0          # every agent's and verifier's task.toml timeout × 2
    provider: docker
    network_default: none            # a task that leaves network_mode unset: no network
    pass_env: [HF_TOKEN]             # host variables a task may take as ${HF_TOKEN}
    output: runs
    difficulty: easy                 # which tasks run: include, exclude, task_tags,
    limit: 10                        # difficulty, category, limit, sample, seed
    # dataset: hello@1.0             # or a registry's dataset instead of tasks
    # registry: registry.json

YAML (`.yaml`, `.yml`), TOML (`.toml`) or JSON (`.json`), checked by one pydantic
model: an unknown key, a wrong type or a missing file is one `InputError` naming
the file, the field and, in YAML, TOML and JSON, the line where the format tells it.
Relative paths are relative to the job file's folder. A key is never written in a
job file: a model names the variable that holds it.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from helios.errors import InputError
from helios.models.base import ReasoningEffort
from helios.safe_yaml import load_yaml

#: the suffixes a job file may have, and the format of each
FORMATS = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}
#: what an environment variable's name may be
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Generation(_Strict):
    """Generation settings: for every model (at the top), or one model's own."""

    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    reasoning_effort: ReasoningEffort | None = None
    #: OpenRouter's provider routing, as `--openrouter-routing` takes it
    #: (`order=a,b;sort=price`)
    openrouter_routing: str | None = Field(default=None, min_length=1)


class JobTasks(_Strict):
    """A task source: a task folder, or a folder searched with `pattern`."""

    path: str = Field(min_length=1)
    #: the glob for task.toml files under `path` (default: the job's `pattern`)
    pattern: str | None = Field(default=None, min_length=1)


class JobModel(_Generation):
    """One model, with its own endpoint, key variable and generation settings."""

    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, min_length=1)
    #: the NAME of the environment variable that holds this model's key
    api_key_env: str | None = None

    @field_validator("api_key_env")
    @classmethod
    def _a_name(cls, value: str | None) -> str | None:
        if value is not None and not _VARIABLE.match(value):
            raise ValueError("expected the NAME of an environment variable (the key itself "
                             "never goes in a job file)")  # fmt: skip
        return value


class JobAgent(_Strict):
    """One agent, with its own settings."""

    name: str = Field(min_length=1)
    #: this agent runs with this model only (as each agent of a Harbor job carries its
    #: own); None: with every model of the job
    model: str | None = Field(default=None, min_length=1)
    max_turns: int | None = Field(default=None, ge=1)
    system_prompt_file: str | None = Field(default=None, min_length=1)
    #: the system prompt itself (what `helios config show` writes); or `system_prompt_file`
    system_prompt: str | None = Field(default=None, min_length=1)
    #: an installed agent's release (`--agent-version`)
    version: str | None = Field(default=None, min_length=1)
    #: any other setting the agent takes, by the agent's own names
    settings: dict[str, Any] = Field(default_factory=dict)


def _entries(value: Any, key: str) -> Any:
    """One entry or a list of them; a bare string is the entry's `key`."""
    items = value if isinstance(value, list) else [value]
    return [{key: item} if isinstance(item, str) else item for item in items]


class JobConfig(_Generation):
    """A job file. Every field is optional: a flag given on the command line wins
    over the file's value, and the file's over the default."""

    tasks: list[JobTasks] = Field(default_factory=list)
    models: list[JobModel] = Field(default_factory=list)
    agents: list[JobAgent] = Field(default_factory=list)
    n_attempts: int | None = Field(default=None, ge=1)
    n_concurrent: int | None = Field(default=None, ge=1)
    provider: str | None = Field(default=None, min_length=1)
    output: str | None = Field(default=None, min_length=1)
    #: the glob for task.toml files (a source's own `pattern` wins)
    pattern: str | None = Field(default=None, min_length=1)
    workers: int | None = Field(default=None, ge=1)
    executor: Literal["local", "ray"] | None = None
    #: the network of a sandbox whose task leaves `network_mode` unset (`--network-default`)
    network_default: Literal["public", "none"] | None = None
    #: host variables a task may take as `${NAME}` (`--pass-env`)
    pass_env: list[str] | None = None
    ray_address: str | None = Field(default=None, min_length=1)
    fail_under: float | None = Field(default=None, ge=0.0, le=1.0)
    quiet: bool | None = None
    #: the run's name and tags (`--name`, `--tag key=value`: a flag wins, tag by tag)
    name: str | None = Field(default=None, min_length=1)
    tags: dict[str, str] = Field(default_factory=dict)
    retry_errors: bool | None = None
    prices: str | None = Field(default=None, min_length=1)
    #: the response cache for every model (`--cache`)
    cache: bool | None = None
    #: each agent's and verifier's task.toml timeout times its own multiplier, else
    #: times `timeout_multiplier` (Harbor's names and rule)
    timeout_multiplier: float | None = Field(default=None, gt=0)
    agent_timeout_multiplier: float | None = Field(default=None, gt=0)
    verifier_timeout_multiplier: float | None = Field(default=None, gt=0)
    #: defaults for every agent (an agent's own win)
    max_turns: int | None = Field(default=None, ge=1)
    system_prompt_file: str | None = Field(default=None, min_length=1)
    #: which tasks run (`--include`, `--exclude`, `--task-tag`, `--difficulty`,
    #: `--category`: one value or a list; `--limit`, `--sample`, `--seed`)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    task_tags: list[str] = Field(default_factory=list)
    difficulty: list[str] = Field(default_factory=list)
    category: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1)
    sample: int | None = Field(default=None, ge=1)
    seed: int | None = None
    #: a dataset of a registry instead of `tasks` (`-d NAME@VERSION`, `--registry`)
    dataset: str | None = Field(default=None, min_length=1)
    registry: str | None = Field(default=None, min_length=1)
    #: the run's budgets (`--max-cost`, `--max-total-tokens`, `--max-duration 2h`,
    #: `--budget-hard`: a flag wins)
    max_cost: float | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_duration: str | None = Field(default=None, min_length=1)
    budget_hard: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("include", "exclude", "task_tags", "difficulty", "category"):
            if isinstance(data.get(name), str):
                data[name] = [data[name]]
        for name, key in (("tasks", "path"), ("models", "model"), ("agents", "name")):
            if name in data:
                data[name] = _entries(data[name], key)
        return data

    @field_validator("models", "agents")
    @classmethod
    def _distinct(cls, entries: list[JobModel] | list[JobAgent]) -> Any:
        # a trial records its model and agent by name: two of one name could not be
        # told apart in the results
        names = [e.model if isinstance(e, JobModel) else e.name for e in entries]
        # an agent may be listed once per model it is given (`model`), not more
        pinned = {(e.name, e.model) for e in entries if isinstance(e, JobAgent) and e.model}
        once_each = {name for name in names
                     if sum(1 for p in pinned if p[0] == name) == names.count(name)}  # fmt: skip
        twice = sorted({n for n in names if names.count(n) > 1 and n not in once_each})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice")
        return entries

    def resolved(self, folder: Path) -> JobConfig:
        """The job with its relative paths made relative to `folder` (its file's)."""

        def at(path: str | None) -> str | None:
            if path is None:
                return None
            return str(folder / Path(path).expanduser())

        return self.model_copy(update={
            "tasks": [t.model_copy(update={"path": at(t.path)}) for t in self.tasks],
            "agents": [a.model_copy(update={"system_prompt_file": at(a.system_prompt_file)})
                       for a in self.agents],
            "output": at(self.output), "prices": at(self.prices),
            "registry": self.registry if self.registry is None or "://" in self.registry
            else at(self.registry),
            "system_prompt_file": at(self.system_prompt_file),
        })  # fmt: skip


def load_job(path: Path) -> JobConfig:
    """The job in `path`, its relative paths resolved against its folder; one
    `InputError` naming the file, field and line where known when it is bad."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"a job file is {', '.join(FORMATS)}", file=str(path))
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise InputError("no such job file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 ({exc.reason})", file=str(path)) from None
    data = _parse(text, kind, path)
    if not isinstance(data, dict):
        raise InputError("a job file holds a mapping (tasks, models, agents, ...)", file=str(path))
    try:
        job = JobConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        raise InputError(message, file=str(path), line=_line(text, kind, loc),
                         field=_field(loc)) from None  # fmt: skip
    return job.resolved(path.parent)


def _parse(text: str, kind: str, path: Path) -> Any:
    try:
        if kind == "yaml":
            return load_yaml(text)
        if kind == "toml":
            return tomllib.loads(text)
        return json.loads(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"not valid YAML: {problem}", file=str(path), line=line) from None
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError(f"not valid TOML: {reason}", file=str(path),
                         line=int(found.group(1)) if found else None) from None  # fmt: skip
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", file=str(path), line=exc.lineno) from None
    except (RecursionError, ValueError) as exc:  # too deep; an integer of too many digits
        raise InputError(f"not valid {kind.upper()}: {str(exc)[:80]}", file=str(path)) from None


def _field(loc: tuple[Any, ...]) -> str:
    """'models[1].base_url' from pydantic's location."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _line(text: str, kind: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the field at `loc`, where the format tells it (YAML: the node's
    own line; TOML and JSON: the first line that names its last key)."""
    if kind == "yaml":
        try:
            node: Any = yaml.compose(text, Loader=yaml.SafeLoader)  # already bounded: parsed
        except yaml.YAMLError:
            return None
        for part in loc:
            node = _child(node, part)
            if node is None:
                return None
        return int(node.start_mark.line) + 1
    keys = [part for part in loc if isinstance(part, str)]
    if not keys:
        return None
    quoted = re.escape(keys[-1])
    pattern = rf'^\s*"?{quoted}"?\s*=' if kind == "toml" else rf'"{quoted}"\s*:'
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            return number
    return None


def _child(node: Any, part: Any) -> Any:
    """The key's node (for a mapping: the key itself, so an unknown key is found
    too) or the item's (for a list); a short form (a bare string) is its own node."""
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if key.value == part:
                return value if isinstance(value, yaml.MappingNode | yaml.SequenceNode) else key
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        return node.value[part] if part < len(node.value) else None
    if isinstance(node, yaml.ScalarNode):
        return node  # the short form (`- tool`) stands for the entry's mapping
    return None
