"""A real HTTP model server on 127.0.0.1 that speaks the providers' wires, for tests only:
OpenAI Chat Completions and Responses, Anthropic Messages, and Gemini's generateContent
(streamed too), with each one's computer-use tool played from canonical GUI steps
(`mock_gui`).

Replies come from a :class:`~helios.testing.mock_script.Script`; faults (latency, 429/500,
dropped connections, malformed bodies, auth failures) are injected on demand so retry and
error handling can be exercised without ever reaching a real provider.

In-process::

    with MockLLMServer(script={"scenarios": [...]}, rate_429=0.2, seed=1) as server:
        client = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="k")

As a process, serving until SIGTERM/SIGINT; with ``--port-file`` it writes the bound port
to a file so a parent process can find the server::

    python -m helios.testing.mock_llm --port 0 --script s.json --port-file /tmp/port
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import random
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from helios.testing.mock_dialects import ROUTES, Dialect, read_json
from helios.testing.mock_faults import (
    FaultKind,
    Faults,
    check_fail_sequence,
    injected,
    parse_fail_sequence,
)
from helios.testing.mock_gui import ScriptError
from helios.testing.mock_script import InvalidRequest, RecordedRequest, Script

__all__ = ["Faults", "MockLLMServer", "RecordedRequest", "Script", "main"]

_STAT_KEYS = (
    "requests", "served_ok", "streamed", "injected_429", "injected_500", "injected_other",
    "dropped", "malformed", "auth_failed", "context_overflow", "bad_request", "unmatched",
    "script_error", "rate_limited", "peak_per_second",
)  # fmt: skip


class MockLLMServer:
    """Scripted OpenAI + Anthropic HTTP server with fault injection.

    Use ``with MockLLMServer(...) as s`` (own loop in a background thread) or
    ``async with MockLLMServer(...) as s`` / ``await s.start_async()`` (inside a running loop).
    Safe to reconfigure from any thread while it serves.
    """

    def __init__(
        self,
        script: Script | Mapping[str, Any] | str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        rate_429: float = 0.0,
        retry_after: float = 1.0,
        rate_500: float = 0.0,
        drop: float = 0.0,
        malformed: float = 0.0,
        fail_sequence: Sequence[FaultKind] = (),
        require_key: str | None = None,
        seed: int | None = None,
        strict_history: bool = True,
        max_recorded: int = 1000,
        retry_after_headers: Sequence[str] = (),
        reported_model: str | None = None,
        rate_limit_rps: float = 0.0,
    ) -> None:
        self.script = Script.coerce(script)
        #: raw Retry-After values for 429s, each its own header (a duplicated or
        #: malformed header, as proxies send them); empty = `retry_after`
        self.retry_after_headers = tuple(retry_after_headers)
        self.host = host
        #: the model id replies name, as a provider that serves `gpt-4o` from its
        #: `gpt-4o-2024-08-06` snapshot does; None: the one asked for (settable live)
        self.reported_model = reported_model
        self.strict_history = strict_history
        self._requested_port = port
        self._faults = Faults(
            latency_ms, rate_429, retry_after, rate_500, drop, malformed, require_key, jitter_ms,
            rate_limit_rps,
        )
        #: when the requests of the last second arrived (every one), and when those
        #: answered arrived (`rate_limit_rps`)
        self._arrivals: deque[float] = deque()
        self._answered: deque[float] = deque()
        # Its own generator: jitter must not shift the seeded sequence of faults.
        self._jitter = random.Random(seed)
        self._fail_queue: deque[FaultKind] = deque(check_fail_sequence(fail_sequence))
        self._rng = random.Random(seed)
        # Handlers run on the server loop while tests read and reconfigure from their own thread.
        self._lock = threading.Lock()
        self._stats: dict[str, int] = dict.fromkeys(_STAT_KEYS, 0)
        self._per_path: dict[str, int] = {}
        self._requests: deque[RecordedRequest] = deque(maxlen=max_recorded)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._startup_error: BaseException | None = None

    # ----- addresses ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("MockLLMServer is not running")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        # The Anthropic SDK appends /v1/messages itself.
        return self.base_url

    @property
    def gemini_base_url(self) -> str:
        # Gemini's native client appends /v1beta/models/{model}:generateContent.
        return self.base_url

    # ----- observation -------------------------------------------------------------------------

    @property
    def stats(self) -> dict[str, Any]:
        """Snapshot of the counters (plus ``per_path``), safe to keep and compare."""
        with self._lock:
            return {**self._stats, "per_path": dict(self._per_path)}

    @property
    def requests(self) -> list[RecordedRequest]:
        """The most recent requests (bounded by ``max_recorded``), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def faults(self) -> Faults:
        return self._faults

    def reset_stats(self) -> None:
        """Zero the counters and forget the recorded requests."""
        with self._lock:
            self._stats = dict.fromkeys(_STAT_KEYS, 0)
            self._per_path.clear()
            self._requests.clear()

    # ----- runtime configuration ---------------------------------------------------------------

    def set_faults(self, **changes: Any) -> Faults:
        """Change fault settings while running. Takes the constructor's fault names plus
        ``fail_sequence`` (replaces the pending queue) and ``seed`` (re-seeds the RNG)."""
        fail_sequence = changes.pop("fail_sequence", None)
        reseed = "seed" in changes
        seed = changes.pop("seed", None)
        new_faults = replace(self._faults, **changes)  # TypeError on unknown names
        queue = None if fail_sequence is None else check_fail_sequence(fail_sequence)
        with self._lock:
            self._faults = new_faults
            if queue is not None:
                self._fail_queue = deque(queue)
            if reseed:
                self._rng.seed(seed)
        return new_faults

    def set_script(self, script: Script | Mapping[str, Any] | str | Path | None) -> None:
        self.script = Script.coerce(script)

    # ----- lifecycle: inside an existing loop --------------------------------------------------

    async def start_async(self) -> None:
        if self._runner is not None:
            raise RuntimeError("MockLLMServer already started")
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/_control", self._handle_control)
        app.router.add_get("/_stats", self._handle_stats)
        for path, dialect in ROUTES.items():
            app.router.add_post(path, functools.partial(self._handle_model, dialect=dialect))
        # A short shutdown_timeout: a test that stops mid-latency should not hang for a minute.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop_async(self) -> None:
        runner, self._runner = self._runner, None
        self._port = None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> MockLLMServer:
        await self.start_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_async()

    # ----- lifecycle: own loop in a background thread ------------------------------------------

    def start(self, timeout: float = 10.0) -> MockLLMServer:
        if self._thread is not None:
            raise RuntimeError("MockLLMServer already started")
        ready = threading.Event()
        self._startup_error = None
        self._thread = threading.Thread(
            target=self._thread_main, args=(ready,), name="mock-llm-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("MockLLMServer did not start in time")
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("MockLLMServer failed to start") from self._startup_error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None or loop is None or stop_event is None:
            return
        loop.call_soon_threadsafe(stop_event.set)
        thread.join(timeout)
        self._thread = None

    def __enter__(self) -> MockLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _thread_main(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve_until_stopped(ready))
        finally:
            loop.close()

    async def _serve_until_stopped(self, ready: threading.Event) -> None:
        self._stop_event = asyncio.Event()
        try:
            await self.start_async()
        except BaseException as exc:  # reported to start() in the caller's thread
            self._startup_error = exc
            return
        finally:
            ready.set()
        await self._stop_event.wait()
        await self.stop_async()

    # ----- bookkeeping -------------------------------------------------------------------------

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    def _record(
        self, request: web.Request, provider: str, body: Any, headers: dict[str, str]
    ) -> None:
        with self._lock:
            self._stats["requests"] += 1
            self._per_path[request.path] = self._per_path.get(request.path, 0) + 1
            self._requests.append(RecordedRequest(request.path, provider, body, headers))

    def _next_fault(self) -> FaultKind | None:
        """The queued fail_sequence first, then independent random draws."""
        faults = self._faults
        with self._lock:
            if self._fail_queue:
                return self._fail_queue.popleft()
            draws: list[tuple[FaultKind, float]] = [
                ("drop", faults.drop), (429, faults.rate_429),
                (500, faults.rate_500), ("malformed", faults.malformed),
            ]  # fmt: skip
            for kind, probability in draws:
                # Disabled faults consume no draws: a seed's outcome sequence depends only on
                # the faults that are switched on (and on request arrival order).
                if probability > 0 and self._rng.random() < probability:
                    return kind
        return None

    def _over_rate(self, per_second: float) -> float | None:
        """Count this request in the last second's; with a rate limit it is over, the
        seconds until the window has room (its Retry-After), else None."""
        now = time.monotonic()
        with self._lock:
            for window in (self._arrivals, self._answered):
                while window and window[0] <= now - 1.0:
                    window.popleft()
            self._arrivals.append(now)
            peak = self._stats.get("peak_per_second", 0)
            self._stats["peak_per_second"] = max(peak, len(self._arrivals))
            if per_second <= 0:
                return None
            if len(self._answered) >= per_second:
                return max(0.05, self._answered[0] + 1.0 - now)
            self._answered.append(now)
        return None

    # ----- request handling --------------------------------------------------------------------

    async def _handle_model(self, request: web.Request, dialect: Dialect) -> web.StreamResponse:
        body = await read_json(request)
        headers = {k.lower(): v for k, v in request.headers.items()}
        self._record(request, dialect.name, body, headers)
        faults = self._faults
        delay = faults.latency_ms
        if faults.jitter_ms > 0:
            delay = max(0.0, delay + self._jitter.uniform(-faults.jitter_ms, faults.jitter_ms))
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        if not isinstance(body, dict):
            self._count("bad_request")
            return dialect.error(400, "The request body is not a valid JSON object.")
        if faults.require_key is not None and dialect.api_key(headers) != faults.require_key:
            self._count("auth_failed")
            return dialect.error(401, "Incorrect API key provided.")
        wait = self._over_rate(faults.rate_limit_rps)
        if wait is not None:
            self._count("rate_limited")
            stat, response = injected(request, dialect, 429, retry_after=wait)
            self._count(stat)
            return response
        fault = self._next_fault()
        if fault is not None:
            # Gemini streams by its path (`:streamGenerateContent`), the others by the body
            stream = bool(body.get("stream")) or request.path.endswith(":streamGenerateContent")
            stat, response = injected(request, dialect, fault, retry_after=faults.retry_after,
                                      retry_after_headers=self.retry_after_headers,
                                      stream=stream)  # fmt: skip
            self._count(stat)
            return response
        return await self._scripted_reply(request, dialect, body, headers)

    async def _scripted_reply(
        self, request: web.Request, dialect: Dialect, body: dict[str, Any], headers: dict[str, str]
    ) -> web.StreamResponse:
        try:
            conv = dialect.parse(body, strict_history=self.strict_history, headers=headers,
                                 path_model=request.match_info.get("model"))  # fmt: skip
        except InvalidRequest as exc:
            self._count("bad_request")
            return dialect.error(400, str(exc))
        if self.reported_model is not None:
            conv = replace(conv, model=self.reported_model)
        scenario = self.script.select(conv.haystack)
        if scenario is None:
            self._count("unmatched")
            message = "mock script: no scenario matches this conversation and none is default"
            return dialect.error(400, message)
        turn = scenario.turn(conv.assistant_turns)
        if turn.context_overflow:
            self._count("context_overflow")
            return dialect.context_overflow(conv)
        try:
            response = await dialect.reply(request, conv, turn, conv.assistant_turns)
        except ScriptError as exc:
            self._count("script_error")
            return dialect.error(400, f"mock script: {exc}")
        self._count("served_ok")
        if conv.stream:
            self._count("streamed")
        return response

    async def _handle_stats(self, request: web.Request) -> web.Response:
        return web.json_response({**self.stats, "faults": self._faults.describe()})

    async def _handle_control(self, request: web.Request) -> web.Response:
        """JSON body: any fault name, ``fail_sequence``, ``seed``, ``script`` (the script
        format) and ``reset_stats: true``. Answers with the resulting fault settings."""
        changes = await read_json(request)
        if not isinstance(changes, dict):
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        reset = bool(changes.pop("reset_stats", False))
        try:
            # Validate the script before applying anything, so a bad request changes nothing.
            script = Script.from_dict(changes.pop("script")) if "script" in changes else None
            faults = self.set_faults(**changes)
        except (TypeError, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if script is not None:
            self.set_script(script)
        if reset:
            self.reset_stats()
        return web.json_response({"faults": faults.describe()})


# -- the command line: python -m helios.testing.mock_llm -------------------------
def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (every option has a help text: the README sends readers
    to `--help`)."""
    parser = argparse.ArgumentParser(
        prog="python -m helios.testing.mock_llm",
        description="Scripted model server for tests, speaking OpenAI Chat Completions and "
        "Responses, Anthropic Messages and Gemini generateContent, computer use included "
        "(never use with real keys).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON script file (default: always 'Done.')")
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="wait this long before each reply (default 0)"
    )
    parser.add_argument(
        "--jitter-ms",
        type=float,
        default=0.0,
        help="each reply's latency varies by up to this much, either way",
    )
    parser.add_argument(
        "--rate-429",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that a request gets a 429 with Retry-After",
    )
    parser.add_argument(
        "--retry-after",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds in the 429's Retry-After header (default 1)",
    )
    parser.add_argument(
        "--rate-500",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that a request gets a 500",
    )
    parser.add_argument(
        "--drop",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that the connection is closed before any reply",
    )
    parser.add_argument(
        "--malformed",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) of a 200 whose JSON body is cut off midway",
    )
    parser.add_argument(
        "--fail-sequence",
        default="",
        help="faults for the first requests, in order, before the random ones: "
        "comma-separated, e.g. 429,500,drop,malformed",
    )
    parser.add_argument("--require-key", help="reject other API keys with 401")
    parser.add_argument("--rate-limit-rps", type=float, default=0.0, metavar="R",
                        help="answer at most R requests in any second; the others get a 429 "
                        "with Retry-After (a provider's rate limit)")
    parser.add_argument(
        "--seed", type=int, help="seed of the random faults, for a repeatable sequence"
    )
    parser.add_argument("--no-strict-history", action="store_true",
                        help="accept unanswered tool calls / orphan tool results")  # fmt: skip
    parser.add_argument("--port-file", type=Path, help="write the bound port here")
    return parser


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _write_port_file(path: Path, port: int) -> None:
    # Write then rename, so a poller never reads a half-written file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    tmp.replace(path)


def _server_from_args(args: argparse.Namespace) -> MockLLMServer:
    return MockLLMServer(
        script=args.script,
        host=args.host,
        port=args.port,
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter_ms,
        rate_429=args.rate_429,
        retry_after=args.retry_after,
        rate_500=args.rate_500,
        drop=args.drop,
        malformed=args.malformed,
        fail_sequence=parse_fail_sequence(args.fail_sequence),
        require_key=args.require_key,
        seed=args.seed,
        strict_history=not args.no_strict_history,
        rate_limit_rps=args.rate_limit_rps,
    )


async def _serve_cli(server: MockLLMServer, port_file: Path | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start_async()
    try:
        if port_file is not None:
            _write_port_file(port_file, server.port)
        print(f"listening on {server.base_url}", flush=True)
        await stop.wait()
    finally:
        await server.stop_async()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        server = _server_from_args(args)
    except (OSError, ValueError) as exc:
        print(f"mock_llm: {exc}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_cli(server, args.port_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
