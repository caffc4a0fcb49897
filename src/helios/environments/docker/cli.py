"""The `docker` CLI as asyncio subprocesses (a trial's rare calls: run, build, inspect,
cleanup), and the once-per-process image builds.

Who needs this path: every docker user. `docker run` pulls a missing image and
reports an engine without `--storage-opt`; builds, inspects and `helios cleanup`
happen once per trial or less, so a process each costs little. Tested through
tests/test_docker_env.py and tests/test_env_cleanup.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helios._proc import decode, run_process
from helios.environments.docker.base_images import (
    base_images,
    is_desktop_image,
    missing_base_images,
    missing_desktop_image,
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
        args = ["build", "-q", "-t", tag, "--label", f"{LABEL_MANAGED}=true"]
        build_network = helios_settings().docker_build_network
        if build_network:
            args += ["--network", build_network]
        result = await run_process([docker_binary(), *args, str(context)], timeout=timeout)
        if result.timed_out:
            raise PhaseTimeout("build", timeout)
        if result.returncode != 0:
            tail = " | ".join(decode(result.stderr).strip().splitlines()[-3:])
            missing = [image for image in bases if not await image_present(image)]
            if missing:
                raise BaseImageMissing(missing_base_images(missing, tail))
            raise EnvironmentBuildError(f"docker build of {context} failed: {tail}")


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


def _bases_of(context: Path) -> list[str]:
    try:
        return base_images((context / "Dockerfile").read_text("utf-8", errors="replace"))
    except OSError:
        return []
