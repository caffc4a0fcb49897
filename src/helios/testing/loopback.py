"""A base for loopback test servers: an aiohttp app on 127.0.0.1, run in the
caller's loop (`async with`) or in a thread of its own (`with`), with faults
injected in order (`fail_sequence`) and every request recorded.

Faults: an HTTP status (429 carries `Retry-After`), "drop" (the socket closes
before any byte of a response), "close" (a WebSocket closes at once after its
handshake), "hang" (no answer for `hang_seconds`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

Fault = int | str
#: set on a request whose WebSocket must close right after its handshake
CLOSE_AFTER_HANDSHAKE = web.RequestKey("close_after_handshake", bool)
_WORDS = frozenset({"drop", "close", "hang"})


@dataclass
class Received:
    """One request as the server saw it."""

    path: str
    body: Any
    headers: dict[str, str] = field(repr=False)
    #: decoded audio bytes the request carried (WAV, or PCM for the realtime APIs)
    audio: bytes = b""


def check_faults(items: Iterable[Fault]) -> list[Fault]:
    checked: list[Fault] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and 400 <= item <= 599:
            checked.append(item)
        elif item in _WORDS:
            checked.append(str(item))
        else:
            raise ValueError(f"faults are 4xx/5xx statuses or {sorted(_WORDS)}: {item!r}")
    return checked


class LoopbackServer:
    def __init__(
        self,
        *,
        fail_sequence: Iterable[Fault] = (),
        retry_after: float = 0.0,
        require_key: str | None = None,
        latency: float = 0.0,
        hang_seconds: float = 30.0,
    ) -> None:
        self._faults: deque[Fault] = deque(check_faults(fail_sequence))
        self.retry_after = retry_after
        self.require_key = require_key
        self.latency = latency
        self.hang_seconds = hang_seconds
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    # -- what subclasses supply ------------------------------------------------
    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    # -- addresses ---------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_base_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    # -- faults and bookkeeping ---------------------------------------------------
    def set_faults(self, fail_sequence: Iterable[Fault]) -> None:
        with self._lock:
            self._faults = deque(check_faults(fail_sequence))

    def next_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def record(self, request: web.Request, body: Any, audio: bytes = b"") -> Received:
        headers = {k.lower(): v for k, v in request.headers.items()}
        entry = Received(request.path, body, headers, audio)
        with self._lock:
            self.received.append(entry)
        return entry

    def count(self, path_part: str) -> int:
        with self._lock:
            return sum(1 for r in self.received if path_part in r.path)

    def key_ok(self, request: web.Request) -> bool:
        if self.require_key is None:
            return True
        auth = request.headers.get("Authorization", "")
        given = (
            auth.removeprefix("Bearer ")
            or request.headers.get("x-goog-api-key")
            or request.query.get("key")
        )
        return given == self.require_key

    async def http_fault(self, request: web.Request) -> web.StreamResponse | None:
        """Apply the next fault to an HTTP request; None means answer normally."""
        if self.latency:
            await asyncio.sleep(self.latency)
        if not self.key_ok(request):
            return web.json_response({"error": {"message": "invalid api key"}}, status=401)
        fault = self.next_fault()
        if fault is None:
            return None
        if fault == "close":
            request[CLOSE_AFTER_HANDSHAKE] = True
            return None
        if fault == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)  # never reaches the client
        if fault == "hang":
            await asyncio.sleep(self.hang_seconds)
            return web.Response(status=504)
        headers = {"Retry-After": f"{self.retry_after:g}"} if fault == 429 else {}
        body = {"error": {"message": f"injected {fault}", "code": "injected"}}
        return web.json_response(body, status=int(fault), headers=headers)

    # -- lifecycle in the caller's loop ------------------------------------------
    async def start_async(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        self.routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop_async(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._port = None

    async def __aenter__(self) -> LoopbackServer:
        await self.start_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_async()

    # -- lifecycle in a thread of its own ------------------------------------------
    def start(self, timeout: float = 10.0) -> LoopbackServer:
        ready = threading.Event()
        errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._main, args=(ready, errors), daemon=True,
                                        name=type(self).__name__)  # fmt: skip
        self._thread.start()
        if not ready.wait(timeout) or errors:
            raise RuntimeError(f"{type(self).__name__} did not start") from (
                errors[0] if errors else None
            )
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _main(self, ready: threading.Event, errors: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def serve() -> None:
            self._stop = asyncio.Event()
            try:
                await self.start_async()
            except BaseException as exc:
                errors.append(exc)
                return
            finally:
                ready.set()
            await self._stop.wait()
            await self.stop_async()

        try:
            loop.run_until_complete(serve())
        finally:
            loop.close()
