"""`helios cache stats | clear | show KEY`: the response cache (`--cache`) on disk.

`show` explains an entry: what went into its key (the wire, model, endpoint,
sample, generation settings, a summary of the conversation and the tools: never a
key, which is never in a request's body) and the answer it holds. A trajectory names
the key of each step the cache met (`extra.response_cache.key`).
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from helios.models.response_cache import ResponseCache

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):,.1f} MB"


def cache_stats_command(as_json: JsonOpt = False) -> None:
    """Show where the response cache is, its entries and its size against its cap."""
    stats = ResponseCache.from_settings().stats()
    if as_json:
        typer.echo(json.dumps({
            "directory": str(stats.directory), "entries": stats.entries, "bytes": stats.bytes,
            "max_bytes": stats.max_bytes, "oldest_use": stats.oldest, "newest_use": stats.newest,
        }))  # fmt: skip
        return
    typer.echo(f"response cache  {stats.directory}")
    typer.echo(f"entries         {stats.entries:,}")
    typer.echo(f"size            {_mb(stats.bytes)} of {_mb(stats.max_bytes)} "
               "(HELIOS_CACHE_MAX_MB; the least recently used go first)")  # fmt: skip
    typer.echo(f"last used       {_when(stats.oldest)} (oldest) · {_when(stats.newest)} (newest)")


def cache_clear_command() -> None:
    """Remove every entry of the response cache."""
    cache = ResponseCache.from_settings()
    removed = cache.clear()
    typer.echo(f"removed {removed:,} entries from {cache.directory}")


def cache_show_command(
    key: Annotated[str, typer.Argument(help="An entry's key, or its first characters "
                                       "(at least 4), as a trajectory's step names it.")],
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Explain an entry: what went into its key, and the answer it holds."""
    cache = ResponseCache.from_settings()
    found = cache.find(key)
    if len(found) != 1:
        why = "no entry" if not found else f"{len(found)} entries ({', '.join(found[:5])})"
        typer.echo(f"error: {why} for key {key!r} in {cache.directory}", err=True)
        raise typer.Exit(2)
    entry = cache.get(found[0])
    if entry is None:
        typer.echo(f"error: the entry {found[0]} is not whole: removed (a miss)", err=True)
        raise typer.Exit(2)
    answer = _answer(entry.response)
    if as_json:
        typer.echo(json.dumps({
            "key": entry.key, "created": entry.created, "bytes": entry.size,
            "parts": entry.parts, "answer": answer,
        }, ensure_ascii=False))  # fmt: skip
        return
    parts = entry.parts
    messages = parts.get("messages") or {}
    typer.echo(f"key       {entry.key}")
    typer.echo(f"file      {entry.path} ({entry.size:,} bytes, made {_when(entry.created)})")
    typer.echo("what went into the key (sha256 of the request as sent, and the sample):")
    typer.echo(f"  model     {parts.get('provider')}/{parts.get('model')} over the "
               f"{parts.get('api')} wire at {parts.get('endpoint')}")  # fmt: skip
    typer.echo(f"  sample    {parts.get('sample')} (the attempt, or the tool-call run)")
    typer.echo(f"  settings  {_json(parts.get('settings'))}")
    if parts.get("headers"):
        typer.echo(f"  headers   {_json(parts.get('headers'))}")
    roles = ", ".join(messages.get("roles") or [])
    typer.echo(f"  messages  {messages.get('count')} ({roles}), sha256 {messages.get('sha256')}")
    typer.echo(f"    last    {messages.get('last')}")
    system = parts.get("system")
    if system:
        typer.echo(f"  system    sha256 {system.get('sha256')}: {system.get('start')}")
    typer.echo(f"  tools     {', '.join(parts.get('tools') or []) or '(none)'}")
    typer.echo("the answer:")
    for name, value in answer.items():
        typer.echo(f"  {name:<9} {value if isinstance(value, str) else _json(value)}")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _answer(response: dict[str, Any]) -> dict[str, Any]:
    text = " ".join(str(response.get("content") or "").split())
    return {
        "model": response.get("model"),
        "finish": response.get("finish_reason"),
        "usage": response.get("usage"),
        "text": text[:200] + ("…" if len(text) > 200 else ""),
        "calls": [call[1] for call in response.get("tool_calls") or []],
    }
