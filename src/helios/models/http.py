"""The model clients' transport: one aiohttp session per endpoint, JSON in, JSON out.

Helios builds each request body itself (converted once per message, see
`openai_chat.to_wire`) and reads the reply as a plain dict, so a turn pays for
one JSON encode, one HTTP exchange and one JSON decode. Through the SDKs'
`post()` the same exchange cost 2.0 ms of CPU per call on the benchmark
machines, against 0.37 ms here (`benchmarks/README.md`): the SDKs' request
building, auth hooks and response models were most of a turn's CPU.

Errors are typed exactly as the SDKs' were mapped (`sdk_errors`): refused or
unresolvable endpoints are `ConnectionFailed`; timeouts, dropped connections,
408/409/5xx and unparseable bodies `TransientError`; 429 `RateLimitError` with
Retry-After (or Google's RetryInfo in the body); 401/403 `AuthError` (and Google's
400 for a wrong key); context overflow `ContextWindowError`.

Credentials in the URL's userinfo (`http://user:key@host/v1`) are sent as HTTP
Basic auth, in place of the client's Authorization header (as httpx, and so the
SDKs, do); the URL itself is kept and shown without them.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import aiohttp
import msgspec

from helios.models.base import GenerationConfig, Message, ModelResponse
from helios.models.errors import (
    AuthError,
    ConnectionFailed,
    ModelError,
    RateLimitError,
    TransientError,
)
from helios.models.routing import ModelSpec
from helios.models.sdk_errors import status_error, unreachable_reason
from helios.secrets import public_url, register_secret, register_url

T = TypeVar("T")


class JsonEndpoint:
    """POSTs JSON bodies to one base URL with fixed headers (auth, versions)."""

    def __init__(self, base_url: str, headers: Mapping[str, str]) -> None:
        register_url(base_url)
        self.base_url = public_url(base_url).rstrip("/")
        self.headers = {"Content-Type": "application/json", **headers}
        parts = urlsplit(base_url)
        if parts.username is not None:
            # aiohttp refuses credentials in the URL beside an Authorization header.
            basic = aiohttp.BasicAuth(unquote(parts.username), unquote(parts.password or ""))
            self.headers["Authorization"] = basic.encode()
            register_secret(self.headers["Authorization"].removeprefix("Basic "))
        self._session: aiohttp.ClientSession | None = None

    @property
    def origin(self) -> str:
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    def _open(self) -> aiohttp.ClientSession:
        # No connection cap here: the adaptive limiter bounds calls in flight.
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, headers=self.headers)
        return self._session

    async def post(
        self, path: str, body: dict[str, Any], timeout: float,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """POST `body`; `headers` are added to the endpoint's own for this request
        (Anthropic's beta header, which depends on the tools sent)."""
        session = self._session or self._open()
        # msgspec: a tenth of json.dumps's CPU for a request, which carries the
        # whole conversation each turn (the bytes on the wire are still JSON).
        data = msgspec.json.encode(body)
        try:
            async with session.post(
                self.base_url + path, data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:  # fmt: skip
                raw = await response.read()
                status, headers = response.status, response.headers
        except TimeoutError:
            raise TransientError(f"request timed out after {timeout:g}s") from None
        except aiohttp.ClientConnectorError as exc:
            reason = unreachable_reason(exc) or " ".join(str(exc).split())[:200]
            raise ConnectionFailed(f"cannot connect to {self.origin}: {reason}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise TransientError(f"connection failed: {type(exc).__name__}: {exc}") from None
        if status >= 400:
            raise _status_error(status, raw, headers)
        try:
            parsed = msgspec.json.decode(raw)
        except (ValueError, RecursionError):  # DecodeError is a ValueError; deep nesting
            raise TransientError(f"malformed response: {raw[:200]!r}") from None
        if not isinstance(parsed, dict):
            raise TransientError(f"malformed response: not a JSON object: {raw[:200]!r}")
        return parsed

    async def call(
        self, path: str, body: dict[str, Any], timeout: float,
        parse: Callable[[dict[str, Any]], T], headers: Mapping[str, str] | None = None,
    ) -> T:  # fmt: skip
        """`post`, then the reply read by `parse`: a reply of a shape `parse` cannot
        read is a malformed response (transient, retried), as an unparseable one is."""
        reply = await self.post(path, body, timeout, headers)
        try:
            return parse(reply)
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError,
                RecursionError) as exc:  # fmt: skip
            raise TransientError(f"malformed response: {type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
            # aiohttp closes its transports on the next loop iteration
            await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One turn's request as it goes on the wire: the JSON body and the headers it
    adds to the endpoint's own (never the auth header)."""

    body: dict[str, Any]
    headers: Mapping[str, str] | None = None


class EndpointClient:
    """A model client over one JsonEndpoint (at `spec.base_url`, else the wire's
    `default_url`), which makes one attempt: retries belong to Helios
    (models/retry.py). A turn is one POST to `path`: the body from `_request`, the
    reply read by `_parse`, with the `_headers` the tools need."""

    #: where requests go, under the base URL
    path = ""

    def __init__(self, spec: ModelSpec, default_url: str, headers: Mapping[str, str]) -> None:
        self.name = spec.model
        self.provider = spec.provider
        self._spec = spec
        self._endpoint = JsonEndpoint(spec.base_url or default_url, headers)

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> ModelResponse:
        return await self.send(self.request(messages, tools, config), config)

    def request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> WireRequest:
        """The request a turn sends, built once: what `send` posts, and what the
        response cache keys on (it holds no key: that is in the endpoint's headers)."""
        return WireRequest(self._request(messages, tools, config), self._headers(tools))

    async def send(self, request: WireRequest, config: GenerationConfig) -> ModelResponse:
        return await self._endpoint.call(
            self.path, request.body, config.timeout, self._parse, request.headers
        )

    @property
    def endpoint_url(self) -> str:
        """The endpoint's base URL, without userinfo."""
        return self._endpoint.base_url

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, response: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def _headers(self, tools: list[dict[str, Any]]) -> Mapping[str, str] | None:
        return None

    async def close(self) -> None:
        await self._endpoint.close()


def _status_error(status: int, raw: bytes, headers: Any) -> ModelError:
    message, code, google = _error_text(raw)
    if google.key_invalid:
        # Google answers a wrong key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID).
        return AuthError(f"authentication failed ({status}): {message}", status=status)
    error = status_error(status, message or f"HTTP {status}", headers, code)
    if isinstance(error, RateLimitError) and error.retry_after is None:
        error.retry_after = google.retry_delay  # Google's RetryInfo, in the body
    return error


@dataclass(frozen=True, slots=True)
class _GoogleDetails:
    """What Google's error `details` add: the wait it asks for, and a wrong key."""

    retry_delay: float | None = None
    key_invalid: bool = False


def _error_text(raw: bytes) -> tuple[str, str, _GoogleDetails]:
    """The provider's error message and code from an error body (OpenAI's,
    Anthropic's or Google's), and Google's details."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return " ".join(raw[:400].decode("utf-8", "replace").split()), "", _GoogleDetails()
    inner = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(inner, dict):
        return str(body)[:400], "", _GoogleDetails()
    message = str(inner.get("message") or "")
    code = inner.get("code") or inner.get("type") or ""
    if isinstance(code, int) and isinstance(inner.get("status"), str):
        code = inner["status"]  # Google: code is the HTTP status, status the reason
    return " ".join(message.split())[:400], str(code), _google_details(inner.get("details"))


def _google_details(details: Any) -> _GoogleDetails:
    if not isinstance(details, list):
        return _GoogleDetails()
    delay: float | None = None
    key_invalid = False
    for detail in details[:16]:
        if not isinstance(detail, dict):
            continue
        kind = str(detail.get("@type") or "")
        if kind.endswith("google.rpc.RetryInfo"):
            delay = _duration(detail.get("retryDelay"))
        elif kind.endswith("google.rpc.ErrorInfo") and detail.get("reason") == "API_KEY_INVALID":
            key_invalid = True
    return _GoogleDetails(delay, key_invalid)


def _duration(value: Any) -> float | None:
    """A protobuf Duration as JSON ("17s", "0.5s"), in seconds; None if unreadable."""
    if not isinstance(value, str) or not value.endswith("s"):
        return None
    try:
        seconds = float(value[:-1])
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None
