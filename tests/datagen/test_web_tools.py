"""The web toolset against loopback search APIs and pages: nothing reaches the internet."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from helios.agents.toolsets import ToolContext, get_toolset
from helios.agents.toolsets.hermes.web import WebExtractTool, WebSearchTool
from helios.agents.toolsets.hermes.web_backends import web_unavailable_reason
from helios.agents.toolsets.hermes.web_fetch import PublicResolver, check_url
from helios.environments.null import NullEnvironment
from helios.environments.spec import NULL_SPEC
from helios.testing.web_server import WebTestServer


@pytest.fixture
def web(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebTestServer]:
    with WebTestServer(slow_seconds=5) as server:
        assert isinstance(server, WebTestServer)
        monkeypatch.delenv("TAVILY_API_KEY", raising=False)
        monkeypatch.setenv("HELIOS_SEARXNG_URL", server.searxng_url)
        monkeypatch.setenv("HELIOS_WEB_ALLOW_PRIVATE", "1")
        monkeypatch.setenv("HELIOS_WEB_TIMEOUT", "2")
        yield server


def _call(tool: Any, **arguments: Any) -> tuple[dict[str, Any], bool]:
    ctx = ToolContext(env=NullEnvironment(NULL_SPEC, trial_id="w", run_id="w"), workdir="/app",
                      max_output_chars=6000)  # fmt: skip
    outcome = asyncio.run(tool.run(arguments, ctx))
    return json.loads(outcome.output), outcome.is_error


def test_without_configuration_the_toolset_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIOS_SEARXNG_URL", "TAVILY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    reason = web_unavailable_reason()
    assert reason is not None and "HELIOS_SEARXNG_URL" in reason and "TAVILY_API_KEY" in reason
    assert get_toolset("web").unavailable_reason() == reason


def test_search_through_searxng(web: WebTestServer) -> None:
    result, failed = _call(WebSearchTool(), query="helios harness", limit=1)
    assert not failed
    assert result == {"success": True, "data": {"web": [{
        "title": "Helios", "url": "https://example.org/helios", "description": "A harness.",
        "position": 1}]}}  # fmt: skip
    assert web.received[-1].body == {"q": "helios harness", "format": "json"}


def test_search_through_tavily_with_its_key(
    web: WebTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HELIOS_SEARXNG_URL")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    monkeypatch.setenv("TAVILY_API_URL", web.tavily_url)
    result, failed = _call(WebSearchTool(), query="hermes")
    assert not failed and [h["title"] for h in result["data"]["web"]] == ["Helios", "Hermes"]
    assert web.received[-1].body == {"api_key": "tvly-test", "query": "hermes", "max_results": 5}
    monkeypatch.setenv("TAVILY_API_KEY", "wrong")
    result, failed = _call(WebSearchTool(), query="hermes")
    assert failed and "HTTP 401" in result["error"]


def test_search_backend_errors_are_failures_not_crashes(web: WebTestServer) -> None:
    web.set_faults([500, 429])
    for _ in range(2):
        result, failed = _call(WebSearchTool(), query="x")
        assert failed and result["success"] is False and "web search failed" in result["error"]


def test_extract_turns_html_into_markdown(web: WebTestServer) -> None:
    result, failed = _call(WebExtractTool(), urls=[web.page_url("article"), web.page_url("plain"),
                                                    web.page_url("latin1")])  # fmt: skip
    assert not failed
    article, plain, latin = result["results"]
    assert article["title"] == "Helios & Hermes"
    assert "# Batch runners" in article["content"]
    assert "[many prompts](/docs)" in article["content"] and "- fast" in article["content"]
    assert "secret" not in article["content"] and "color" not in article["content"]
    assert plain == {"url": web.page_url("plain"), "title": "", "content": "just text\nline two"}
    assert "café" in latin["content"]


def test_extract_follows_redirects_and_reports_each_failure(web: WebTestServer) -> None:
    urls = [web.page_url(n) for n in ("redirect", "missing", "pdf", "loop", "huge", "slow")]
    result, failed = _call(WebExtractTool(), urls=urls[:5])
    assert not failed  # one page worked
    redirected, missing, pdf, loop, huge = result["results"]
    assert redirected["url"] == web.page_url("article") and "Batch runners" in redirected["content"]
    assert "HTTP 404" in missing["error"]
    assert "application/pdf" in pdf["error"]
    assert "redirects" in loop["error"]
    assert "larger than" in huge["error"]
    result, failed = _call(WebExtractTool(), urls=[urls[5]])
    assert failed and "longer than 2s" in result["results"][0]["error"]


def test_long_pages_are_cut_and_the_result_stays_json(web: WebTestServer) -> None:
    result, _ = _call(WebExtractTool(), urls=[web.page_url("long")] * 2)
    assert all("characters truncated" in page["content"] for page in result["results"])


def test_private_addresses_are_refused_unless_allowed(
    web: WebTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HELIOS_WEB_ALLOW_PRIVATE")
    urls = [
        web.page_url("article"),
        f"http://localhost:{web.port}/pages/article",
        "http://169.254.169.254/latest/meta-data",
        "file:///etc/passwd",
        "ftp://example.org/",
    ]
    result, failed = _call(WebExtractTool(), urls=urls)
    assert failed
    errors = [page["error"] for page in result["results"]]
    assert "private or local" in errors[0] and "local address" in errors[1]
    assert "private or local" in errors[2]
    assert "not an http(s) URL" in errors[3] and "not an http(s) URL" in errors[4]
    assert web.count("/pages/") == 0  # nothing was fetched


def test_the_resolver_refuses_names_that_lead_to_private_addresses() -> None:
    # A name (not an IP literal) is checked where it resolves: this defeats a public
    # name pointing at 127.0.0.1, and DNS rebinding between check and connection.
    async def resolve() -> None:
        await PublicResolver().resolve("localhost", 80)

    with pytest.raises(OSError, match="private or local"):
        asyncio.run(resolve())
    assert check_url("http://example.org/x", allow_private=False) is None


def test_bad_arguments_are_errors_for_the_model(web: WebTestServer) -> None:
    result, failed = _call(WebExtractTool(), urls=["a"] * 6)
    assert failed and "urls" in result["error"]
    result, failed = _call(WebSearchTool(), query="  ")
    assert failed and "empty" in result["error"]
