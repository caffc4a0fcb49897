"""The `docker` CLI as asyncio subprocesses (a trial's rare calls: run, build, inspect,
cleanup), and the once-per-process image builds.

Who needs this path: every docker user. `docker run` pulls a missing image and
reports an engine without `--storage-opt`; builds, inspects and `helios cleanup`
happen once per trial or less, so a process each costs little. Tested through
tests/test_docker_env.py and tests/test_env_cleanup.py."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from helios._proc import ProcResult, decode, run_process
from helios.environments.docker.base_images import (
    base_images,
    is_desktop_image,
    missing_base_images,
    missing_desktop_image,
)
from helios.environments.docker.builder import Builder
from helios.environments.docker.builder import detect as detect_builder
from helios.environments.docker.dockerfile import (
    buildkit_features,
    derive,
    has_heredoc,
    syntax_frontend,
)
from helios.errors import (
    BaseImageMissing,
    EnvironmentBuildError,
    EnvironmentExecError,
    PhaseTimeout,
)
from helios.settings import current as helios_settings

LABEL_MANAGED = "helios.managed"
LABEL_RUN = "helios.run"
LABEL_TRIAL = "helios.trial"
#: which process started the container (`host:pid:start`), for `helios cleanup`
LABEL_OWNER = "helios.owner"
#: a random token per Environment object: a container is ours only if it carries ours
LABEL_INSTANCE = "helios.instance"
IMAGE_REPO = "helios-env"
#: docker CLI calls that should be instant still get a bound, so a hung daemon
#: shows up as an error instead of a stuck batch
CONTROL_TIMEOUT = 120.0


def docker_binary() -> str:
    return helios_settings().docker_cli


async def docker(
    *args: str, timeout: float | None = CONTROL_TIMEOUT, stdin: bytes | None = None
) -> tuple[int, str, str]:
    result = await run_process([docker_binary(), *args], timeout=timeout, stdin=stdin)
    if result.timed_out:
        raise EnvironmentExecError(f"docker {args[0]} did not answer within {timeout:g}s")
    return result.returncode, decode(result.stdout), decode(result.stderr)


class ImageBuilds:
    """Builds each environment once per process, however many trials ask at once."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._ready: set[str] = set()

    async def ensure(self, tag: str, context: Path, timeout: float) -> None:
        if tag in self._ready:
            return
        lock = self._locks.setdefault(tag, asyncio.Lock())
        async with lock:
            if tag in self._ready:
                return
            code, _, _ = await docker("image", "inspect", tag)
            if code != 0:
                await self._build(tag, context, timeout)
            self._ready.add(tag)

    async def _build(self, tag: str, context: Path, timeout: float) -> None:
        bases = await asyncio.to_thread(_bases_of, context)
        for image in bases:
            if is_desktop_image(image) and not await image_present(image):
                raise BaseImageMissing(missing_desktop_image(image))
        dockerfile = context / "Dockerfile"
        text = await asyncio.to_thread(_read, dockerfile)
        settings = helios_settings()
        builder = await detect_builder(docker_binary(), settings.docker_builder)
        argv = [docker_binary(), *builder.argv(builder.network(settings.docker_build_network)),
                "-q", "-t", tag, "--label", f"{LABEL_MANAGED}=true"]  # fmt: skip
        deadline = asyncio.get_running_loop().time() + timeout
        derived = derive(text)
        frontend = syntax_frontend(text)
        if derived is not None and frontend is not None and frontend in _unreachable_frontends:
            # out of reach before, in this process: straight to the copy without the line
            result = await _build_with(argv, context, derived, deadline, builder)
        else:
            result = await _build_with(argv, context, None, deadline, builder)
            err = decode(result.stderr)
            if result.returncode != 0 and derived is not None and _frontend_failed(text, err):
                if frontend and _syntax_unreachable(frontend, err):
                    _unreachable_frontends.add(frontend)
                result = await _build_with(argv, context, derived, deadline, builder)
        if result.timed_out:
            raise PhaseTimeout("build", timeout)
        if result.returncode != 0:
            err = decode(result.stderr)
            tail = " | ".join(err.strip().splitlines()[-3:])
            missing = [image for image in bases if not await image_present(image)]
            if missing:
                raise BaseImageMissing(missing_base_images(missing, tail))
            why = _why(dockerfile, text, err, builder)
            raise EnvironmentBuildError(f"docker build of {context} failed: {why or tail}")


#: `# syntax=` frontends that could not be fetched in this process: later builds go
#: straight to the copy of their Dockerfile without the line
_unreachable_frontends: set[str] = set()


