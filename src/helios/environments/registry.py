"""Provider lookup: built-ins plus plugins from the `helios.environments` entry point."""

from __future__ import annotations

from importlib.metadata import entry_points

from helios.environments.base import Environment
from helios.environments.spec import SandboxSpec
from helios.errors import ConfigError

ENTRY_POINT_GROUP = "helios.environments"


def _builtins() -> dict[str, type[Environment]]:
    from helios.environments.docker import DockerEnvironment
    from helios.environments.local import LocalEnvironment
    from helios.environments.null import NullEnvironment

    return {"docker": DockerEnvironment, "local": LocalEnvironment, "null": NullEnvironment}


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_providers() -> list[str]:
    return sorted(set(_builtins()) | set(_plugins()))


def provider_class(name: str) -> type[Environment]:
    builtins = _builtins()
    if name in builtins:
        return builtins[name]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            loaded = ep.load()
            if not (isinstance(loaded, type) and issubclass(loaded, Environment)):
                raise ConfigError(
                    f"plugin {ep.value} is not an Environment subclass", field="provider"
                )
            return loaded
    known = ", ".join(available_providers())
    raise ConfigError(f"unknown provider {name!r} (known: {known})", field="--provider")


def create_environment(
    name: str, spec: SandboxSpec, *, trial_id: str, run_id: str
) -> Environment:
    return provider_class(name)(spec, trial_id=trial_id, run_id=run_id)
