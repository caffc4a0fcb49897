"""The web toolset's configuration and its search backends, from the run's settings
snapshot (`helios.settings.current()`: the variables as the run read them once):

- `HELIOS_SEARXNG_URL`: a SearXNG instance (its JSON format must be enabled);
- `TAVILY_API_KEY` (and optionally `TAVILY_API_URL`, as Hermes reads them): Tavily;
- `HELIOS_WEB_ALLOW_PRIVATE=1`: let `web_extract` fetch private and loopback
  addresses (off by default: the model picks the URLs, and the fetch runs on the host);
- `HELIOS_WEB_TIMEOUT` (seconds, default 20) and `HELIOS_WEB_MAX_BYTES` (default 5 MB).

Without a search backend the toolset is unavailable and says what to set;
nothing is faked.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from helios.settings import HeliosSettings
from helios.settings import current as helios_settings

DEFAULT_TAVILY_URL = "https://api.tavily.com"
USER_AGENT = "Mozilla/5.0 (compatible; helios-harness web tools)"


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    description: str


class SearchBackend(Protocol):
    @property
    def name(self) -> str: ...

    async def search(self, query: str, limit: int, timeout: float) -> list[SearchHit]: ...


class WebError(Exception):
    """A search or fetch that failed; the message goes to the model."""


def _hits(items: Any, text_key: str, limit: int) -> list[SearchHit]:
    if not isinstance(items, list):
        raise WebError("the search backend answered without a results list")
    hits = [
        SearchHit(str(i.get("title") or ""), str(i.get("url") or ""), str(i.get(text_key) or ""))
        for i in items
        if isinstance(i, dict) and i.get("url")
    ]
    return hits[:limit]


async def _json(response: aiohttp.ClientResponse, backend: str) -> Any:
    if response.status >= 400:
        body = (await response.text(errors="replace"))[:200]
        raise WebError(f"{backend} answered HTTP {response.status}: {body}")
    try:
        return await response.json(content_type=None)
    except ValueError as exc:
        raise WebError(f"{backend} answered with invalid JSON: {exc}") from None


@dataclass(frozen=True)
class SearxngBackend:
    url: str
    name: str = "searxng"

    async def search(self, query: str, limit: int, timeout: float) -> list[SearchHit]:
        params = {"q": query, "format": "json"}
        async with (
            aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=timeout), headers={"User-Agent": USER_AGENT}
            ) as session,
            session.get(f"{self.url.rstrip('/')}/search", params=params) as response,
        ):
            data = await _json(response, "SearXNG")
        return _hits(data.get("results") if isinstance(data, dict) else None, "content", limit)


@dataclass(frozen=True)
class TavilyBackend:
    url: str
    api_key: str
    name: str = "tavily"

    async def search(self, query: str, limit: int, timeout: float) -> list[SearchHit]:
        body = {"api_key": self.api_key, "query": query, "max_results": limit}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.post(f"{self.url.rstrip('/')}/search", json=body) as response,
        ):
            data = await _json(response, "Tavily")
        return _hits(data.get("results") if isinstance(data, dict) else None, "content", limit)


@dataclass(frozen=True)
class WebSettings:
    backend: SearchBackend | None
    allow_private: bool = False
    timeout: float = 20.0
    max_bytes: int = 5 * 1024 * 1024


def web_settings(settings: HeliosSettings | None = None) -> WebSettings:
    """The toolset's settings from `settings` (default: the run's snapshot, which
    registered the Tavily key as a secret when it was read)."""
    settings = helios_settings() if settings is None else settings
    backend: SearchBackend | None = None
    if settings.searxng_url:
        backend = SearxngBackend(settings.searxng_url)
    elif settings.tavily_api_key:
        backend = TavilyBackend(settings.tavily_api_url or DEFAULT_TAVILY_URL,
                                settings.tavily_api_key)  # fmt: skip
    return WebSettings(
        backend=backend,
        allow_private=settings.web_allow_private,
        timeout=settings.number("HELIOS_WEB_TIMEOUT", 20.0),
        max_bytes=int(settings.number("HELIOS_WEB_MAX_BYTES", 5 * 1024 * 1024)),
    )


def web_unavailable_reason() -> str | None:
    """None when the web toolset can run here; else what to configure."""
    if web_settings().backend is None:
        return (
            "no web search backend is configured: set HELIOS_SEARXNG_URL (a SearXNG instance "
            "with format=json enabled) or TAVILY_API_KEY"
        )
    if importlib.util.find_spec("html_to_markdown") is None:
        return "page extraction needs html-to-markdown: pip install 'helios-harness[web]'"
    return None
