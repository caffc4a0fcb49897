"""Harbor-format tasks: `task.toml`, `instruction.md`, `environment/`, `tests/`
(or `steps/<name>/...` for a multi-step task).

Loading is strict about what Helios needs and lenient about the rest: keys no
schema version defines are kept on the task (`unknown_keys`) and reported once
per batch, and fields Helios cannot honour are named by `tasks.features`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from helios.environments.spec import HealthCheck, SandboxSpec
from helios.errors import ConfigError, TaskFormatError
from helios.tasks.dockerfile import dockerfile_workdir
from helios.tasks.network import sandbox_network
from helios.tasks.schema import (
    AgentConfig,
    EnvironmentConfig,
    HealthcheckConfig,
    TaskConfig,
    VerifierConfig,
    unknown_keys,
)
from helios.tasks.schema_env import expand_env_defaults
from helios.tasks.task_checks import check_task_folder
from helios.tasks.task_layout import COMPOSE_FILE, check_layout
from helios.tasks.task_tree import tree_checksum, tree_digests, walk

__all__ = [
    "AgentConfig",
    "EnvironmentConfig",
    "Task",
    "TaskConfig",
    "VerifierConfig",
    "discover_tasks",
    "dockerfile_workdir",
    "load_task",
    "sandbox_spec_for",
    "tree_checksum",
]


class Task(BaseModel):
    """A loaded, validated task directory."""

    model_config = ConfigDict(frozen=True)

    #: where the task's files are read from
    path: Path
    name: str
    #: the folder the task was loaded from, when `path` is a copy of it (a Ray node's
    #: copy of the driver's folder); records name the original (`source`)
    origin: Path | None = None
    #: what tells this task apart from an identical one elsewhere: its path relative
    #: to the batch's root (the common parent of the batch's task folders)
    key: str = ""
    config: TaskConfig
    #: the task's instruction; for a multi-step task, the root one (never sent) or ""
    instruction: str
    #: keys no schema version defines (dotted names), reported once per batch
    unknown_keys: tuple[str, ...] = ()
    #: a multi-step task's instructions, by step name
    step_instructions: dict[str, str] = {}
    #: the network of a sandbox whose `network_mode` is unset: public, as in Harbor,
    #: unless the run says otherwise (`--network-default none`); not the task's content
    network_default: bool = True
    #: the host variables the run passes in (`--pass-env NAME`: name -> value), for
    #: `${NAME}` in `[environment.env]`; never by default, never a provider's key
    host_env: dict[str, str] = {}

    @property
    def source(self) -> Path:
        """The folder the task was loaded from: what records and configs name."""
        return self.origin or self.path

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    def step_dir(self, name: str) -> Path:
        return self.path / "steps" / name

    @property
    def dockerfile(self) -> Path | None:
        candidate = self.environment_dir / "Dockerfile"
        return candidate if candidate.is_file() else None

    # Derived once per loaded task, not once per trial (they read files): a task
    # is a snapshot, as its checksum, taken at load, already is.
    @cached_property
    def workdir(self) -> str:
        """The agent's working directory: `[environment] workdir`; else, where the
        image is run (docker), the built image's own (`SandboxSpec.workdir_from_image`),
        and this value is the fallback of the providers that run no image (local,
        daytona): the WORKDIR the Dockerfile's text gives (`tasks.dockerfile`), else /app."""
        return self.config.environment.workdir or dockerfile_workdir(self.dockerfile) or "/app"

    @property
    def network_unset(self) -> bool:
        """Whether a sandbox of this task takes its network from the run's default
        (`network_default`): `[environment]` (or a separate verifier's) names none."""
        c = self.config
        tables = [c.environment, c.verifier.environment,
                  *(s.verifier.environment for s in c.steps or [])]  # fmt: skip
        return any(
            t is not None and t.network_mode is None and t.allow_internet is None for t in tables
        )

    # The content hashes: taken at load for a batch (`load_task(digests=True)`), where
    # each trial's identity needs them; a listing never reads the files' bytes.
    @property
    def checksum(self) -> str:
        """sha256 over every file of the task: part of each trial's identity."""
        return self._digests[0]

    @property
    def environment_hash(self) -> str:
        """sha256 over `environment/` only ("" without one): the docker image cache key."""
        return self._digests[1].get("environment", "")

    @property
    def tests_hashes(self) -> dict[str, str]:
        """sha256 of each tests folder that is a separate verifier's build context
        (it has a Dockerfile), by its path under the task: the image cache key."""
        return {k: v for k, v in self._digests[1].items() if k != "environment"}

    @cached_property
    def _digests(self) -> tuple[str, dict[str, str]]:
        folders = ["tests", *(f"steps/{step.name}/tests" for step in self.config.steps or [])]
        built = [f for f in folders if (self.path / f / "Dockerfile").is_file()]
        return tree_digests(self.path, ["environment", *built])

    def sandbox_spec(self) -> SandboxSpec:
        """The sandbox this task asks for."""
        return self._sandbox_spec

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Task:
        """A copy whose derived values are worked out again (pydantic would copy them)."""
        copy = super().model_copy(update=update, deep=deep)
        for name, member in vars(Task).items():
            # the content hashes stay: a copy (a Ray node's) holds the same files
            if isinstance(member, cached_property) and name != "_digests":
                copy.__dict__.pop(name, None)
        return copy

    @cached_property
    def _sandbox_spec(self) -> SandboxSpec:
        return sandbox_spec_for(
            self.config.environment,
            build_context=self.environment_dir,
            context_hash=self.environment_hash,
            workdir=self.workdir,
            label=self.name,
            network_default=self.network_default,
            host_env=self.host_env,
        )


