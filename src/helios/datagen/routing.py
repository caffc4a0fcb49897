"""How `generate` reaches its model: Hermes's routing by default, Helios's on request.

Hermes routing (`--routing hermes`, the default): `--model` goes verbatim to the
OpenAI-compatible endpoint at `--base_url` (default OpenRouter's), with the key
from `--api_key` or the variable that fits the endpoint (OPENROUTER_API_KEY for
OpenRouter). OpenRouter gets its `provider` preferences and `reasoning` in the
request body; without a reasoning flag it gets effort "medium", Hermes's
documented default.

Helios routing (`--routing helios`): `--model` is a Helios `provider/model` name,
so the native Anthropic API (`anthropic/claude-…`, ANTHROPIC_API_KEY), OpenAI,
Gemini and local servers are reached as in `helios batch`.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from helios.datagen.settings import OPENROUTER_URL, GenerateSettings
from helios.errors import ConfigError
from helios.models.base import GenerationConfig, ReasoningEffort
from helios.models.pricing import PriceTable
from helios.models.response_cache import ResponseCache
from helios.models.routing import ModelSpec
from helios.models.services import ModelServices, open_model_services
from helios.secrets import public_url, register_secret, register_url

#: host suffix → (Helios provider, key variable); anything else is "openai-compatible"
KNOWN_ENDPOINTS = (
    ("openrouter.ai", "openrouter", "OPENROUTER_API_KEY"),
    ("api.openai.com", "openai", "OPENAI_API_KEY"),
    ("generativelanguage.googleapis.com", "gemini", "GEMINI_API_KEY"),
)
OTHER_KEY_VARIABLE = "OPENAI_COMPATIBLE_API_KEY"
HERMES_DEFAULT_EFFORT: ReasoningEffort = "medium"


def endpoint_kind(url: str) -> tuple[str, str]:
    host = (urlsplit(url).hostname or "").lower()
    for suffix, provider, variable in KNOWN_ENDPOINTS:
        if host == suffix or host.endswith("." + suffix):
            return provider, variable
    return "openai-compatible", OTHER_KEY_VARIABLE


def generation_config(s: GenerateSettings, provider: str) -> GenerationConfig:
    effort = s.effort
    if effort is None and provider == "openrouter":
        effort = HERMES_DEFAULT_EFFORT
    return GenerationConfig(
        max_tokens=s.max_tokens or 4096,
        # Hermes sends no limit unless asked; the Anthropic API requires one.
        omit_max_tokens=s.max_tokens is None and provider != "anthropic",
        temperature=s.temperature,
        reasoning_effort=effort,
        openrouter_provider=s.openrouter_provider() if provider == "openrouter" else {},
    )


def open_services(s: GenerateSettings) -> ModelServices:
    """The model clients for the run; a ConfigError names what is missing, before any work."""
    if s.routing == "helios":
        from helios.models.routing import split_name

        provider, _ = split_name(s.model)
        return open_model_services(
            s.model, base_url=s.base_url, api_key=s.api_key,
            generation=generation_config(s, provider), prices_path=s.prices, cache=s.cache,
        )  # fmt: skip
    url = s.base_url or OPENROUTER_URL
    register_url(url)  # a key in the URL's userinfo is a key like any other
    if urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"--base_url must be an http(s) URL, got {public_url(url)!r}",
                          field="--base_url")  # fmt: skip
    provider, variable = endpoint_kind(url)
    key = s.api_key or os.environ.get(variable) or None
    if key is None and provider != "openai-compatible":
        raise ConfigError(
            f"no API key for {public_url(url)}: set {variable} or pass --api_key",
            field="--api_key",
        )
    register_secret(key)
    spec = ModelSpec(provider, s.model, "openai", url, key)
    prices = PriceTable.load(s.prices)
    prices.warn_unmatched([spec.qualified])
    cache = ResponseCache.from_settings() if s.cache else None
    return ModelServices(spec=spec, config=generation_config(s, provider), prices=prices,
                         cache=cache)  # fmt: skip
