"""Provider lookup: the built-ins (docker, local, null) plus plugins from the
`helios.environments` entry point (`helios.plugins`)."""

from __future__ import annotations

from importlib.metadata import entry_points

from helios.environments.base import Environment
from helios.environments.spec import SandboxSpec
from helios.plugins import Plugins

ENTRY_POINT_GROUP = "helios.environments"


def _builtins() -> dict[str, type[Environment]]:
    from helios.environments.docker import DockerEnvironment
    from helios.environments.local import LocalEnvironment
    from helios.environments.null import NullEnvironment

    return {"docker": DockerEnvironment, "local": LocalEnvironment, "null": NullEnvironment}


def _adopt(loaded: object) -> type[Environment] | None:
    return loaded if isinstance(loaded, type) and issubclass(loaded, Environment) else None


# `_builtins` and `entry_points` are looked up at each call (tests replace them).
PROVIDERS: Plugins[type[Environment]] = Plugins(
    ENTRY_POINT_GROUP, "provider", lambda: _builtins(), _adopt,
    must_be="an Environment subclass", field="--provider",
    entries=lambda group: entry_points(group=group),
)  # fmt: skip


def available_providers() -> list[str]:
    return PROVIDERS.names()


def provider_class(name: str) -> type[Environment]:
    return PROVIDERS.get(name)


def create_environment(name: str, spec: SandboxSpec, *, trial_id: str, run_id: str) -> Environment:
    return provider_class(name)(spec, trial_id=trial_id, run_id=run_id)
