"""The docker provider: a container per trial (`environment`), reached over the
shell server's stream (`shell`), the Engine API (`api`) and the `docker` CLI
(`cli`: run, build, inspect, cleanup), with its services and cleanup. Builds use
the builder the client can drive (`builder`: buildx, BuildKit, classic), from a copy
of a Dockerfile that the engine's own frontend can read offline where needed
(`dockerfile`).

`DockerEnvironment` is imported on first use, so importing one of the modules
here does not import the provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.environments.docker.environment import DockerEnvironment

__all__ = ["DockerEnvironment"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"DockerEnvironment": "helios.environments.docker.environment"}, globals(), __all__
)
