"""Which image builder this machine's `docker` client can drive, found once per
process: the buildx plugin (`docker buildx build --load`), the BuildKit built into
clients before 23.0 (`DOCKER_BUILDKIT=1 docker build`), or else the classic builder.

Clients from 23.0 on refuse `DOCKER_BUILDKIT=1` without the buildx plugin, and the
classic builder refuses `COPY --chmod`, `RUN --mount` and heredocs; so no user
should have to pick a client and a variable for an ordinary Dockerfile to build.
`HELIOS_DOCKER_BUILDER` (buildkit or classic) overrides the choice.

The engine's networks matter too: a daemon started without a default bridge
(`dockerd --bridge=none`, as on the test machines) gives the classic builder's `RUN`
steps no network, but fails BuildKit's with "network bridge not found"; BuildKit then
gets `--network none`, the classic builder's behaviour there, unless
`HELIOS_DOCKER_BUILD_NETWORK` says otherwise. Tested by tests/test_docker_buildkit.py."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from helios._proc import decode, run_process

BUILDX = "buildx"
BUILDKIT = "buildkit"
CLASSIC = "classic"
#: the first client version that needs the buildx plugin for BuildKit
_PLUGIN_ONLY = 23


@dataclass(frozen=True)
class Builder:
    """How to build with one client: the `docker` arguments before the build's
    options, the environment they need, and whether BuildKit does the build."""

    kind: str
    has_bridge: bool

    @property
    def buildkit(self) -> bool:
        return self.kind != CLASSIC

    def argv(self, network: str | None) -> list[str]:
        """`docker`'s arguments up to the build's own options, `--network` included."""
        args = ["buildx", "build", "--load"] if self.kind == BUILDX else ["build"]
        if network:
            args += ["--network", network]
            if self.kind == BUILDX and network == "host":
                # a docker-container builder needs the entitlement; the docker driver takes it
                args += ["--allow", "network.host"]
        return args

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_BUILDKIT": "0" if self.kind == CLASSIC else "1"}

    def network(self, configured: str | None) -> str | None:
        """The `--network` of a build: the configured one, else `none` where BuildKit
        would look for a bridge the engine lacks."""
        if configured:
            return configured
        return None if self.has_bridge or not self.buildkit else "none"


_found: dict[tuple[str, str | None], Builder] = {}


async def detect(docker: str, forced: str | None) -> Builder:
    """The builder of client `docker` (cached per process and client)."""
    key = (docker, forced)
    if key not in _found:
        kind, bridge = await asyncio.gather(_kind(docker, forced), _has_bridge(docker))
        _found[key] = Builder(kind, bridge)
    return _found[key]


def forget() -> None:
    """Drop what was found (for tests that change the client or the setting)."""
    _found.clear()


async def _kind(docker: str, forced: str | None) -> str:
    if forced == CLASSIC:
        return CLASSIC
    if await _ok([docker, "buildx", "version"]):
        return BUILDX
    if forced == BUILDKIT:
        return BUILDKIT
    version = await _out([docker, "version", "--format", "{{.Client.Version}}"])
    major = version.split(".", 1)[0]
    return BUILDKIT if major.isdigit() and int(major) < _PLUGIN_ONLY else CLASSIC


async def _has_bridge(docker: str) -> bool:
    names = (await _out([docker, "network", "ls", "--format", "{{.Name}}"])).split()
    # dockerd's own networks without its bridge: `dockerd --bridge=none`; any other
    # answer (none, another engine's names) is taken to have a default network
    return not ({"host", "none"} <= set(names) and "bridge" not in names)


async def _ok(argv: list[str]) -> bool:
    try:
        result = await run_process(argv, timeout=30.0)
    except OSError:
        return False
    return not result.timed_out and result.returncode == 0


async def _out(argv: list[str]) -> str:
    try:
        result = await run_process(argv, timeout=30.0)
    except OSError:
        return ""
    if result.timed_out or result.returncode != 0:
        return ""
    return decode(result.stdout).strip()
