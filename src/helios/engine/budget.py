"""A run's budgets: `--max-cost USD`, `--max-total-tokens N`, `--max-duration 2h`.

What a budget means (docs/getting-started.md, "Budgets"):
- it counts the whole run, every invocation of it: a resume adds to the spend of
  the earlier ones (read back from the records, so a kill -9 loses none of what was
  recorded), and a resume with a higher budget continues where the run stopped. A
  budget is one invocation's setting, never kept in run.json's config: a resume
  without it runs with none;
- the spend is what the model calls cost (`Usage.cost_usd`), the tokens they moved
  (input, output, cache read and written) and the run's time (run.json's `seconds`
  plus this invocation's);
- a trial starts only while the spend so far plus, for each trial in flight, the
  mean spend of a finished trial stays under every budget: the run ends near its
  cap, not up to `-n` trials past it. Trials in flight finish; with `hard`, they are
  stopped as soon as the spend reaches a budget, and recorded as `BudgetStopped`
  infrastructure errors, which a resume runs again (they are no result);
- each record carries its trial's spend (`spend`), every line counted once, a
  superseded attempt's included: money spent stays spent;
- the spend of a trial never recorded (its process killed with -9, or stopped by an
  interrupt or a hard budget) counts too: the run's spend ledger (`spend_ledger.py`)
  keeps each invocation's running totals as its model calls are made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from helios.errors import ConfigError
from helios.usage import Usage

#: the record key of a trial's spend, and of a trial the budget stopped
SPEND_KEY = "spend"
STOPPED_KEY = "budget_stopped"
#: the key of a record's spend that names the invocation that wrote it (`spend_ledger`)
INVOCATION_KEY = "invocation"
#: the error type of a trial stopped by `--budget-hard`
BUDGET_STOPPED = "BudgetStopped"
#: the option of each budget, as messages name it
FLAGS = {"max_cost": "--max-cost", "max_tokens": "--max-total-tokens",
         "max_seconds": "--max-duration"}  # fmt: skip

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | float | int) -> float:
    """Seconds of "90s", "45m", "2h", "1h30m", "1d" or a bare number (seconds)."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        spaced = text.strip().lower()
        parts = _DURATION.findall(spaced)
        if not spaced or _DURATION.sub("", spaced).strip():
            raise ConfigError(f"bad duration {text!r}: use e.g. 90s, 45m, 2h or 1h30m",
                              field="--max-duration")  # fmt: skip
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ConfigError(f"--max-duration {text!r}: must be more than 0", field="--max-duration")
    return seconds


