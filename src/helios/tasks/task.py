"""Harbor-format tasks: `task.toml`, `instruction.md`, `environment/`, `tests/`.

Loading is strict about what Helios needs and lenient about the rest: unknown
keys are ignored, as Harbor ignores them, so Terminal-Bench tasks load as-is.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from helios.environments.spec import SandboxSpec
from helios.errors import ConfigError, TaskFormatError
from helios.tasks.task_checks import check_task_folder


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore")


class VerifierConfig(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)


class AgentConfig(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)


class EnvironmentConfig(_Section):
    docker_image: str | None = None
    cpus: float = Field(default=1, gt=0)
    memory_mb: int = Field(default=2048, gt=0)
    build_timeout_sec: float = Field(default=600.0, gt=0)
    #: Harbor spells it allow_internet; `network` is accepted as an alias.
    allow_internet: bool = False
    #: writable storage in MiB; None = the provider's default
    storage_mb: int | None = Field(default=None, gt=0)
    #: processes at once (a Helios extension); None = the provider's default
    pids: int | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _network_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "network" in data and "allow_internet" not in data:
            data = dict(data)
            data["allow_internet"] = data.pop("network")
        return data


class TaskConfig(_Section):
    version: str = "1.0"
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)

    @model_validator(mode="before")
    @classmethod
    def _schema_version_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema_version" in data and "version" not in data:
            data = dict(data)
            data["version"] = str(data.pop("schema_version"))
        return data


class Task(BaseModel):
    """A loaded, validated task directory."""

    model_config = ConfigDict(frozen=True)

    path: Path
    name: str
    #: what tells this task apart from an identical one elsewhere: its path relative
    #: to the batch's root (the common parent of the batch's task folders)
    key: str = ""
    config: TaskConfig
    instruction: str
    #: sha256 over every file of the task: part of each trial's identity
    checksum: str
    #: sha256 over `environment/` only: the docker image cache key
    environment_hash: str

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def dockerfile(self) -> Path | None:
        candidate = self.environment_dir / "Dockerfile"
        return candidate if candidate.is_file() else None

    @property
    def workdir(self) -> str:
        """The agent's working directory: the Dockerfile's last WORKDIR, else /app."""
        dockerfile = self.dockerfile
        if dockerfile is not None:
            found = re.findall(r"(?im)^\s*WORKDIR\s+(\S+)\s*$", dockerfile.read_text("utf-8"))
            if found and found[-1].startswith("/"):
                return str(found[-1])
        return "/app"

    def sandbox_spec(self) -> SandboxSpec:
        """The sandbox this task asks for."""
        env = self.config.environment
        has_dockerfile = self.dockerfile is not None
        return SandboxSpec(
            image=None if has_dockerfile else env.docker_image,
            build_context=self.environment_dir if self.environment_dir.is_dir() else None,
            context_hash=self.environment_hash,
            workdir=self.workdir,
            env=dict(env.env),
            network=env.allow_internet,
            cpus=env.cpus,
            memory_mb=env.memory_mb,
            storage_mb=env.storage_mb,
            **({"pids": env.pids} if env.pids is not None else {}),
            build_timeout=env.build_timeout_sec,
            label=self.name,
        )


def discover_tasks(root: str | Path, pattern: str = "**/task.toml") -> list[Path]:
    """Task directories under `root` whose task.toml matches `pattern`, in a stable order."""
    base = Path(root)
    if (base / "task.toml").is_file() and pattern in ("**/task.toml", "task.toml"):
        return [base.resolve()]
    try:
        found = {p.parent.resolve() for p in base.glob(pattern) if p.name == "task.toml"}
    except (NotImplementedError, ValueError) as exc:
        raise ConfigError(f"bad pattern {pattern!r}: {exc}", field="--pattern") from None
    return sorted(found, key=lambda p: str(p))


def load_task(path: str | Path, key: str | None = None) -> Task:
    """Load and validate one task directory; raise `TaskFormatError` with a one-line reason."""
    task_dir = Path(path).resolve()
    toml_path = task_dir / "task.toml"
    if not toml_path.is_file():
        raise TaskFormatError("missing task.toml", file=str(toml_path))
    # Before any file is read: a link may point at a host file.
    check_task_folder(task_dir)
    config = _parse_config(toml_path)
    instruction_path = task_dir / "instruction.md"
    if not instruction_path.is_file():
        raise TaskFormatError("missing instruction.md", file=str(instruction_path))
    instruction = instruction_path.read_text("utf-8")
    if not instruction.strip():
        raise TaskFormatError("instruction is empty", file=str(instruction_path))
    test_sh = task_dir / "tests" / "test.sh"
    if not test_sh.is_file():
        raise TaskFormatError("missing tests/test.sh", file=str(test_sh))
    env_dir = task_dir / "environment"
    if config.environment.docker_image is None and not (env_dir / "Dockerfile").is_file():
        raise TaskFormatError(
            "needs environment/Dockerfile or [environment] docker_image",
            file=str(toml_path),
            field="environment.docker_image",
        )
    return Task(
        path=task_dir,
        name=task_dir.name,
        key=key or task_dir.name,
        config=config,
        instruction=instruction,
        checksum=tree_checksum(task_dir),
        environment_hash=tree_checksum(env_dir) if env_dir.is_dir() else "",
    )


def _parse_config(toml_path: Path) -> TaskConfig:
    text = toml_path.read_text("utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line_match = re.search(r"line (\d+)", str(exc))
        line = int(line_match.group(1)) if line_match else None
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise TaskFormatError(f"invalid TOML: {reason}", file=str(toml_path), line=line) from None
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        line = _line_of_key(text, str(first["loc"][-1])) if first["loc"] else None
        raise TaskFormatError(first["msg"], file=str(toml_path), line=line, field=field) from None


def _line_of_key(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def tree_checksum(root: Path) -> str:
    """Content hash of a directory: relative paths, modes and bytes, in sorted order."""
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = file.relative_to(root).as_posix()
        digest.update(relative.encode() + b"\0")
        digest.update(b"x" if file.stat().st_mode & 0o111 else b"-")
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()
