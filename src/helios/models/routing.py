"""Model names → provider, endpoint and key.

Names are `provider/model`; bare names route by prefix (claude-* → anthropic,
gpt-* and o<digit>* → openai). Keys come from the provider's usual variable or
--api-key, and a missing key is reported before any trial starts. The endpoint is
--base-url, else `<PROVIDER>_BASE_URL`, else the provider's own.

A model name resolves to its provider's usual wire (`api`): Chat Completions, or
Anthropic Messages. An agent that needs another wire of the same provider (the
computer agent: OpenAI's Responses API, Gemini's native generateContent) asks for it
with `ModelSpec.with_api`; the endpoint follows (see `native_base_url`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import urlparse

from helios.errors import ConfigError
from helios.secrets import public_url, register_secret, register_url

#: the model of every door when none is named (`helios batch`, `run`, `generate`),
#: as a Helios provider/model name; the price table and the computer agent know it
DEFAULT_MODEL = "anthropic/claude-sonnet-4-5"


_VERSION = re.compile(r"-(\d+)-(\d+)$")
_DOTTED = r"-\1.\2"


def openrouter_name(model: str) -> str:
    """A Helios `anthropic/…` name as OpenRouter spells it (a dot in the version:
    anthropic/claude-sonnet-4-5 → anthropic/claude-sonnet-4.5); others as they are."""
    provider, _, name = model.rpartition("/")
    if provider != "anthropic":
        return model
    return f"{provider}/{_VERSION.sub(_DOTTED, name)}"


#: the wires: Chat Completions, Anthropic Messages, OpenAI Responses, Gemini generateContent
Api = Literal["openai", "anthropic", "responses", "gemini"]
APIS: tuple[Api, ...] = ("openai", "anthropic", "responses", "gemini")
#: Gemini's own API (generateContent); its default base URL above is the
#: OpenAI-compatible one, which has no computer use
GEMINI_NATIVE_URL = "https://generativelanguage.googleapis.com"


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    api: Api
    base_url: str | None
    key_env: str | None
    #: a key is required (local OpenAI-compatible servers usually need none)
    needs_key: bool = True
    needs_base_url: bool = False


PROVIDERS: dict[str, ProviderInfo] = {
    "anthropic": ProviderInfo("anthropic", "anthropic", None, "ANTHROPIC_API_KEY"),
    "openai": ProviderInfo("openai", "openai", None, "OPENAI_API_KEY"),
    "openrouter": ProviderInfo(
        "openrouter", "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"
    ),
    "gemini": ProviderInfo(
        "gemini",
        "openai",
        "https://generativelanguage.googleapis.com/v1beta/openai/",
        "GEMINI_API_KEY",
    ),
    "openai-compatible": ProviderInfo(
        "openai-compatible",
        "openai",
        None,
        "OPENAI_COMPATIBLE_API_KEY",
        needs_key=False,
        needs_base_url=True,
    ),
}

#: a provider's API when neither the user nor `PROVIDERS` gives a URL (its SDK's
#: default): where an agent in a sandbox calls it, so what its route opens
PUBLIC_URLS: dict[str, str] = {"anthropic": "https://api.anthropic.com",
                               "openai": "https://api.openai.com/v1"}  # fmt: skip

#: the variables that hold a model provider's key: never passed into a sandbox
#: (`--pass-env` refuses them, and so does a task's `${NAME}`)
PROVIDER_KEYS: frozenset[str] = frozenset(
    p.key_env for p in PROVIDERS.values() if p.key_env is not None
)

_BARE_ROUTES = (
    (re.compile(r"^claude-"), "anthropic"),
    (re.compile(r"^(gpt-|chatgpt-|o\d)"), "openai"),
)


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    model: str
    api: Api
    base_url: str | None
    api_key: str | None = field(default=None, repr=False)

    @property
    def qualified(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def url(self) -> str | None:
        """Where the model is called: its base URL, else its provider's public API."""
        return self.base_url or PUBLIC_URLS.get(self.provider)

    def with_api(self, api: Api) -> ModelSpec:
        """The same model and key over another wire of its provider (the computer
        agent's: OpenAI's Responses API, Gemini's generateContent).

        Gemini's default endpoint is its OpenAI-compatible one; the native wire goes
        to Google's own API instead. A URL the user gave (--base-url, GEMINI_BASE_URL)
        is kept, less a trailing `/v1beta[/openai]` (the native client adds the path)."""
        if api not in APIS:
            raise ConfigError(f"unknown model API {api!r} (known: {', '.join(APIS)})")
        if api == self.api:
            return self
        if api == "anthropic" and self.provider != "anthropic":
            raise ConfigError(f"{self.qualified} does not speak Anthropic's Messages API")
        if api == "gemini" and self.provider != "gemini":
            raise ConfigError(f"{self.qualified} does not speak Gemini's generateContent API")
        base_url = native_base_url(self.provider, self.base_url) if api == "gemini" else (
            self.base_url)  # fmt: skip
        return replace(self, api=api, base_url=base_url)