def health_check(config: HealthcheckConfig | None) -> HealthCheck | None:
    if config is None:
        return None
    return HealthCheck(
        command=config.command,
        interval=config.interval_sec,
        timeout=config.timeout_sec,
        start_period=config.start_period_sec,
        start_interval=config.start_interval_sec,
        retries=config.retries,
    )


def sandbox_spec_for(
    env: EnvironmentConfig,
    *,
    build_context: Path | None,
    context_hash: str,
    workdir: str,
    label: str,
    network_default: bool = True,
    compose_dir: Path | None = None,
    host_env: dict[str, str] | None = None,
) -> SandboxSpec:
    """The sandbox an `[environment]` table (the task's or a separate verifier's) asks
    for; its compose file is Harbor's, in `compose_dir` or else the build context."""
    if build_context is not None and not build_context.is_dir():
        build_context = None
    compose = next((d / COMPOSE_FILE for d in (compose_dir, build_context)
                    if d is not None and (d / COMPOSE_FILE).is_file()), None)  # fmt: skip
    has_dockerfile = build_context is not None and (build_context / "Dockerfile").is_file()
    return SandboxSpec(
        image=None if has_dockerfile else env.docker_image,
        build_context=build_context,
        context_hash=context_hash,
        workdir=workdir,
        env=expand_env_defaults(env.env, host_env or {}),
        network=sandbox_network(env, network_default),
        cpus=env.cpus,
        memory_mb=env.memory_mb,
        storage_mb=env.storage_mb,
        pids=env.pids if env.pids is not None else SandboxSpec.pids,
        build_timeout=env.build_timeout_sec,
        workdir_from_image=env.workdir is None,
        image_entrypoint=True,
        label=label,
        healthcheck=health_check(env.healthcheck),
        compose_file=compose,
    )


def discover_tasks(root: str | Path, pattern: str = "**/task.toml") -> list[Path]:
    """Task directories under `root` whose task.toml matches `pattern`, in a stable order."""
    base = Path(root)
    if (base / "task.toml").is_file() and pattern in ("**/task.toml", "task.toml"):
        return [base.resolve()]
    if pattern == "**/task.toml":  # the default: one walk, no glob machinery
        top = base.resolve()
        return sorted((top.joinpath(*parts) for parts in _folders_with_task_toml(str(base))),
                      key=lambda p: str(p))  # fmt: skip
    try:
        found = {p.parent.resolve() for p in base.glob(pattern) if p.name == "task.toml"}
    except (NotImplementedError, ValueError) as exc:
        raise ConfigError(f"bad pattern {pattern!r}: {exc}", field="--pattern") from None
    return sorted(found, key=lambda p: str(p))


