"""Which provider module speaks to a model, as in Harbor's computer-1: by the
model's vendor, or forced with the `provider` setting.

| model | provider module | wire (`ComputerProvider.api`) |
|---|---|---|
| `anthropic/…` | `anthropic`: the `computer_*` tool | Messages |
| `openai/…` | `openai`: the `computer` / `computer_use_preview` tool | Responses |
| `gemini/…` | `gemini`: `computer_use` | native `generateContent` |
| any other (`openai-compatible/…`) | `generic`: JSON actions, image parts | Chat Completions |

Each module exposes `provider(spec: ModelSpec) -> ComputerProvider`; the agent
then asks the batch's model services for that wire (`ModelServices.with_api`).
"""

from __future__ import annotations

import importlib
from typing import Any, cast

from helios.agents.computer.provider import ComputerProvider
from helios.errors import ConfigError
from helios.models.routing import ModelSpec

_BY_VENDOR = {"anthropic": "anthropic", "openai": "openai", "gemini": "gemini"}
#: the model providers (`provider/…`) each forced provider module can reach
_REACHES = {
    "anthropic": ("anthropic",),
    "openai": ("openai", "openai-compatible"),
    "gemini": ("gemini",),
    "generic": ("openai", "openai-compatible", "openrouter", "gemini"),
}


def provider_name(spec: ModelSpec, forced: str | None = None) -> str:
    """The provider module for `spec`'s model; a forced one must be able to reach it."""
    if forced is None:
        return _BY_VENDOR.get(spec.provider, "generic")
    reaches = _REACHES.get(forced)
    if reaches is None:
        raise ConfigError(
            f"unknown computer provider {forced!r} (known: {', '.join(_REACHES)})",
            field="agent_settings.provider",
        )
    if spec.provider not in reaches:
        raise ConfigError(
            f"the {forced} computer provider cannot drive {spec.qualified} "
            f"(it reaches {', '.join(f'{p}/…' for p in reaches)})",
            field="agent_settings.provider",
        )
    return forced


def load_provider(spec: ModelSpec, forced: str | None = None) -> ComputerProvider:
    """The provider object for `spec`'s model (its module is imported on first use)."""
    name = provider_name(spec, forced)
    module: Any = importlib.import_module(f"helios.agents.computer.{name}")
    return cast(ComputerProvider, module.provider(spec))