def native_base_url(provider: str, base_url: str | None) -> str:
    """Gemini's native endpoint for a resolved base URL: Google's own for its default
    (OpenAI-compatible) one, else the given URL without `/v1beta` or `/v1beta/openai`."""
    if base_url is None or base_url == PROVIDERS[provider].base_url:
        return GEMINI_NATIVE_URL
    url = base_url.rstrip("/")
    for suffix in ("/openai", "/v1beta"):
        url = url.removesuffix(suffix)
    return url


def key_variable(name: str) -> str | None:
    """The variable the key of model `name` is read from (None: a name no provider
    routes, or a provider without a key): how a saved config names a key."""
    try:
        info = PROVIDERS.get(split_name(name)[0])
    except ConfigError:
        return None
    return info.key_env if info is not None else None


def split_name(name: str) -> tuple[str, str]:
    """`provider/model` → (provider, model); a bare name is routed by its prefix."""
    if "/" in name:
        provider, model = name.split("/", 1)
        if provider in PROVIDERS:
            return provider, model
        if not any(pattern.match(name) for pattern, _ in _BARE_ROUTES):
            raise ConfigError(
                f"unknown model provider {provider!r} in {name!r} "
                f"(known: {', '.join(PROVIDERS)}; or a bare claude-*/gpt-*/o* name)",
                field="--model",
            )
    for pattern, provider in _BARE_ROUTES:
        if pattern.match(name):
            return provider, name
    raise ConfigError(
        f"cannot tell the provider of model {name!r}: write it as provider/model "
        f"(known providers: {', '.join(PROVIDERS)})",
        field="--model",
    )


def _check_url(url: str, source: str) -> None:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(
            f"{source} {public_url(url)!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)",
            field="--base-url",
        )


def base_url_variable(provider: str) -> str:
    return provider.upper().replace("-", "_") + "_BASE_URL"


def resolve_model(
    name: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelSpec:
    """Resolve a model name to an endpoint and key, or raise a one-line ConfigError."""
    env = os.environ if environ is None else environ
    provider_name, model = split_name(name.strip())
    if not model:
        raise ConfigError(f"model name missing in {name!r}", field="--model")
    info = PROVIDERS[provider_name]
    # <PROVIDER>_BASE_URL (e.g. ANTHROPIC_BASE_URL, as the SDKs read it) points a provider
    # at a proxy or a local server without changing code.
    url = base_url or env.get(base_url_variable(provider_name)) or info.base_url
    register_url(url)  # a key in the URL's userinfo is a key like any other
    if url is not None:
        _check_url(url, "--base-url" if base_url else base_url_variable(provider_name))
    if info.needs_base_url and not url:
        raise ConfigError(
            f"{provider_name} models need --base-url (e.g. http://127.0.0.1:8000/v1)",
            field="--base-url",
        )
    key = api_key or (env.get(info.key_env) if info.key_env else None) or None
    if key is None and info.needs_key:
        raise ConfigError(
            f"no API key for {provider_name}/{model}: set {info.key_env} or pass --api-key; "
            "or choose another model with -m, or run without a model with --agent oracle",
            field="--api-key",
        )
    register_secret(key)
    return ModelSpec(provider_name, model, info.api, url, key)
