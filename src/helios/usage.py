"""Token usage and cost, counted per model call and summed per trial and batch.

A cost is known or unknown, never guessed: with no price for the model, `cost_usd`
is None and `cost_unknown_reason` says why ("no price for openai-compatible/scripted").
A sum with an unknown part is unknown. A known price of zero stays 0.0.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

#: at most this many models asked for are kept in `reported_models` ...
MAX_REQUESTED = 32
#: ... each with at most this many ids reported for it ...
MAX_REPORTED = 8
#: ... each id cut to this many characters (what a provider sends is untrusted)
MAX_ID_CHARS = 200


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    #: None: unknown (no price for the model); `cost_unknown_reason` says why
    cost_usd: float | None = 0.0
    #: why `cost_usd` is None, e.g. "no price for openai-compatible/scripted"
    cost_unknown_reason: str | None = None
    #: model calls that returned a response
    calls: int = 0
    #: retried attempts (429, 5xx, dropped connections) behind those calls
    retries: int = 0
    #: seconds spent waiting on the model, for tokens/s
    model_seconds: float = 0.0
    #: each model asked for (as the run names it) with the ids the provider reported
    #: in its responses (`gpt-4o-2024-08-06` for `gpt-4o`), in the order first seen;
    #: bounded, and left out of a dump while empty (a run without model calls)
    reported_models: dict[str, list[str]] = Field(default_factory=dict)
    #: model calls answered by the response cache (`--cache`): no call was made, they
    #: cost nothing and are in none of the counts above; left out of a dump while 0
    cache_hits: int = 0
    #: what those calls took when they were made: tokens (in + out) and dollars
    #: (None: unknown, no price for the model)
    cache_saved_tokens: int = 0
    cache_saved_usd: float | None = 0.0

    @field_validator("reported_models", mode="after")
    @classmethod
    def _bounded(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        """A record read back (a resume, a worker's) is bounded as a live count is."""
        if len(value) <= MAX_REQUESTED and all(
            len(ids) <= MAX_REPORTED and all(len(i) <= MAX_ID_CHARS for i in ids)
            for ids in value.values()
        ):
            return value
        bounded: dict[str, list[str]] = {}
        merge_reported(bounded, value)
        return bounded

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.reported_models:
            data.pop("reported_models", None)
        if not self.cache_hits:
            for name in ("cache_hits", "cache_saved_tokens", "cache_saved_usd"):
                data.pop(name, None)
        return data

    def note_model(self, requested: str, reported: str) -> None:
        """One response of the model `requested` named itself `reported`."""
        ids = self.reported_models.get(requested)
        if ids is not None and reported in ids:  # the common case: one dict and list look-up
            return
        merge_reported(self.reported_models, {requested: [reported]})

    def add(self, other: Usage) -> None:
        """Accumulate `other` into this usage in place (cheap: no validation, and the
        fields are set in the instance's dict: pydantic's `__setattr__` per field was
        most of a run's usage bookkeeping)."""
        mine, theirs = self.__dict__, other.__dict__
        for name in _COUNTS:
            mine[name] += theirs[name]
        if mine["cost_usd"] is None or theirs["cost_usd"] is None:
            mine["cost_usd"] = None
            reason = mine["cost_unknown_reason"] or theirs["cost_unknown_reason"]
            mine["cost_unknown_reason"] = reason
        else:
            mine["cost_usd"] += theirs["cost_usd"]
        if theirs["reported_models"]:
            merge_reported(mine["reported_models"], theirs["reported_models"])
        if theirs["cache_hits"]:
            mine["cache_hits"] += theirs["cache_hits"]
            mine["cache_saved_tokens"] += theirs["cache_saved_tokens"]
            if mine["cache_saved_usd"] is None or theirs["cache_saved_usd"] is None:
                mine["cache_saved_usd"] = None
            else:
                mine["cache_saved_usd"] += theirs["cache_saved_usd"]

    def cache_text(self) -> str:
        """The response cache's savings for a person ("" without a hit)."""
        if not self.cache_hits:
            return ""
        saved = ("cost unknown" if self.cache_saved_usd is None
                 else f"${self.cache_saved_usd:.4f}")  # fmt: skip
        return (f"cache: {self.cache_hits:,} hits · {self.cache_saved_tokens:,} tok · "
                f"{saved} saved")

    def mark_cost_unknown(self, reason: str) -> None:
        self.cost_usd, self.cost_unknown_reason = None, reason

    @property
    def cost_known(self) -> bool:
        return self.cost_usd is not None

    def cost_text(self, digits: int = 4) -> str:
        """The cost for a person: "$0.0123", or "cost unknown" (never "$0.0000" for it)."""
        return "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.{digits}f}"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def output_tokens_per_second(self) -> float:
        return self.output_tokens / self.model_seconds if self.model_seconds > 0 else 0.0

    @classmethod
    def sum(cls, items: list[Usage]) -> Usage:
        total = cls()
        for item in items:
            total.add(item)
        return total


#: the fields `Usage.add` sums as they are
_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
           "reasoning_tokens", "calls", "retries", "model_seconds")  # fmt: skip


def merge_reported(into: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    """Add the reported model ids of `more` to `into`, in place, within the bounds
    (`MAX_REQUESTED` models asked for, `MAX_REPORTED` ids each, `MAX_ID_CHARS` each)."""
    for requested, ids in more.items():
        requested = str(requested)[:MAX_ID_CHARS]
        known = into.get(requested)
        if known is None:
            if len(into) >= MAX_REQUESTED:
                continue
            known = into[requested] = []
        for reported in ids:
            reported = str(reported)[:MAX_ID_CHARS]
            if len(known) >= MAX_REPORTED:
                break
            if reported not in known:
                known.append(reported)
