"""The response cache: a model's answer kept on disk under the hash of the request
that produced it, so a rerun (or a resume, or the same prompt in another run) replays
it for free instead of paying for it again (`--cache`, `cache=True`).

**Key.** sha256 over the request as it goes on the wire (the body the client builds:
model, messages, tools, system prompt, max tokens, temperature, reasoning settings,
routing), the wire and the endpoint (without userinfo), plus the *sample*: the
attempt or run index the door sets (`sampling`), so `-k 3` keeps three answers
and a rerun replays each. The API key is in a header, never in the body, so it is
never part of a key or an entry.

**Store.** One file per key, `<dir>/<key[:2]>/<key>`: a header line with the sha256
of the rest, then JSON (the key's parts, for `helios cache show`, and the response).
A file is written under a temporary name and renamed over its target, so a reader
finds a whole entry or none, with any number of writers (processes, Ray workers on
one file system): two writers of one key write the same answer's key, and the last
rename wins whole. A file that does not check out (cut short, edited, another
version) is a miss, and is removed. A hit touches the file's mtime: eviction removes
the least recently used entries once the store passes its cap, down to 90% of it,
under a lock file that one process holds at a time (the others skip).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from helios.models.base import Message, ModelResponse
from helios.models.reply_values import function_call
from helios.secrets import redact, redact_value
from helios.usage import Usage

#: the format of an entry; another one is a miss
FORMAT = "helios-response-cache 1"
#: the default cap of the store (HELIOS_CACHE_MAX_MB)
DEFAULT_MAX_MB = 2048.0
#: eviction trims the store to this share of its cap, so it does not run every write
LOW_WATER = 0.9
#: body fields that hold the conversation, the system prompt, the tools (per wire);
#: every other field of a body is a generation setting
_CONVERSATION = ("messages", "input", "contents")
_SYSTEM = ("system", "instructions", "systemInstruction")
_PREVIEW = 160
_LOCK = ".evict.lock"

#: the sample of the calls made in this context: the trial's attempt, the tool-call
#: run's index (set by the door around a unit's run; 0 outside one)
_SAMPLE: ContextVar[int] = ContextVar("helios_cache_sample", default=0)
_encoder = msgspec.json.Encoder(order="sorted")


@contextmanager
def sampling(sample: int) -> Iterator[None]:
    """The calls made in this block (and the tasks it starts) are sample `sample`:
    the same request in another sample is another key."""
    token = _SAMPLE.set(sample)
    try:
        yield
    finally:
        _SAMPLE.reset(token)


def current_sample() -> int:
    return _SAMPLE.get()


def default_dir() -> Path:
    from helios.settings import current

    configured = current().cache_dir
    return Path(configured).expanduser() if configured else Path.home() / ".cache/helios/responses"


@dataclass(frozen=True)
class CacheRequest:
    """One request as the cache sees it: what goes into its key."""

    api: str
    provider: str
    model: str
    #: the endpoint without userinfo, and the path under it
    endpoint: str
    path: str
    body: Mapping[str, Any]
    #: per-request headers that change the answer (Anthropic's beta), never auth
    headers: Mapping[str, str] = field(default_factory=dict)
    sample: int = 0

    def key(self) -> str:
        return hashlib.sha256(_encoder.encode(self._keyed())).hexdigest()

    def _keyed(self) -> dict[str, Any]:
        return {"api": self.api, "provider": self.provider, "model": self.model,
                "endpoint": self.endpoint, "path": self.path, "body": self.body,
                "headers": dict(self.headers), "sample": self.sample}  # fmt: skip

    def parts(self) -> dict[str, Any]:
        """What went into the key, for a person (`helios cache show`): every part but
        the conversation and the tools, which are summarised (count, roles, digest,
        the last message's start, the tools' names)."""
        body = dict(self.body)
        conversation: Any = next((body.pop(k) for k in _CONVERSATION if k in body), [])
        system = next((body.pop(k) for k in _SYSTEM if k in body), None)
        tools = body.pop("tools", None) or []
        body.pop("model", None)
        messages = conversation if isinstance(conversation, list) else [conversation]
        parts: dict[str, Any] = {
            "api": self.api, "provider": self.provider, "model": self.model,
            "endpoint": self.endpoint + self.path, "sample": self.sample,
            "settings": body, "headers": dict(self.headers),
            "messages": {
                "count": len(messages),
                "roles": [_role(m) for m in messages],
                "sha256": _digest(messages),
                "last": _preview(messages[-1]) if messages else "",
            },
            "system": None if system is None else {"sha256": _digest(system),
                                                   "start": _preview(system)},
            "tools": _tool_names(tools),
        }  # fmt: skip
        return redact_value(parts)  # type: ignore[no-any-return]


def _digest(value: Any) -> str:
    return hashlib.sha256(_encoder.encode(value)).hexdigest()[:16]


def _role(message: Any) -> str:
    if isinstance(message, dict):
        return str(message.get("role") or message.get("type") or "?")
    return type(message).__name__


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else _encoder.encode(value).decode("utf-8", "replace")
    text = " ".join(text.split())
    return redact(text[:_PREVIEW] + ("…" if len(text) > _PREVIEW else ""))


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        declared = tool.get("functionDeclarations") or tool.get("function_declarations")
        if isinstance(declared, list):
            names.extend(str(d.get("name")) for d in declared if isinstance(d, dict))
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        names.append(str(name or tool.get("type") or "?"))
    return names


# -- entries ------------------------------------------------------------------------------
_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
           "reasoning_tokens")


def encode_response(response: ModelResponse) -> dict[str, Any]:
    message = response.message
    return {
        "content": message.content,
        "reasoning": message.reasoning,
        "tool_calls": [[c.id, c.name, c.raw_arguments] for c in message.tool_calls],
        "provider_state": message.provider_state,
        "usage": {name: getattr(response.usage, name) for name in _COUNTS},
        "finish_reason": response.finish_reason,
        "model": response.model,
    }


def decode_response(data: Mapping[str, Any]) -> tuple[ModelResponse, Usage]:
    """The stored response, and the usage of the call it was (what a replay saves).
    A malformed entry raises (KeyError, TypeError, ValueError)."""
    calls = [function_call(i, n, str(raw)) for i, n, raw in data["tool_calls"]]
    message = Message(
        role="assistant", content=str(data["content"]), tool_calls=calls,
        reasoning=data["reasoning"], provider_state=data["provider_state"],
    )  # fmt: skip
    counts = data["usage"]
    original = Usage.model_validate({"calls": 1, **{k: int(counts[k]) for k in _COUNTS}})
    response = ModelResponse(
        message=message, usage=Usage(calls=0), finish_reason=str(data["finish_reason"]),
        model=str(data["model"]),
    )  # fmt: skip
    return response, original


@dataclass
class Entry:
    key: str
    parts: dict[str, Any]
    response: dict[str, Any]
    created: float
    path: Path
    size: int


@dataclass
class Stats:
    entries: int
    bytes: int
    max_bytes: int
    directory: Path
    oldest: float | None
    newest: float | None


@dataclass
class ResponseCache:
    """The store of one directory, with a size cap. Plain data: a copy in another
    process (a worker, a Ray node) is the same store."""

    directory: Path = field(default_factory=default_dir)
    max_bytes: int = int(DEFAULT_MAX_MB * 1024 * 1024)
    #: bytes this process wrote since the store was last measured; None: never measured
    _written: int | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_settings(cls) -> ResponseCache:
        from helios.settings import current

        max_mb = current().number("HELIOS_CACHE_MAX_MB", DEFAULT_MAX_MB)
        return cls(default_dir(), max(1, int(max_mb * 1024 * 1024)))

    def path_of(self, key: str) -> Path:
        return self.directory / key[:2] / key

    # -- one entry ------------------------------------------------------------------------
    def get(self, key: str) -> Entry | None:
        """The entry of `key`, or None (absent, or not whole: then it is removed)."""
        path = self.path_of(key)
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return None
        entry = _parse(raw, key, path)
        if entry is None:
            with suppress(OSError):
                path.unlink()
            return None
        with suppress(OSError):  # least recently *used*: a hit is a use
            os.utime(path)
        return entry

    def put(self, key: str, parts: dict[str, Any], response: dict[str, Any]) -> bool:
        """Store an entry (whole or not at all); True when the store should be
        measured now (`evict`). A response that is not JSON is not stored."""
        try:
            body = _encoder.encode({"key": key, "created": time.time(), "parts": parts,
                                    "response": response})  # fmt: skip
        except (TypeError, ValueError, OverflowError):
            return False
        data = f"{FORMAT} {hashlib.sha256(body).hexdigest()}\n".encode() + body
        path = self.path_of(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, path)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            return False  # a full or read-only disk: the run goes on uncached
        if self._written is None:
            self._written = 0
            return True  # the first write of this process: measure once
        self._written += len(data)
        return self._written >= max(self.max_bytes // 50, 1)

    # -- the whole store ------------------------------------------------------------------
    def _files(self) -> Iterator[os.DirEntry[str]]:
        try:
            shards = list(os.scandir(self.directory))
        except OSError:
            return
        for shard in shards:
            if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                continue
            with suppress(OSError), os.scandir(shard.path) as files:
                for file in files:
                    if file.is_file(follow_symlinks=False):
                        yield file

    def evict(self) -> int:
        """Remove the least recently used entries until the store is within 90% of its
        cap (when it is over the cap); the number removed. One process at a time: when
        another holds the lock, this one does nothing."""
        self._written = 0
        try:
            lock = open(self.directory / _LOCK, "a+b")  # noqa: SIM115 (closed below)
        except OSError:
            return 0  # a store this process cannot lock: another one trims it
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0
            return self._trim()

    def _trim(self) -> int:
        found: list[tuple[float, int, str]] = []
        total = 0
        for file in self._files():
            with suppress(OSError):
                stat = file.stat(follow_symlinks=False)
                found.append((stat.st_mtime, stat.st_size, file.path))
                total += stat.st_size
        if total <= self.max_bytes:
            return 0
        removed = 0
        target = self.max_bytes * LOW_WATER
        for _, size, path in sorted(found):
            if total <= target:
                break
            with suppress(OSError):  # gone already (another process), or not ours
                os.unlink(path)
                removed += 1
            total -= size
        return removed

    def stats(self) -> Stats:
        count = size = 0
        oldest: float | None = None
        newest: float | None = None
        for file in self._files():
            if file.name.startswith("."):
                continue
            with suppress(OSError):
                stat = file.stat(follow_symlinks=False)
                count += 1
                size += stat.st_size
                oldest = stat.st_mtime if oldest is None else min(oldest, stat.st_mtime)
                newest = stat.st_mtime if newest is None else max(newest, stat.st_mtime)
        return Stats(count, size, self.max_bytes, self.directory, oldest, newest)

    def clear(self) -> int:
        """Remove every entry (and leftover temporary file); the number of entries."""
        removed = 0
        for file in self._files():
            with suppress(OSError):
                os.unlink(file.path)
                removed += not file.name.startswith(".")
        return removed

    def find(self, prefix: str) -> list[str]:
        """The keys that start with `prefix` (at least 4 hex digits)."""
        prefix = prefix.strip().lower()
        if len(prefix) < 4 or any(c not in "0123456789abcdef" for c in prefix):
            return []
        shard = self.directory / prefix[:2]
        try:
            names = os.listdir(shard)
        except OSError:
            return []
        return sorted(n for n in names if n.startswith(prefix) and not n.startswith("."))


def _parse(raw: bytes, key: str, path: Path) -> Entry | None:
    header, newline, body = raw.partition(b"\n")
    magic, _, digest = header.decode("ascii", "replace").rpartition(" ")
    if not newline or magic != FORMAT or hashlib.sha256(body).hexdigest() != digest:
        return None
    try:
        data = msgspec.json.decode(body)
        if data["key"] != key or not isinstance(data["response"], dict):
            return None
        decode_response(data["response"])  # it must replay
        return Entry(key, dict(data["parts"]), data["response"], float(data["created"]),
                     path, len(raw))  # fmt: skip
    except (msgspec.DecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None