def duration_text(seconds: float) -> str:
    """2h, 45m, 1h30m, 90s: as a person writes it."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


class BudgetConfig(BaseModel):
    """The run's budgets (None: no budget of that kind)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_cost: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    #: stop the trials in flight too once a budget is reached
    hard: bool = False

    @classmethod
    def of(
        cls, max_cost: float | None = None, max_tokens: int | None = None,
        max_duration: str | float | None = None, hard: bool = False,
    ) -> BudgetConfig:  # fmt: skip
        """From the options as given (`max_duration`: "2h", or seconds)."""
        seconds = parse_duration(max_duration) if max_duration is not None else None
        for flag, value in (("--max-cost", max_cost), ("--max-total-tokens", max_tokens)):
            if value is not None and not value > 0:
                raise ConfigError(f"{flag} {value!r}: must be more than 0", field=flag)
        return cls(max_cost=max_cost, max_tokens=max_tokens, max_seconds=seconds, hard=hard)

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.max_cost, self.max_tokens, self.max_seconds))

    def recorded(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


@dataclass
class Spend:
    """What a run has spent: dollars (None: unknown), tokens, seconds, trials."""

    cost_usd: float | None = 0.0
    tokens: int = 0
    seconds: float = 0.0
    #: recorded trials whose spend this counts (for the mean per trial)
    trials: int = 0

    def add_record(self, spend: Any) -> None:
        """Add a record's `spend` ({"cost_usd", "tokens"}); anything else counts as none."""
        if not isinstance(spend, dict):
            return
        cost, tokens = spend.get("cost_usd"), spend.get("tokens")
        if isinstance(cost, int | float) and self.cost_usd is not None:
            self.cost_usd += float(cost)
        elif cost is None and "cost_usd" in spend:
            self.cost_usd = None
        if isinstance(tokens, int):
            self.tokens += tokens
        self.trials += 1

    def recorded(self) -> dict[str, Any]:
        cost = None if self.cost_usd is None else round(self.cost_usd, 6)
        return {"cost_usd": cost, "tokens": self.tokens, "seconds": round(self.seconds, 3)}


def tokens_of(usage: Usage) -> int:
    return (usage.input_tokens + usage.output_tokens + usage.cache_read_tokens
            + usage.cache_write_tokens)  # fmt: skip


def record_spend(usage: Usage) -> dict[str, Any]:
    """A record's `spend`: its trial's cost and tokens."""
    cost = None if usage.cost_usd is None else round(usage.cost_usd, 8)
    return {"cost_usd": cost, "tokens": tokens_of(usage)}


def prior_spend(spends: Iterable[Any], seconds: float,
                ledger: Mapping[str, Any] | None = None) -> Spend:  # fmt: skip
    """The spend of the earlier invocations: every record line's `spend`, and their time.
    `ledger`: the spend ledger's total of each invocation (`spend_ledger.LedgerTotal`, by
    its id): an invocation's records count no more than it (the larger of the two), so
    the spend of its trials never recorded (a kill -9) counts, and every call once."""
    spend = Spend(seconds=seconds)
    ledger = ledger or {}
    by_invocation: dict[str, Spend] = {}
    for item in spends:
        invocation = item.get(INVOCATION_KEY) if isinstance(item, dict) else None
        if isinstance(invocation, str) and invocation in ledger:
            by_invocation.setdefault(invocation, Spend()).add_record(item)
        else:
            spend.add_record(item)
    for invocation, total in ledger.items():
        recorded = by_invocation.get(invocation, Spend())
        spend.trials += recorded.trials
        spend.tokens += max(total.tokens, recorded.tokens)
        if spend.cost_usd is not None:
            if total.cost_usd is None or recorded.cost_usd is None:
                spend.cost_usd = None
            else:
                spend.cost_usd += max(total.cost_usd, recorded.cost_usd)
    return spend


class BudgetWatch:
    """The budgets of one invocation against the run's spend: the earlier invocations'
    (`prior`) plus this one's (its recorded trials, and the live totals of the model
    calls, which include the trials in flight)."""

    def __init__(self, config: BudgetConfig, prior: Spend) -> None:
        self.config = config
        self.prior = prior
        #: this invocation's recorded trials
        self.recorded = Spend()
        #: this invocation's model calls so far (the live totals), and its seconds
        self.live_cost: float | None = 0.0
        self.live_tokens = 0
        self.seconds = prior.seconds
        #: which budget stopped the run ("max_cost", ...), once one did
        self.stopped_by: str | None = None

    def observe(self, totals: Usage | None, seconds: float) -> None:
        """The live totals of this invocation's model calls and the run's time."""
        if totals is not None:
            self.live_cost = totals.cost_usd
            self.live_tokens = tokens_of(totals)
        self.seconds = seconds

    def on_record(self, spend: dict[str, Any]) -> None:
        self.recorded.add_record(spend)

    def spent(self) -> Spend:
        """The run's spend so far: the earlier invocations' and this one's (the live
        totals, or the recorded trials', whichever is more: a worker's calls reach the
        live totals late)."""
        mine_cost = self.recorded.cost_usd
        if self.live_cost is None or mine_cost is None:
            mine_cost = None
        else:
            mine_cost = max(mine_cost, self.live_cost)
        cost = None if self.prior.cost_usd is None or mine_cost is None \
            else self.prior.cost_usd + mine_cost  # fmt: skip
        tokens = self.prior.tokens + max(self.recorded.tokens, self.live_tokens)
        return Spend(cost_usd=cost, tokens=tokens, seconds=self.seconds,
                     trials=self.prior.trials + self.recorded.trials)  # fmt: skip

    def reached(self, in_flight: int = 0) -> str | None:
        """The first budget the spend has reached. With `in_flight` > 0, the spend
        counted is at least the recorded trials' plus, for each trial in flight, the
        mean of a recorded trial: what the run will have spent once they end."""
        spent, c = self.spent(), self.config
        done = self.prior.trials + self.recorded.trials
        recorded_cost = (self.prior.cost_usd or 0.0) + (self.recorded.cost_usd or 0.0)
        recorded_tokens = self.prior.tokens + self.recorded.tokens
        cost, tokens = spent.cost_usd or 0.0, spent.tokens
        if done and in_flight:
            cost = max(cost, recorded_cost * (1 + in_flight / done))
            tokens = max(tokens, round(recorded_tokens * (1 + in_flight / done)))
        if c.max_cost is not None and cost >= c.max_cost:
            return "max_cost"
        if c.max_tokens is not None and tokens >= c.max_tokens:
            return "max_tokens"
        if c.max_seconds is not None and spent.seconds >= c.max_seconds:
            return "max_seconds"
        return None

    def stop_reason(self) -> str:
        """One line: which budget stopped the run, and the spend against it."""
        which = self.stopped_by or "?"
        return f"the budget {FLAGS.get(which, which)} stopped the run: {self.against()}"

    def against(self) -> str:
        """The spend against each budget: "$0.51/$1.00 · 1,200/5,000 tok · 3m/1h"."""
        spent, c = self.spent(), self.config
        parts = []
        if c.max_cost is not None:
            digits = 4 if spent.cost_usd is None or spent.cost_usd >= 0.01 else 6
            cost = "?" if spent.cost_usd is None else f"${spent.cost_usd:.{digits}f}"
            parts.append(f"{cost}/${c.max_cost:g}")
        if c.max_tokens is not None:
            parts.append(f"{spent.tokens:,}/{c.max_tokens:,} tok")
        if c.max_seconds is not None:
            parts.append(f"{duration_text(spent.seconds)}/{duration_text(c.max_seconds)}")
        return " · ".join(parts)

    def recorded_state(self) -> dict[str, Any]:
        """run.json's `budget`: the budgets, what stopped the run and the spend."""
        return {**self.config.recorded(), "stopped_by": self.stopped_by,
                "spent": self.spent().recorded()}  # fmt: skip
