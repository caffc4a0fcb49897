"""Cost from token counts: a built-in price table that users can extend.

Prices are USD per million tokens, matched by model-name prefix (`PriceTable.match`).
They are a best-effort default and go stale; pass `--prices FILE` (or set
HELIOS_PRICES) with entries like
`{"my-model": {"input": 1.0, "output": 4.0, "cache_read": 0.1, "cache_write": 1.25}}`
to add or override models; a key is a bare name (`my-model`) or `provider/model`
(`openai-compatible/my-model`). A key that matches no model of the run is named in a
warning. A model with no price has an unknown cost (None, with the reason), never 0.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from helios.errors import ConfigError
from helios.safe_json import JsonValueError, parse_json
from helios.settings import current as helios_settings
from helios.usage import Usage

log = logging.getLogger(__name__)

#: USD per million tokens a price may be: with token counts bounded too
#: (`reply_values.MAX_TOKENS`), every cost, and every sum of costs, stays finite
MAX_PRICE = 1_000_000.0


@dataclass(frozen=True)
class Price:
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


DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-5": Price(5.0, 25.0, 0.5, 6.25),
    "claude-sonnet-4": Price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4": Price(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.4, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 0.5),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1),
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075),
    "o3": Price(2.0, 8.0, 0.5),
    "o4-mini": Price(1.1, 4.4, 0.275),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31),
    "gemini-2.5-flash": Price(0.3, 2.5, 0.075),
    # the computer-use models
    "computer-use-preview": Price(3.0, 12.0),
    "gemini-2.5-computer-use": Price(1.25, 10.0),
}


class PriceTable:
    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)
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

    def lookup(self, model: str) -> Price | None:
        key = self.match(model)
        return self.prices[key] if key is not None else None

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
