"""Hermes's `web` toolset: `web_search` and `web_extract`.

Both run on the host through the backend configured by environment variables
(see `web_backends`); results use Hermes's shapes: search hits under
`data.web`, extracted pages under `results`.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import Field

from helios.agents.tools_text import ToolInputError, truncate_middle
from helios.agents.toolsets.base import ToolContext
from helios.agents.toolsets.hermes.base import HermesArgs, HermesTool, tool_spec
from helios.agents.toolsets.hermes.web_backends import WebError, web_settings
from helios.agents.toolsets.hermes.web_fetch import fetch_page

MAX_URLS = 5


class WebSearchArgs(HermesArgs):
    query: str = Field(description="The search query to look up on the web")
    limit: int = Field(5, ge=1, le=20, description="Maximum number of results (default 5)")


class WebExtractArgs(HermesArgs):
    urls: list[str] = Field(
        description=f"List of URLs to extract content from (max {MAX_URLS} URLs per call)",
        max_length=MAX_URLS,
    )


class WebSearchTool(HermesTool[WebSearchArgs]):
    Args: ClassVar[type[WebSearchArgs]] = WebSearchArgs
    spec = tool_spec(
        "web_search",
        "Search the web. Returns the top results with their titles, URLs and short "
        "descriptions; read a page in full with web_extract.",
        WebSearchArgs,
    )

    async def call(self, args: WebSearchArgs, ctx: ToolContext) -> dict[str, Any]:
        if not args.query.strip():
            raise ToolInputError("web_search: the query is empty")
        settings = web_settings()
        if settings.backend is None:
            raise ToolInputError("web_search: no search backend is configured")
        try:
            hits = await settings.backend.search(args.query, args.limit, settings.timeout)
        except (WebError, OSError) as exc:
            return {"success": False, "error": f"web search failed: {exc}"}
        except TimeoutError:
            return {"success": False, "error": "web search timed out"}
        web = [
            {"title": h.title, "url": h.url, "description": h.description, "position": i}
            for i, h in enumerate(hits, 1)
        ]
        return {"success": True, "data": {"web": web}}


class WebExtractTool(HermesTool[WebExtractArgs]):
    Args: ClassVar[type[WebExtractArgs]] = WebExtractArgs
    spec = tool_spec(
        "web_extract",
        "Fetch web pages and return their main content as Markdown text (no summarisation). "
        "Long pages are cut in the middle. Only HTML and plain-text pages can be extracted.",
        WebExtractArgs,
    )

    async def call(self, args: WebExtractArgs, ctx: ToolContext) -> dict[str, Any]:
        urls = [url.strip() for url in args.urls if url.strip()]
        if not urls:
            raise ToolInputError("web_extract: no URL given")
        settings = web_settings()
        pages = await asyncio.gather(*(self._one(url, settings) for url in urls))
        # Every page gets an equal share of the output limit, so the JSON stays whole.
        share = max((ctx.max_output_chars - 300 * len(pages)) // len(pages), 200)
        for page in pages:
            if "content" in page:
                page["content"] = truncate_middle(page["content"], share)
        result: dict[str, Any] = {"results": pages}
        if all("error" in page for page in pages):
            result["error"] = "no page could be extracted"
        return result

    @staticmethod
    async def _one(url: str, settings: Any) -> dict[str, Any]:
        try:
            page = await fetch_page(url, settings)
        except WebError as exc:
            return {"url": url, "error": str(exc)}
        return {"url": page.url, "title": page.title, "content": page.content}
