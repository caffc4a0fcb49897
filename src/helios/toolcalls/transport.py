"""What the HTTP and WebSocket adapters share: one aiohttp session per event loop,
bounded reads, and how their transport's failures become Helios's typed errors.

The typing is the model layer's (`helios.models.sdk_errors`): an HTTP status maps as
it does for a model client (so a 400 that says the context is too long is a
`ContextWindowError`), a peer that cannot be reached is a `ConnectionFailed`. The
engine's endpoint calls (`helios.engine.EndpointCalls`) apply `classify` to what an
agent or synthesizer raises and retry the transient errors with its backoff."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from helios.models.errors import (
    AuthError,
    BadRequestError,
    ConnectionFailed,
    ModelError,
    TransientError,
)
from helios.models.sdk_errors import map_sdk_error, status_error, unreachable_reason
from helios.secrets import redact

#: bytes of an error body kept in a message
_BODY_LIMIT = 300
#: the largest answer read from a peer (HTTP body or WebSocket message): a hostile
#: or broken endpoint must not exhaust memory
MAX_ANSWER_BYTES = 64 * 1024 * 1024


def http_error(status: int, body: str, headers: Mapping[str, str] | None, peer: str) -> ModelError:
    """The typed error for an HTTP status that is not a success (the model layer's
    mapping), its message naming the peer and the start of its body."""
    text = redact(" ".join(body.split()))[:_BODY_LIMIT]
    return status_error(status, f"{peer}: {text}" if text else peer, headers)


def classify(exc: BaseException) -> ModelError | None:
    """A typed error for a failure of an agent's or synthesizer's transport, or None
    when it is not one (a bug, a bad answer: the run fails with it as it is).

    Recognised: aiohttp's status, connection and payload errors, timeouts, OS
    connection errors, the openai SDK's errors and httpx's transport errors (by
    module name: neither package is imported for it)."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, aiohttp.WSServerHandshakeError):
        return http_error(exc.status, exc.message, exc.headers, "websocket handshake")
    if isinstance(exc, aiohttp.ClientResponseError):
        return http_error(exc.status, exc.message, exc.headers, "server")
    if isinstance(exc, aiohttp.ClientConnectorError):
        # Nothing listens there: retried only briefly, and a few in a row stop the batch.
        reason = unreachable_reason(exc)
        if reason is not None:
            return ConnectionFailed(f"cannot connect to {exc.host}:{exc.port}: {reason}")
    if isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError):
        return TransientError(f"connection failed: {type(exc).__name__}: {exc}")
    if isinstance(exc, TimeoutError):
        return TransientError(f"timed out: {exc}" if str(exc) else "timed out")
    if isinstance(exc, ConnectionError):
        return TransientError(f"connection failed: {type(exc).__name__}: {exc}")
    module = type(exc).__module__
    if module.startswith("openai") and isinstance(exc, Exception):
        import openai

        return map_sdk_error(exc, openai)
    names = {cls.__name__ for cls in type(exc).__mro__}
    if module.startswith("httpx") and "TransportError" in names:
        return TransientError(f"connection failed: {type(exc).__name__}: {exc}")
    return None


class SessionHolder:
    """A lazily opened aiohttp session, re-opened when the event loop changes
    (pytest runs each test in a loop of its own)."""

    def __init__(self, timeout: float, headers: Mapping[str, str] | None = None) -> None:
        self.timeout = timeout
        self.headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # A session of a finished loop cannot be closed from here; drop it.
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers=self.headers,
                connector=aiohttp.TCPConnector(limit=0),
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is _running_loop():
            with contextlib.suppress(Exception):
                await session.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def read_json_response(response: aiohttp.ClientResponse, peer: str) -> Any:
    """The JSON body of a response, or the typed error for its status or a bad body."""
    body = await read_bounded(response, peer)
    text = body.decode("utf-8", errors="replace")
    if response.status >= 400:
        raise http_error(response.status, text, response.headers, peer)
    try:
        return json.loads(text)
    except ValueError:
        raise TransientError(f"{peer} sent a body that is not JSON: {text[:120]!r}") from None


async def read_bounded(response: aiohttp.ClientResponse, peer: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise BadRequestError(f"{peer} sent more than {MAX_ANSWER_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode_ws_message(message: aiohttp.WSMessage) -> Any:
    """A text or binary WebSocket frame as JSON if it parses, else as it came."""
    data = message.data
    if isinstance(data, bytes):
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return data
    try:
        return json.loads(data)
    except (TypeError, ValueError):
        return data


def ws_closed_error(message: aiohttp.WSMessage, peer: str) -> ModelError:
    """The error for a WebSocket that closed before the answer was complete."""
    code = message.data if isinstance(message.data, int) else None
    reason = message.extra or ""
    if code in (1008, 4001, 4003) and "auth" in str(reason).lower():
        return AuthError(f"{peer} closed the connection: {code} {reason}")
    return TransientError(f"{peer} closed the connection before answering ({code} {reason})")


async def aclose_quietly(component: Any) -> None:
    close = getattr(component, "aclose", None)
    if close is None:
        return
    with contextlib.suppress(Exception):
        await close()
