"""Token usage and cost, counted per model call and summed per trial and batch.

A cost is known or unknown, never guessed: with no price for the model, `cost_usd`
is None and `cost_unknown_reason` says why ("no price for openai-compatible/scripted").
A sum with an unknown part is unknown. A known price of zero stays 0.0.
"""

from __future__ import annotations

from pydantic import BaseModel


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

    def add(self, other: Usage) -> None:
        """Accumulate `other` into this usage in place (cheap: no validation)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.reasoning_tokens += other.reasoning_tokens
        if self.cost_usd is None or other.cost_usd is None:
            self.cost_usd = None
            self.cost_unknown_reason = self.cost_unknown_reason or other.cost_unknown_reason
        else:
            self.cost_usd += other.cost_usd
        self.calls += other.calls
        self.retries += other.retries
        self.model_seconds += other.model_seconds

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
