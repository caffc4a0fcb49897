"""Fetching one page for `web_extract`: bounded, redirect-checked, HTML turned into Markdown.

The fetch runs on the host (sandboxes have no network), and the model chooses the
URL, so by default only public addresses are reachable: every hop of a redirect is
checked, IP literals directly and host names through a resolver that refuses
private, loopback, link-local and reserved addresses (which also defeats DNS
rebinding between the check and the connection).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from html import unescape
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import ResolveResult
from aiohttp.resolver import ThreadedResolver

from helios.agents.toolsets.hermes.web_backends import USER_AGENT, WebError, WebSettings

MAX_REDIRECTS = 5
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "text/xml"})
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    title: str
    content: str


def _public(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_global
    except ValueError:
        return False


class PublicResolver(ThreadedResolver):
    """Resolves like the default resolver, but refuses names that lead to non-public IPs."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await super().resolve(host, port, family)
        if any(not _public(str(answer["host"])) for answer in answers):
            raise OSError(f"{host} resolves to a private or local address, which is not allowed")
        return answers


def check_url(url: str, allow_private: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebError(f"not an http(s) URL: {url[:200]}")
    if allow_private:
        return
    host = parts.hostname
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            raise WebError(f"{host} is a local address, which is not allowed") from None
        return  # a name: the resolver checks where it leads
    if not _public(host):
        raise WebError(f"{host} is a private or local address, which is not allowed")


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65536):
        size += len(chunk)
        if size > limit:
            raise WebError(f"the page is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def html_to_text(html: str) -> tuple[str, str]:
    """(title, Markdown) of an HTML document."""
    import html_to_markdown  # lazy: an optional dependency (the `web` extra)

    match = _TITLE.search(html[:200_000])
    title = " ".join(unescape(match.group(1)).split()) if match else ""
    options = html_to_markdown.ConversionOptions(extract_metadata=False, skip_images=True)
    return title, html_to_markdown.convert(html, options).content or ""


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


async def fetch_page(url: str, settings: WebSettings) -> Page:
    """The page at `url` as Markdown text; WebError with a one-line reason otherwise."""
    resolver = ThreadedResolver() if settings.allow_private else PublicResolver()
    connector = aiohttp.TCPConnector(resolver=resolver, limit=4)
    timeout = aiohttp.ClientTimeout(total=settings.timeout)
    try:
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers={"User-Agent": USER_AGENT}
        ) as session:
            return await _follow(session, url, settings)
    except TimeoutError:
        raise WebError(f"fetching {url[:200]} took longer than {settings.timeout:g}s") from None
    except aiohttp.ClientError as exc:
        raise WebError(f"fetching {url[:200]} failed: {exc}") from None


async def _follow(session: aiohttp.ClientSession, url: str, settings: WebSettings) -> Page:
    for _ in range(MAX_REDIRECTS + 1):
        check_url(url, settings.allow_private)
        async with session.get(url, allow_redirects=False) as response:
            location = response.headers.get("Location")
            if response.status in (301, 302, 303, 307, 308) and location:
                url = urljoin(url, location)
                continue
            if response.status >= 400:
                raise WebError(f"{url[:200]} answered HTTP {response.status}")
            body = await _read_capped(response, settings.max_bytes)
            return _page(url, response.content_type, response.charset, body)
    raise WebError(f"more than {MAX_REDIRECTS} redirects from {url[:200]}")


def _page(url: str, content_type: str, charset: str | None, body: bytes) -> Page:
    text = _decode(body, charset)
    if content_type in HTML_TYPES or (not content_type and "<html" in text[:1000].lower()):
        title, markdown = html_to_text(text)
        return Page(url, title, markdown.strip())
    if content_type.startswith("text/") or content_type in TEXT_TYPES:
        return Page(url, "", text.strip())
    raise WebError(f"{url[:200]} is {content_type or 'of an unknown type'}; only HTML and "
                   "text pages can be extracted")  # fmt: skip
