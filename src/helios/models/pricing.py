"""Cost from token counts: prices from `genai-prices`, which users can override.

The default prices come from the `genai-prices` package (pydantic's maintained,
dated table of provider prices, read from the snapshot it ships: never fetched),
by the run's provider and model: `anthropic/…`, `openai/…`, `gemini/…` (Google's
prices), `openrouter/…` (OpenRouter's), or a bare name (the library finds the
provider). An `openai-compatible/…` model is served by the user's own endpoint: it
has no list price. Tiered prices (a long prompt's) apply per call, and cache reads
and writes are counted at their own prices.

Pass `--prices FILE` (or set HELIOS_PRICES) with entries like
`{"my-model": {"input": 1.0, "output": 4.0, "cache_read": 0.1, "cache_write": 1.25}}`
(USD per million tokens) to add or override models; a key is a bare name (`my-model`,
a prefix of the model's last part) or `provider/model` (`openai-compatible/my-model`).
A key that matches no model of the run is named in a warning. A model with no price
has an unknown cost (None, with the reason), never 0. `price_source()` names the
table and its date: every run records it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from helios.atomic_write import write_text_atomic
from helios.errors import ConfigError
from helios.safe_json import JsonValueError, parse_json
from helios.settings import current as helios_settings
from helios.usage import Usage

log = logging.getLogger(__name__)

#: USD per million tokens a price may be: with token counts bounded too
#: (`reply_values.MAX_TOKENS`), every cost, and every sum of costs, stays finite
MAX_PRICE = 1_000_000.0
#: a Helios provider → the `genai-prices` provider whose prices it charges (None: no
#: list price, e.g. a self-hosted `openai-compatible` endpoint)
LIBRARY_PROVIDERS: dict[str, str | None] = {
    "anthropic": "anthropic", "openai": "openai", "gemini": "google",
    "openrouter": "openrouter", "openai-compatible": None,
}  # fmt: skip


class Priced(Protocol):
    """A model's price: the cost of one call's (or a sum of calls') usage."""

    def cost(self, usage: Usage) -> float: ...


@dataclass(frozen=True)
class Price:
    """A price from a `--prices` file (USD per million tokens)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        cache_read = self.input * 0.1 if self.cache_read is None else self.cache_read
        cache_write = self.input * 1.25 if self.cache_write is None else self.cache_write
        total = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
        )
        return total / 1_000_000


#: a rate of `genai-prices`: USD per million tokens, and its long-prompt tiers as (more
#: than this many prompt tokens, the rate of every token then), ascending
Rate = tuple[float, tuple[tuple[int, float], ...]]


@dataclass(frozen=True)
class LibraryPrice:
    """A model's price in `genai-prices`, read once into floats: a model call is priced
    without the library's general machinery (measured: 0.33 ms a call through it). A
    rate it lacks for cache reads or writes is the prompt's, as the library counts it."""

    provider: str
    model: str
    input: Rate
    output: Rate
    cache_read: Rate | None = None
    cache_write: Rate | None = None

    @classmethod
    def of(cls, provider: str, model: str, model_price: Any) -> LibraryPrice | None:
        """From the library's `ModelPrice`; None when it has no token price."""
        rates = [_rate(getattr(model_price, f"{key}_mtok", None))
                 for key in ("input", "output", "cache_read", "cache_write")]  # fmt: skip
        if rates[0] is None or rates[1] is None:
            return None
        return cls(provider, model, rates[0], rates[1], rates[2], rates[3])

    def cost(self, usage: Usage) -> float:
        prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        read, write = self.cache_read or self.input, self.cache_write or self.input
        total = (usage.input_tokens * _at(self.input, prompt)
                 + usage.output_tokens * _at(self.output, prompt)
                 + usage.cache_read_tokens * _at(read, prompt)
                 + usage.cache_write_tokens * _at(write, prompt))  # fmt: skip
        return total / 1_000_000


def _rate(value: Any) -> Rate | None:
    if value is None:
        return None
    tiers = getattr(value, "tiers", None)
    if tiers is None:
        return float(value), ()
    return float(value.base), tuple((int(t.start), float(t.price)) for t in tiers)


def _at(rate: Rate, prompt_tokens: int) -> float:
    """The rate for a call of this many prompt tokens (the highest tier it passes)."""
    base, tiers = rate
    for start, price in reversed(tiers):
        if prompt_tokens > start:
            return price
    return base


def library_price(model: str) -> LibraryPrice | None:
    """`model`'s (`provider/model`, or a bare name) price in `genai-prices`, or None."""
    provider, _, name = model.partition("/") if "/" in model else ("", "", model)
    library_provider = LIBRARY_PROVIDERS.get(provider) if provider else None
    if provider and library_provider is None:
        return None  # an unknown or self-hosted provider: no list price
    return _library_price(library_provider, name)


@cache
def _library_price(provider: str | None, name: str) -> LibraryPrice | None:
    from genai_prices.data_snapshot import get_snapshot

    try:
        found, info = get_snapshot().find_provider_model(name, None, provider, None)
    except LookupError:
        return None
    return LibraryPrice.of(found.id, info.id, info.get_prices(datetime.now(tz=UTC)))


@cache
def price_source() -> dict[str, str | None]:
    """Where the default prices come from, as run.json records it: `genai-prices`, its
    version and its data's date (the newest date a price in its snapshot starts on).

    Reading the snapshot costs about half a second of CPU, which a run with no priced
    model would pay only for this record. So the answer is kept in Helios's cache
    folder, keyed by the installed package's version and its data file's size and
    time; a missing, broken or foreign file is computed again and rewritten."""
    key, version = _snapshot_key()
    path = Path.home() / ".cache" / "helios" / f"price-source-{key}.json"
    try:
        kept = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, JsonValueError):
        kept = None
    if (isinstance(kept, dict) and set(kept) == _SOURCE_KEYS and kept["version"] == version
            and all(isinstance(v, str | None) for v in kept.values())):  # fmt: skip
        return kept
    found = _read_price_source(version)
    with contextlib.suppress(OSError):  # an unwritable home: computed again next time
        write_text_atomic(path, json.dumps(found))
    return found