async def _build_with(argv: list[str], context: Path, derived: str | None, deadline: float,
                      builder: Builder) -> ProcResult:  # fmt: skip
    """One `docker build` of `context`, from `derived` (a copy of its Dockerfile,
    kept outside the task's folder) when given."""
    remaining = max(1.0, deadline - asyncio.get_running_loop().time())
    if derived is None:
        return await run_process([*argv, str(context)], timeout=remaining, env=builder.env())
    with tempfile.TemporaryDirectory(prefix="helios-dockerfile-") as folder:
        copy = Path(folder) / "Dockerfile"
        await asyncio.to_thread(copy.write_text, derived, "utf-8")
        ignore = context / ".dockerignore"  # buildx reads it next to the Dockerfile first
        if ignore.is_file():
            beside = copy.with_name("Dockerfile.dockerignore")
            await asyncio.to_thread(shutil.copyfile, ignore, beside)
        return await run_process([*argv, "-f", str(copy), str(context)], timeout=remaining,
                                 env=builder.env())  # fmt: skip


def _frontend_failed(text: str, err: str) -> bool:
    """Whether BuildKit failed on the frontend: its `# syntax=` image, or a parse
    error in a file with heredocs (a built-in frontend older than Docker 23's)."""
    frontend = syntax_frontend(text)
    if frontend and _syntax_unreachable(frontend, err):
        return True
    return has_heredoc(text) and ("parse error" in err or "unknown instruction" in err)


def _syntax_unreachable(frontend: str, err: str) -> bool:
    name = frontend.split("@", 1)[0].split(":", 1)[0].removeprefix("docker.io/")
    return "frontend gateway" in err or "resolve image config" in err or name in err


def _why(dockerfile: Path, text: str, err: str, builder: Builder) -> str | None:
    """One line on a failure that the Dockerfile's features explain, or None."""
    if not builder.buildkit:
        features = [f for f in buildkit_features(text) if f.name != "`# syntax=`"]
        if not features:
            return None
        first = features[0]
        how = ("unset HELIOS_DOCKER_BUILDER" if helios_settings().docker_builder == "classic"
               else "install Docker's buildx plugin (docker-buildx-plugin from Docker's apt "
               "repository, docker-buildx on Debian 13 or Ubuntu 24.04)")  # fmt: skip
        return (
            f"{dockerfile}:{first.line} uses {first.name}, which needs BuildKit, and "
            f"{docker_binary()} builds without it: {how}"
        )
    frontend = syntax_frontend(text)
    if frontend and _syntax_unreachable(frontend, err):
        return (
            f"{dockerfile}:1 names the Dockerfile frontend `{frontend}` (`# syntax=`), "
            "which the engine cannot fetch from its registry: load that image into the "
            "engine, or drop the line if the engine's built-in frontend reads the file"
        )
    if frontend and "parse error" in err:
        return (
            f"{dockerfile} needs a newer Dockerfile frontend than the engine's built-in "
            f"one, and `# syntax={frontend}` cannot be fetched offline: "
            f"{err.strip().splitlines()[-1]}"
        )
    return None


async def image_present(image: str) -> bool:
    """Whether the engine has `image` (never pulls it)."""
    code, _, _ = await docker("image", "inspect", image)
    return code == 0


async def image_digests(names: list[str], limit: int) -> dict[str, str | None]:
    """Each image's id (`sha256:…`) as the engine has it, asked for the first `limit`
    names at once; None where it is not here (yet), the engine does not answer, or
    past the limit."""
    digests: dict[str, str | None] = dict.fromkeys(names)
    at_once = asyncio.Semaphore(8)

    async def one(name: str) -> None:
        try:
            async with at_once:
                code, out, _ = await docker("image", "inspect", "--format", "{{.Id}}", name,
                                            timeout=30.0)  # fmt: skip
        except (EnvironmentExecError, OSError):
            return
        if code == 0 and out.strip().startswith("sha256:"):
            digests[name] = out.strip()

    await asyncio.gather(*(one(name) for name in names[:limit]))
    return digests


async def check_desktop_image(image: str) -> None:
    """`BaseImageMissing` if `image` is Helios's desktop image and is not here: no
    registry serves it, so `docker run` would only fail on a registry's DNS."""
    if is_desktop_image(image) and not await image_present(image):
        raise BaseImageMissing(missing_desktop_image(image))


def _read(dockerfile: Path) -> str:
    try:
        return dockerfile.read_text("utf-8", errors="replace")
    except OSError:
        return ""


def _bases_of(context: Path) -> list[str]:
    try:
        return base_images((context / "Dockerfile").read_text("utf-8", errors="replace"))
    except OSError:
        return []