def _folders_with_task_toml(base: str) -> list[tuple[str, ...]]:
    """The parts (from `base`) of each folder that holds a `task.toml`, as
    `Path.glob("**/task.toml")` finds them: folders that are links are not entered,
    and a `task.toml` counts when it exists (a link to a missing file does not)."""
    found: list[tuple[str, ...]] = []
    stack: list[tuple[str, tuple[str, ...]]] = [(base, ())]
    while stack:
        folder, parts = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            if entry.name == "task.toml" and (entry.is_file() or os.path.exists(entry.path)):
                found.append(parts)
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, (*parts, entry.name)))
            except OSError:
                continue
    return found


def load_task(
    path: str | Path, key: str | None = None, *, network_default: bool = True,
    host_env: dict[str, str] | None = None, digests: bool = True,
) -> Task:  # fmt: skip
    """Load and validate one task directory; raise `TaskFormatError` with a one-line
    reason. `network_default`: the network where the task leaves it unset (public).
    `digests`: hash the task's files now (a file that cannot be read makes the task
    invalid here); False for a listing, which reads no file but the task's own
    (the hashes are then taken when first asked for)."""
    task_dir = Path(path).resolve()
    toml_path = task_dir / "task.toml"
    if not toml_path.is_file():
        raise TaskFormatError("missing task.toml", file=str(toml_path))
    # Before any file is read: a link may point at a host file.
    entries = walk(task_dir)
    check_task_folder(task_dir, entries)
    config = _parse_config(toml_path)
    instruction, step_instructions = check_layout(task_dir, config)
    task = Task(
        path=task_dir,
        name=task_dir.name,
        key=key or task_dir.name,
        config=config,
        instruction=instruction,
        unknown_keys=tuple(unknown_keys(config)),
        step_instructions=step_instructions,
        network_default=network_default,
        host_env=dict(host_env or {}),
    )
    if digests:
        task.checksum  # noqa: B018  (taken now: a snapshot, and a read error is the task's)
    else:
        for entry in entries:  # what the hash would refuse: a file's name that is not text
            if entry.is_file:
                "/".join(entry.parts).encode()
    return task


def _parse_config(toml_path: Path) -> TaskConfig:
    try:
        text = toml_path.read_text("utf-8")
    except UnicodeDecodeError:
        raise TaskFormatError("not valid UTF-8 (rename or re-encode it)",
                              file=str(toml_path)) from None  # fmt: skip
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line_match = re.search(r"line (\d+)", str(exc))
        line = int(line_match.group(1)) if line_match else None
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise TaskFormatError(f"invalid TOML: {reason}", file=str(toml_path), line=line) from None
    except RecursionError:  # tomllib recurses once per level of arrays and tables
        raise TaskFormatError("invalid TOML: nested too deeply", file=str(toml_path)) from None
    except ValueError as exc:  # an integer past sys.get_int_max_str_digits()
        reason = str(exc).split(":")[0]
        raise TaskFormatError(f"invalid TOML: {reason}", file=str(toml_path)) from None
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as exc:
        # In a union (a string or a table), the branch that got furthest says what is wrong.
        first = min(exc.errors(), key=lambda e: (e["type"] != "value_error", -len(e["loc"])))
        keys = [str(part) for part in first["loc"] if _is_key(part)]
        field = ".".join(keys) or None
        line = _line_of_key(text, keys[-1]) if keys else None
        message = first["msg"].removeprefix("Value error, ")
        raise TaskFormatError(message, file=str(toml_path), line=line, field=field) from None


def _is_key(part: object) -> bool:
    """A location part that is a task.toml key (not a list index or a union's type name)."""
    return (
        isinstance(part, str) and part[:1].islower() and "[" not in part and part not in _TYPE_NAMES
    )


_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict"})


def _line_of_key(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None
