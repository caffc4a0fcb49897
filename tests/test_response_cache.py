"""The response cache (`--cache`, issue 33): a request it holds is answered from disk,
for free and without a model call; its key changes with anything that changes the
answer (a temperature, the sample) and never holds a key; its store stays whole
with many writers, drops a corrupt entry as a miss, and stays under its cap."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from helios.models.base import GenerationConfig, Message
from helios.models.response_cache import (
    FORMAT,
    ResponseCache,
    current_sample,
    sampling,
)
from helios.models.services import ModelServices, open_model_services
from helios.settings import HeliosSettings
from helios.testing.mock_llm import MockLLMServer
from helios.usage import Usage

from .mock_llm_helpers import SCRIPT

SECRET = "sk-cache-test-0123456789abcdef"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "responses"
    monkeypatch.setenv("HELIOS_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(scope="module")
def server() -> Any:
    with MockLLMServer(SCRIPT) as running:
        yield running


def _services(server: MockLLMServer, **generation: Any) -> ModelServices:
    return open_model_services(
        "openai-compatible/scripted", base_url=server.openai_base_url, api_key=SECRET,
        generation=GenerationConfig(**generation), cache=True,
    )  # fmt: skip


async def _ask(services: ModelServices, text: str = "list the files", sample: int = 0) -> Any:
    usage = Usage()
    try:
        with sampling(sample):
            response = await services.generate([Message("user", text)], [], usage=usage)
    finally:
        await services.close()
    return response, usage


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("??/*") if not p.name.startswith("."))


def test_a_second_call_is_a_hit_that_costs_nothing(server: MockLLMServer, cache_dir: Path) -> None:
    server.reset_stats()
    first, first_usage = asyncio.run(_ask(_services(server)))
    second, usage = asyncio.run(_ask(_services(server)))
    assert server.stats["requests"] == 1  # the second was never sent
    assert second.message.content == first.message.content
    assert second.tool_calls == first.tool_calls and second.tool_calls
    assert [c.id for c in second.tool_calls] == [c.id for c in first.tool_calls]
    assert first.message.cache is not None and not first.message.cache.hit
    mark = second.message.cache
    assert mark is not None and mark.hit and mark.key == first.message.cache.key
    assert mark.saved is not None and mark.saved.output_tokens == first_usage.output_tokens
    # a hit costs nothing, is no call, and counts what it saved
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (0, 0, 0)
    assert usage.cache_hits == 1
    assert usage.cache_saved_tokens == first_usage.input_tokens + first_usage.output_tokens
    assert "cache_hits" in usage.model_dump() and "cache_hits" not in first_usage.model_dump()


def test_a_changed_temperature_or_sample_is_a_miss(server: MockLLMServer, cache_dir: Path) -> None:
    server.reset_stats()
    asyncio.run(_ask(_services(server, temperature=0.0)))
    asyncio.run(_ask(_services(server, temperature=0.7)))
    asyncio.run(_ask(_services(server, temperature=0.7, max_tokens=99)))
    assert server.stats["requests"] == 3 and len(_entries(cache_dir)) == 3
    # -k 3: three samples of one request are three entries; a rerun replays each
    server.reset_stats()
    for sample in (1, 2, 3):
        asyncio.run(_ask(_services(server), sample=sample))
    assert server.stats["requests"] == 3 and len(_entries(cache_dir)) == 6
    for sample in (1, 2, 3):
        _, usage = asyncio.run(_ask(_services(server), sample=sample))
        assert usage.cache_hits == 1
    assert server.stats["requests"] == 3
    assert current_sample() == 0


def test_the_store_never_holds_the_api_key(server: MockLLMServer, cache_dir: Path) -> None:
    asyncio.run(_ask(_services(server)))
    entries = _entries(cache_dir)
    assert entries
    for path in cache_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    parts = ResponseCache(cache_dir).get(entries[0].name)
    assert parts is not None and parts.parts["model"] == "scripted"
    messages = parts.parts["messages"]
    assert messages["count"] == 1 and "list the files" in messages["last"]


def test_a_corrupt_entry_is_a_miss_and_is_removed(server: MockLLMServer, cache_dir: Path) -> None:
    server.reset_stats()
    asyncio.run(_ask(_services(server)))
    (entry,) = _entries(cache_dir)
    whole = entry.read_bytes()
    middle = len(whole) // 2
    flipped = whole[:middle] + bytes([whole[middle] ^ 1]) + whole[middle + 1 :]
    for broken in (whole[:middle], flipped, b"", b"garbage"):
        entry.write_bytes(broken)
        _, usage = asyncio.run(_ask(_services(server)))
        assert usage.cache_hits == 0 and usage.calls == 1  # asked the model again
        assert entry.read_bytes().startswith(FORMAT.encode())  # and stored a whole entry
    assert ResponseCache(cache_dir).get(entry.name) is not None


def test_eviction_keeps_the_store_under_its_cap(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "store", max_bytes=40_000)
    keys = [f"{i:064x}" for i in range(120)]
    for i, key in enumerate(keys[:20]):  # under the cap, used long ago (oldest first)
        cache.put(key, {"i": i}, _response("x" * 800))
        os.utime(cache.path_of(key), (1_000_000 + i, 1_000_000 + i))
    assert cache.evict() == 0 and cache.stats().entries == 20
    assert cache.get(keys[0]) is not None  # a hit is a use: now the most recent of them
    for i, key in enumerate(keys[20:45], start=20):  # 45 entries of 1.2 KB: over the cap
        if cache.put(key, {"i": i}, _response("x" * 800)):
            cache.evict()
    stats = cache.stats()
    assert stats.bytes <= 40_000 and 20 < stats.entries < 45
    assert cache.get(keys[0]) is not None and cache.get(keys[1]) is None  # least recent went
    for i, key in enumerate(keys[45:], start=45):  # and on: it stays under the cap
        if cache.put(key, {"i": i}, _response("x" * 800)):
            cache.evict()
    stats = cache.stats()
    assert stats.bytes <= 40_000 and cache.get(keys[-1]) is not None
    assert cache.clear() == stats.entries
    assert cache.stats().entries == 0


def _response(text: str) -> dict[str, Any]:
    return {"content": text, "reasoning": None, "tool_calls": [["c1", "bash", "{}"]],
            "provider_state": None, "usage": dict.fromkeys(
                ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                 "reasoning_tokens"), 1),
            "finish_reason": "stop", "model": "m"}  # fmt: skip


def _writer(folder: str, writer: int, keys: list[str]) -> None:
    cache = ResponseCache(Path(folder), max_bytes=1 << 30)
    for round_ in range(3):
        for key in keys:
            cache.put(key, {"writer": writer}, _response(f"{writer}-{round_}-" + "y" * 5000))
            cache.get(key)


def test_eight_processes_writing_the_same_keys_leave_whole_entries(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    keys = [f"{i:02x}" + "ab" * 31 for i in range(40)]
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_writer, args=(str(folder), w, keys)) for w in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0] * 8
    cache = ResponseCache(folder)
    for key in keys:
        entry = cache.get(key)
        assert entry is not None, key  # whole: one writer's entry, never a mix
        assert entry.response["content"].startswith(f"{entry.parts['writer']}-")
    assert not [p for p in folder.rglob(".*.tmp")]  # no temporary file left behind
    assert cache.stats().entries == len(keys)


def test_the_settings_name_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIOS_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("HELIOS_CACHE_MAX_MB", "3")
    cache = ResponseCache.from_settings()
    assert (cache.directory, cache.max_bytes) == (tmp_path / "c", 3 * 1024 * 1024)
    assert HeliosSettings.read({"HELIOS_CACHE_DIR": "/x"}).identity() == {}  # changes no result
    monkeypatch.delenv("HELIOS_CACHE_DIR")
    assert ResponseCache.from_settings().directory == Path.home() / ".cache/helios/responses"
    assert os.sep in str(cache.path_of("ab" * 32))


def test_the_cache_commands_explain_count_and_clear(server: MockLLMServer, cache_dir: Path) -> None:
    from typer.testing import CliRunner

    from helios.cli.app import app

    response, _ = asyncio.run(_ask(_services(server, temperature=0.3)))
    key = response.message.cache.key
    runner = CliRunner()
    shown = runner.invoke(app, ["cache", "show", key[:8]])
    assert shown.exit_code == 0, shown.output
    for part in ("openai-compatible/scripted", '"temperature": 0.3', "messages  1 (user)",
                 "list the files", "sample    0", "Let me look."):  # fmt: skip
        assert part in shown.output, part
    assert SECRET not in shown.output
    data = json.loads(runner.invoke(app, ["cache", "show", key, "--json"]).output)
    assert data["parts"]["settings"]["temperature"] == 0.3 and data["answer"]["calls"]
    assert runner.invoke(app, ["cache", "show", "ffff0000"]).exit_code == 2
    stats = json.loads(runner.invoke(app, ["cache", "stats", "--json"]).output)
    assert stats["entries"] == 1 and stats["directory"] == str(cache_dir)
    assert "removed 1 entries" in runner.invoke(app, ["cache", "clear"]).output
    assert _entries(cache_dir) == []


def test_the_cache_travels_to_workers_and_ray_nodes(server: MockLLMServer, cache_dir: Path) -> None:
    import pickle

    services = _services(server)
    copy = pickle.loads(pickle.dumps(services.detached()))
    assert copy.cache == services.cache and copy.cache.directory == cache_dir


def test_a_store_that_cannot_be_written_runs_uncached(
    server: MockLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HELIOS_CACHE_DIR", str(blocker / "responses"))
    server.reset_stats()
    for _ in range(2):
        response, usage = asyncio.run(_ask(_services(server)))
        assert usage.calls == 1 and response.tool_calls  # answered by the model, no crash
    assert server.stats["requests"] == 2
    assert ResponseCache.from_settings().evict() == 0
