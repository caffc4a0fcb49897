"""A loopback web for tests of the web toolset: a SearXNG-compatible and a
Tavily-compatible search API, and pages (HTML, text, binary, redirects, slow, huge).

    with WebTestServer() as web:
        os.environ["HELIOS_SEARXNG_URL"] = web.searxng_url
        page = f"{web.base_url}/pages/article"

Pages are `(status, content type, body, extra headers)`; `add_page` adds more.
Faults from `LoopbackServer` (statuses, drops, hangs) apply to every request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from helios.testing.loopback import LoopbackServer

Page = tuple[int, str, bytes, dict[str, str]]

ARTICLE = b"""<!doctype html><html><head><title>Helios &amp; Hermes</title>
<style>body { color: red }</style><script>var secret = "not content";</script></head>
<body><nav>Home | About</nav><h1>Batch runners</h1>
<p>Helios runs <a href="/docs">many prompts</a> at once.</p>
<ul><li>fast</li><li>resumable</li></ul><img src="x.png" alt="chart"></body></html>"""


def default_pages() -> dict[str, Page]:
    html = "text/html; charset=utf-8"
    return {
        "article": (200, html, ARTICLE, {}),
        "plain": (200, "text/plain; charset=utf-8", b"just text\nline two\n", {}),
        "latin1": (200, "text/html; charset=iso-8859-1",
                   "<html><body><p>caf\xe9</p></body></html>".encode("latin-1"), {}),
        "pdf": (200, "application/pdf", b"%PDF-1.4 binary", {}),
        "missing": (404, "text/html", b"<h1>not here</h1>", {}),
        "redirect": (302, "text/html", b"", {"Location": "/pages/article"}),
        "loop": (302, "text/html", b"", {"Location": "/pages/loop"}),
        "huge": (200, "text/plain", b"x" * (6 * 1024 * 1024), {}),
        "long": (200, html, b"<html><body>" + b"<p>word </p>" * 20000 + b"</body></html>", {}),
    }  # fmt: skip


class WebTestServer(LoopbackServer):
    def __init__(self, *, hits: list[dict[str, str]] | None = None, tavily_key: str = "tvly-test",
                 slow_seconds: float = 30.0, **faults: Any) -> None:  # fmt: skip
        super().__init__(**faults)
        self.hits = (
            hits
            if hits is not None
            else [
                {"title": "Helios", "url": "https://example.org/helios", "content": "A harness."},
                {"title": "Hermes", "url": "https://example.org/hermes", "content": "An agent."},
            ]
        )
        self.tavily_key = tavily_key
        self.slow_seconds = slow_seconds
        self.pages = default_pages()

    @property
    def searxng_url(self) -> str:
        return f"{self.base_url}/searxng"

    @property
    def tavily_url(self) -> str:
        return f"{self.base_url}/tavily"

    def page_url(self, name: str) -> str:
        return f"{self.base_url}/pages/{name}"

    def add_page(self, name: str, page: Page) -> None:
        self.pages[name] = page

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/searxng/search", self._searxng)
        app.router.add_post("/tavily/search", self._tavily)
        app.router.add_get("/pages/slow", self._slow)
        app.router.add_get("/pages/{name}", self._page)

    async def _searxng(self, request: web.Request) -> web.StreamResponse:
        self.record(request, dict(request.query))
        fault = await self.http_fault(request)
        if fault is not None:
            return fault
        if request.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")
        query = request.query.get("q", "")
        results = [{**hit, "engine": "loopback", "query": query} for hit in self.hits]
        return web.json_response({"query": query, "results": results})

    async def _tavily(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.record(request, body)
        fault = await self.http_fault(request)
        if fault is not None:
            return fault
        if body.get("api_key") != self.tavily_key:
            return web.json_response({"detail": {"error": "Unauthorized"}}, status=401)
        limit = int(body.get("max_results", 5))
        results = [{**hit, "score": 0.9} for hit in self.hits[:limit]]
        return web.json_response({"query": body.get("query"), "results": results})

    async def _slow(self, request: web.Request) -> web.StreamResponse:
        self.record(request, None)
        await asyncio.sleep(self.slow_seconds)
        return web.Response(text="late", content_type="text/plain")

    async def _page(self, request: web.Request) -> web.StreamResponse:
        self.record(request, None)
        fault = await self.http_fault(request)
        if fault is not None:
            return fault
        page = self.pages.get(request.match_info["name"])
        if page is None:
            return web.Response(status=404, text="no such page")
        status, content_type, body, headers = page
        return web.Response(status=status, body=body, headers={"Content-Type": content_type,
                                                               **headers})  # fmt: skip