_SOURCE_KEYS = {"source", "version", "data_date"}


def _snapshot_key() -> tuple[str, str]:
    """A name for the installed `genai-prices` data (its version and its data file's
    size and mtime), found without importing the package; and its version."""
    from importlib.metadata import version
    from importlib.util import find_spec

    installed = version("genai-prices")
    spec = find_spec("genai_prices")
    stamp = "unknown"
    if spec is not None and spec.submodule_search_locations:
        try:
            data = os.stat(Path(next(iter(spec.submodule_search_locations))) / "data.py")
            stamp = f"{data.st_size}-{data.st_mtime_ns}"
        except OSError:
            pass
    digest = hashlib.sha256(f"{installed}:{stamp}".encode()).hexdigest()[:16]
    return digest, installed


def _read_price_source(version: str) -> dict[str, str | None]:
    from genai_prices.data_snapshot import get_snapshot

    newest: date | None = None
    for provider in get_snapshot().providers:
        for model in provider.models:
            if isinstance(model.prices, list):
                for conditional in model.prices:
                    start = getattr(conditional.constraint, "start_date", None)
                    if isinstance(start, date) and (newest is None or start > newest):
                        newest = start
    return {"source": "genai-prices", "version": version,
            "data_date": newest.isoformat() if newest else None}  # fmt: skip


