"""The command line of the mock model server: ``python -m helios.testing.mock_llm``.

Parses the fault and script options, serves until SIGTERM/SIGINT and, with ``--port-file``,
writes the bound port to a file so a parent process can find the server::

    python -m helios.testing.mock_llm --port 0 --script s.json --port-file /tmp/port
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from helios.testing.mock_faults import parse_fail_sequence
from helios.testing.mock_llm import MockLLMServer

__all__ = ["main"]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m helios.testing.mock_llm",
        description="Scripted model server for tests, speaking OpenAI Chat Completions and "
        "Responses, Anthropic Messages and Gemini generateContent, computer use included "
        "(never use with real keys).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON script file (default: always 'Done.')")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0,
                        help="each reply's latency varies by up to this much, either way")
    parser.add_argument("--rate-429", type=float, default=0.0)
    parser.add_argument("--retry-after", type=float, default=1.0)
    parser.add_argument("--rate-500", type=float, default=0.0)
    parser.add_argument("--drop", type=float, default=0.0)
    parser.add_argument("--malformed", type=float, default=0.0)
    parser.add_argument(
        "--fail-sequence", default="", help="comma-separated, e.g. 429,500,drop,malformed"
    )
    parser.add_argument("--require-key", help="reject other API keys with 401")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-strict-history", action="store_true",
                        help="accept unanswered tool calls / orphan tool results")  # fmt: skip
    parser.add_argument("--port-file", type=Path, help="write the bound port here")
    return parser.parse_args(argv)


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
