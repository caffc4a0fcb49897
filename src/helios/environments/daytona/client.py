"""Daytona's keys (`DAYTONA_API_KEY`, `DAYTONA_API_URL`, `DAYTONA_TARGET`, read
through `helios.settings`, the key registered as a secret there) and the SDK's
async client, imported lazily: Helios runs without the `daytona` extra until a
Daytona sandbox is asked for."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from helios.errors import EnvironmentUnavailable
from helios.secrets import public_url
from helios.settings import current as helios_settings

#: the SDK version the loopback fake (`helios.testing.daytona_fake`) speaks; the
#: extra pins it (pyproject.toml)
SDK_VERSION = "0.226.1"
#: where the SDK goes without DAYTONA_API_URL
DEFAULT_API_URL = "https://app.daytona.io/api"
INSTALL = "pip install 'helios-harness[daytona]'"


@dataclass(frozen=True)
class Keys:
    api_key: str
    api_url: str
    target: str | None

    @property
    def shown_url(self) -> str:
        return public_url(self.api_url)


def keys() -> Keys | None:
    """The run's Daytona keys, or None when DAYTONA_API_KEY is not set."""
    settings = helios_settings()
    key = settings.daytona_api_key
    if not key:
        return None
    url = settings.daytona_api_url or DEFAULT_API_URL
    return Keys(key, url.rstrip("/"), settings.daytona_target)


def require_keys() -> Keys:
    found = keys()
    if found is None:
        raise EnvironmentUnavailable(
            "DAYTONA_API_KEY is not set: export your Daytona key (and DAYTONA_API_URL for "
            "a self-hosted Daytona), or use --provider docker"
        )
    return found


def sdk() -> ModuleType:
    """The `daytona` package, or EnvironmentUnavailable saying how to install it."""
    try:
        return importlib.import_module("daytona")
    except ImportError:
        raise EnvironmentUnavailable(f"--provider daytona needs Daytona's SDK: {INSTALL}") from None


def open_client(found: Keys) -> Any:
    """The SDK's `AsyncDaytona` with these keys (close it: `await client.close()`).
    Typed loosely: Helios type-checks without the SDK installed."""
    module = sdk()
    config = module.DaytonaConfig(api_key=found.api_key, api_url=found.api_url,
                                  target=found.target)  # fmt: skip
    return module.AsyncDaytona(config)
