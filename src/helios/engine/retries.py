"""Retrying what deserves it: `--retry-failed-below R` on a resume (issue 33).

A *slot* is one unit of a door's plan, named by its `trial_id` (a task × attempt ×
agent × model). A resume with a threshold R runs each slot whose counted record is
scored (not an error) with a reward below R once more, as a NEW unit: its own id
(`retry_id(slot, n)`), its own folder (the door's `retried`), recorded beside the
slot's earlier records and never over them. Its record carries `retry_of` (the
slot), `retry` (n = 1, 2, ...) and `retry_round`.

Which record counts: the slot's newest, i.e. the retry with the highest n (a later
line of one id still wins over an earlier one, as for `--retry-errors`). The older
ones stay in `results.jsonl` and their folders stay where they are; the summary,
the live display and `helios view` count the newest only.

Errored trials are not retried by R: they have no measured reward, and
`--retry-errors` reruns them in place (as before); both flags may be given.

Rounds make a killed retry resume without paying twice: run.json's `retry_round`
is `{"round": k, "below": R, "finished": false}`, written before the round's first
unit starts and marked finished when the invocation ends without an interrupt, a
fatal stop or a budget stop. A slot whose newest record is of round k is never
retried again in round k; so a resume with the same R after a kill -9 runs only
the retries that had not been recorded, and a resume once the round is finished
starts round k+1 (rerunning what is still below R). A record whose `retry_of` and
`retry` do not hash to its `trial_id` (hand-edited, hostile) is no retry: it is
ignored as any record of an id the plan does not know.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from helios.engine.jsonl import RecordHead
from helios.errors import ConfigError

#: run.json's key, and each retry record's
ROUND_KEY = "retry_round"
RETRY_OF = "retry_of"
RETRY = "retry"
FLAG = "--retry-failed-below"

U = TypeVar("U")


@runtime_checkable
class Retries(Protocol[U]):
    """A door whose units can be run again as a new attempt beside the old one."""

    def retried(self, unit: U, n: int, trial_id: str) -> U:
        """`unit`'s n-th retry: id `trial_id`, a folder of its own, a label saying so."""
        ...


def retry_id(slot: str, n: int) -> str:
    """The id of a slot's n-th retry: stable, never an existing unit's."""
    return hashlib.sha256(f"{slot}\0retry\0{n}".encode()).hexdigest()[:16]


def check_below(value: Any) -> float:
    """R as a float: a finite number (rewards are any finite float; a trial passes
    at 1). One ConfigError naming the flag otherwise."""
    if isinstance(value, bool):
        value = None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{FLAG} takes a reward (a number, e.g. 0.5), not {value!r}",
                          field=FLAG) from None  # fmt: skip
    if not math.isfinite(number):
        raise ConfigError(f"{FLAG} takes a finite reward, not {value!r}", field=FLAG)
    return number


@dataclass(frozen=True)
class RetryRound:
    """This invocation's retry: the threshold and the round's number."""

    below: float
    number: int

    def recorded(self, finished: bool) -> dict[str, Any]:
        return {"round": self.number, "below": self.below, "finished": finished}


def next_round(below: float, last: Any) -> RetryRound:
    """The round this invocation runs: the last one again when it did not finish and
    had the same threshold (a resume after a kill), else a new one."""
    number = last.get("round") if isinstance(last, dict) else None
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        return RetryRound(below, 1)
    same = last.get("below") == below and last.get("finished") is False
    return RetryRound(below, number if same else number + 1)


def _field(record: dict[str, Any] | RecordHead, name: str) -> Any:
    return record.get(name) if isinstance(record, dict) else getattr(record, name, None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mark(record: dict[str, Any] | RecordHead, trial_id: str) -> tuple[str, int] | None:
    """(slot, n) of a retry record whose marks hash to its id; None otherwise."""
    slot, n = _field(record, RETRY_OF), _count(_field(record, RETRY))
    if not isinstance(slot, str) or n is None or n < 1 or retry_id(slot, n) != trial_id:
        return None
    return slot, n


def slot(retry_of: Any, retry: Any, trial_id: str) -> tuple[str, int]:
    """(the unit a record counts for, its retry number): a valid retry's marks, else
    its own id and 0. What a reader of `results.jsonl` keys records by, newest winning."""
    found = mark({RETRY_OF: retry_of, RETRY: retry}, trial_id)
    return found if found is not None else (trial_id, 0)


def newest_retries(known: Mapping[str, dict[str, Any] | RecordHead]) -> dict[str, int]:
    """slot -> the highest n among its recorded retries."""
    newest: dict[str, int] = {}
    for tid, record in known.items():
        found = mark(record, tid)
        if found is not None and found[1] > newest.get(found[0], 0):
            newest[found[0]] = found[1]
    return newest


def below(record: dict[str, Any] | RecordHead, round_: RetryRound) -> bool:
    """Whether the record deserves a retry in `round_`: scored, with a finite reward
    below R, and not itself a retry of this round."""
    if _field(record, "status") == "error":
        return False
    reward = _field(record, "reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return False
    if not math.isfinite(reward) or reward >= round_.below:
        return False
    return _count(_field(record, ROUND_KEY)) != round_.number


def keys(slot: str, n: int, round_: RetryRound | None) -> dict[str, Any]:
    """What a retry's record carries (beside the door's own record)."""
    marks: dict[str, Any] = {RETRY_OF: slot, RETRY: n}
    if round_ is not None:
        marks[ROUND_KEY] = round_.number
    return marks