class PriceTable:
    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        #: the prices files gave (or `prices`); every other model's are the library's
        self.prices: dict[str, Price] = dict(prices or {})
        #: each key a price file gave → that file (to name it in a warning)
        self.sources: dict[str, Path] = {}
        #: model → its key, for the key set it was found in (a price is asked for on
        #: every model call; matching scans every key)
        self._matched: dict[str, str | None] = {}
        self._matched_keys: frozenset[str] = frozenset()

    def match(self, model: str) -> str | None:
        keys = self.prices.keys()
        if len(keys) != len(self._matched_keys) or keys != self._matched_keys:
            self._matched, self._matched_keys = {}, frozenset(keys)
        if model not in self._matched:
            self._matched[model] = self._match(model)
        return self._matched[model]

    def _match(self, model: str) -> str | None:
        """The key of `model`'s price, or None. `model` is `provider/model` (or a bare
        name). A bare key (`claude-sonnet-4`) is a prefix of the model's last part; a key
        with slashes (`openai-compatible/scripted`, `anthropic/claude-sonnet-4`) is
        matched against as many trailing parts of the model, its last part a prefix too.
        The key with the most parts wins, then the longest."""
        parts = model.split("/")
        best: str | None = None
        rank = (0, 0)
        for key in self.prices:
            if _matches(key, parts) and (key.count("/") + 1, len(key)) > rank:
                best, rank = key, (key.count("/") + 1, len(key))
        return best

    def lookup(self, model: str) -> Priced | None:
        """A file's price for `model` (it overrides), else the library's, else None."""
        key = self.match(model)
        return self.prices[key] if key is not None else library_price(model)

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD for `usage` on `model`; None when no price is known for it."""
        price = self.lookup(model)
        return price.cost(usage) if price else None

    def price_usage(self, model: str, usage: Usage) -> None:
        """Set `usage`'s cost: known, or None with the reason."""
        cost = self.cost(model, usage)
        if cost is None:
            usage.mark_cost_unknown(unknown_reason(model))
        else:
            usage.cost_usd, usage.cost_unknown_reason = cost, None

    def unmatched(self, models: Sequence[str]) -> list[tuple[Path, str]]:
        """(file, key) of every key a price file gave that matches none of `models`."""
        split = [model.split("/") for model in models]
        return [(path, key) for key, path in self.sources.items()
                if not any(_matches(key, parts) for parts in split)]  # fmt: skip

    def warn_unmatched(self, models: Sequence[str]) -> None:
        """One warning line per price-file key that no model of the run uses (a key
        spelled otherwise than the model would silently leave its cost unknown)."""
        shown = ", ".join(models)
        for path, key in self.unmatched(models):
            log.warning("warning: %s: price key %r matches no model of this run (%s); "
                        "keys are `model` or `provider/model`", path, key, shown)  # fmt: skip

    def extend_from_file(self, path: Path) -> None:
        try:  # NaN passes here, to be refused below with its model's name
            data = parse_json(path.read_bytes(), allow_nan=True)
        except (OSError, JsonValueError) as exc:
            raise ConfigError(f"cannot read prices: {exc}", file=str(path)) from None
        if not isinstance(data, dict):
            raise ConfigError("expected an object of model → prices", file=str(path))
        for model, entry in data.items():
            if not isinstance(entry, dict):
                raise ConfigError("expected an object like {\"input\": 1.0, \"output\": 4.0}",
                                  file=str(path), field=str(model))  # fmt: skip
            try:
                price = Price(**entry)
            except TypeError as exc:
                raise ConfigError(str(exc), file=str(path), field=str(model)) from None
            _check_price(price, path, str(model))
            self.prices[str(model)] = price
            self.sources[str(model)] = path

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        table = cls()
        env_path = helios_settings().prices_file
        for source in (Path(env_path) if env_path else None, path):
            if source is not None:
                table.extend_from_file(source)
        return table


def unknown_reason(model: str) -> str:
    return f"no price for {model}"


def _matches(key: str, parts: list[str]) -> bool:
    depth = key.count("/") + 1
    return depth <= len(parts) and "/".join(parts[-depth:]).startswith(key)


def _check_price(price: Price, path: Path, model: str) -> None:
    for item in fields(price):
        value = getattr(price, item.name)
        if value is None and item.name in ("cache_read", "cache_write"):
            continue
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not (math.isfinite(value) and 0 <= value <= MAX_PRICE):
            # never a container's repr: it may be nested as deep as the parser allowed
            numeric = isinstance(value, int | float | str)
            shown = repr(value)[:40] if numeric else "a " + type(value).__name__
            raise ConfigError(f"{item.name} must be a number from 0 to {MAX_PRICE:,.0f} "
                              f"(USD per million tokens), not {shown}",
                              file=str(path), field=model)  # fmt: skip
