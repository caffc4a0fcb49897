"""The files a task folder must hold: a single-step task's root files, or each
step's `steps/<name>/` folder, and a separate verifier's definition.

Each failure is one `TaskFormatError` naming the missing file (or the field).
"""

from __future__ import annotations

from pathlib import Path

from helios.errors import TaskFormatError
from helios.tasks.schema import StepConfig, TaskConfig, VerifierConfig

#: the one compose file Harbor's docker provider reads (`environment/` or a separate
#: verifier's `tests/`); a `docker-compose.yml` or `compose.yaml` there is material
#: like any other file, and the folder is a plain Dockerfile task
COMPOSE_FILE = "docker-compose.yaml"


def check_layout(task_dir: Path, config: TaskConfig) -> tuple[str, dict[str, str]]:
    """Check the task's files; return the root instruction ("" when a multi-step
    task has none) and each step's instruction by name."""
    _check_environment(task_dir, config)
    if config.steps:
        steps = {
            step.name: _check_step(task_dir, config, step, index)
            for index, step in enumerate(config.steps)
        }
        root = task_dir / "instruction.md"
        return (root.read_text("utf-8") if root.is_file() else ""), steps
    instruction = read_instruction(task_dir / "instruction.md")
    _check_tests(task_dir / "tests", config.verifier, fallback=None)
    _check_separate(task_dir, config.verifier, task_dir / "tests", "verifier")
    return instruction, {}


def read_instruction(path: Path) -> str:
    if not path.is_file():
        raise TaskFormatError(f"missing {path.name}", file=str(path))
    text = path.read_text("utf-8")
    if not text.strip():
        raise TaskFormatError("instruction is empty", file=str(path))
    return text


def has_compose(folder: Path) -> bool:
    return (folder / COMPOSE_FILE).is_file()


def _check_environment(task_dir: Path, config: TaskConfig) -> None:
    env_dir = task_dir / "environment"
    # A compose task's main service may come from its compose file (`tasks.features`).
    if has_compose(env_dir):
        return
    if config.environment.docker_image is None and not (env_dir / "Dockerfile").is_file():
        raise TaskFormatError(
            "needs environment/Dockerfile or [environment] docker_image",
            file=str(task_dir / "task.toml"),
            field="environment.docker_image",
        )


def step_verifier(config: TaskConfig, step: StepConfig) -> VerifierConfig:
    """A step's verifier settings: its own where set, else the task's."""
    base = config.verifier
    own = step.verifier
    update = {name: getattr(own, name) for name in own.model_fields_set}
    if "environment" in update and "environment_mode" not in update:
        update["environment_mode"] = None
    return base.model_copy(update=update)


def _check_step(task_dir: Path, config: TaskConfig, step: StepConfig, index: int) -> str:
    folder = task_dir / "steps" / step.name
    if not folder.is_dir():
        raise TaskFormatError(
            f"step {step.name!r} has no folder steps/{step.name}/",
            file=str(task_dir / "task.toml"),
            field=f"steps.{index}.name",
        )
    instruction = read_instruction(folder / "instruction.md")
    verifier = step_verifier(config, step)
    _check_tests(folder / "tests", verifier, fallback=task_dir / "tests")
    _check_separate(task_dir, verifier, folder / "tests", f"steps.{index}.verifier")
    return instruction


def _check_tests(tests: Path, verifier: VerifierConfig, fallback: Path | None) -> None:
    if (tests / "test.sh").is_file() or (fallback is not None and (fallback / "test.sh").is_file()):
        return
    # A separate verifier built from tests/Dockerfile brings its own /tests.
    if verifier.separate and (
        (tests / "Dockerfile").is_file()
        or (fallback is not None and (fallback / "Dockerfile").is_file())
    ):
        return
    raise TaskFormatError("missing tests/test.sh", file=str(tests / "test.sh"))


def _check_separate(task_dir: Path, verifier: VerifierConfig, tests: Path, where: str) -> None:
    """Harbor's refusal: a separate verifier with its own [environment] table must
    name an image or have a Dockerfile in its tests folder."""
    if not verifier.separate or verifier.environment is None:
        return
    if verifier.environment.docker_image is not None:
        return
    if (tests / "Dockerfile").is_file() or (task_dir / "tests" / "Dockerfile").is_file():
        return
    if has_compose(tests) or has_compose(task_dir / "tests"):
        return
    raise TaskFormatError(
        "a separate verifier needs [verifier.environment] docker_image or tests/Dockerfile",
        file=str(task_dir / "task.toml"),
        field=f"{where}.environment.docker_image",
    )
