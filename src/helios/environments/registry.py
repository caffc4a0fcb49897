"""Provider lookup: the built-ins (docker, local, daytona, null) plus plugins from the
`helios.environments` entry point (`helios.plugins`)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points

from helios.environments.base import Environment
from helios.environments.spec import SandboxSpec
from helios.errors import ConfigError
from helios.lazy import LazyImports
from helios.plugins import Plugins

ENTRY_POINT_GROUP = "helios.environments"


def _builtins() -> Mapping[str, type[Environment]]:
    """Each imported when asked for by name: a batch on `local` imports no Docker
    client and no Daytona code."""
    return LazyImports({
        "docker": "helios.environments.docker:DockerEnvironment",
        "local": "helios.environments.local:LocalEnvironment",
        "null": "helios.environments.null:NullEnvironment",
        "daytona": "helios.environments.daytona:DaytonaEnvironment",
    })  # fmt: skip


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


#: providers with no sandbox: the tool-call door's (its agents only say what they
#: would call); a task or a prompt needs commands run, so they are not offered there
NO_SANDBOX = ("null",)


def sandbox_provider(name: str) -> type[Environment]:
    """A provider whose sandboxes run commands (a task's, `helios batch --provider`):
    an unknown name or `null` is a ConfigError that lists the ones there are."""
    if name in NO_SANDBOX:
        known = ", ".join(n for n in available_providers() if n not in NO_SANDBOX)
        raise ConfigError(
            f"provider {name!r} has no sandbox (it is for tool-call tests); use one of: {known}",
            field="--provider",
        )
    try:
        return provider_class(name)
    except ConfigError as exc:
        known = ", ".join(n for n in available_providers() if n not in NO_SANDBOX)
        raise ConfigError(f"unknown provider {name!r} (known: {known})",
                          field="--provider") from exc  # fmt: skip


def create_environment(name: str, spec: SandboxSpec, *, trial_id: str, run_id: str) -> Environment:
    return provider_class(name)(spec, trial_id=trial_id, run_id=run_id)
