"""A run's `results.jsonl`, indexed by byte offset: built once, extended as it grows.

Each finished line becomes a small `Row` (where the line is and the fields the
trial table sorts and filters on); the whole record is read from disk only for the
page being shown. A line without its newline yet is being written: it waits for
the next read. A line that does not parse is a row with status `damaged` and the
reason, so the table shows it and everything after it still counts.

Every line is a row, but the totals count each trial once: a later line of one id
(`--retry-errors`) and a newer retry of a trial (`--retry-failed-below`,
`engine.retries`) replace the older row in them; the older row stays in the table,
marked `superseded`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

import helios.engine.retries as retries

#: the fields a page may be sorted by
SORT_KEYS = ("index", "task", "attempt", "status", "reward", "duration", "cost", "error_type")


class _Eval(msgspec.Struct):
    error: Any = None


class _Head(msgspec.Struct):
    """The fields of a record the table needs, from any door (the rest of the line,
    a trajectory's worth of a toolcalls evaluation say, is skipped undecoded)."""

    trial_id: Any = None
    task_name: Any = None  # batch, run
    test_id: Any = None  # toolcalls
    prompt_index: Any = None  # generate
    attempt: Any = None
    run_index: Any = None  # toolcalls
    status: Any = None
    reward: Any = None
    match_rate: Any = None  # toolcalls
    error: Any = None
    eval_result: _Eval | None = None
    duration: Any = None
    folder: Any = None
    usage: Any = None
    cost_usd: Any = None  # generate
    tokens_in: Any = None
    tokens_out: Any = None
    model: Any = None  # batch, run: the trial's model and agent
    agent: Any = None
    retry_of: Any = None  # a retry's marks (`engine.retries`)
    retry: Any = None


_decode_head = msgspec.json.Decoder(_Head).decode


@dataclass(slots=True)
class Row:
    index: int
    offset: int
    length: int
    task: str
    attempt: int
    status: str
    reward: float | None
    duration: float | None
    cost: float | None
    error_type: str
    folder: str | None
    tokens_in: int
    tokens_out: int
    #: the trial's model and agent (a run of several breaks its figures down by them)
    model: str | None = None
    agent: str | None = None
    #: the trial this row counts for (its id, or the id a retry ran again), and which
    #: retry it is; a row a later one replaced in the totals is `superseded`
    slot: str | None = None
    retry: int = 0
    superseded: bool = False


#: one string object per model or agent name, however many rows name it
_NAMES: dict[str, str] = {}


def _name(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    name: str = value[:200]
    if len(_NAMES) < 10_000:
        return _NAMES.setdefault(name, name)
    return _NAMES.get(name, name)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def error_type(error: Any) -> str:
    """`ConnectionError` from "ConnectionError: cannot connect ..." or from an error
    record {"type": "ConnectionError", ...}; "" for none."""
    if isinstance(error, dict):
        kind = error.get("type")
        return kind[:60] if isinstance(kind, str) and kind else "error"
    if not isinstance(error, str) or not error:
        return ""
    head = error.split(":", 1)[0].strip()
    return head if head.isidentifier() and len(head) <= 60 else "error"


def _task(head: _Head) -> str:
    if isinstance(head.task_name, str):
        return head.task_name
    if isinstance(head.test_id, str):
        return head.test_id
    if isinstance(head.prompt_index, int):
        return f"prompt {head.prompt_index}"
    return str(head.trial_id or "")


def _row(index: int, offset: int, line: bytes) -> Row:
    try:
        head = _decode_head(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        # RecursionError: a line nested deeper than the decoder goes is damaged, like
        # any other line that does not parse (never the whole runs list's error)
        return Row(index, offset, len(line), "", 0, "damaged", None, None, None,
                   f"damaged line: {exc}"[:200], None, 0, 0)  # fmt: skip
    usage = head.usage if isinstance(head.usage, dict) else {}
    attempt = head.attempt
    if attempt is None and isinstance(head.run_index, int):
        attempt = head.run_index + 1
    error = head.error if head.error is not None else (head.eval_result or _Eval()).error
    return Row(
        index=index,
        offset=offset,
        length=len(line),
        task=_task(head),
        attempt=_count(attempt),
        status=head.status if isinstance(head.status, str) else "unknown",
        reward=_number(head.reward if head.reward is not None else head.match_rate),
        duration=_number(head.duration),
        cost=_number(usage.get("cost_usd", head.cost_usd)),
        error_type=error_type(error),
        folder=head.folder if isinstance(head.folder, str) else None,
        tokens_in=_count(usage.get("input_tokens", head.tokens_in)),
        tokens_out=_count(usage.get("output_tokens", head.tokens_out)),
        model=_name(head.model),
        agent=_name(head.agent),
        **_slot(head),
    )


def _tid(record: dict[str, Any]) -> str:
    return str(record.get("trial_id"))


def _slot(head: _Head) -> dict[str, Any]:
    """The row's slot and retry number: a retry's marks only when they hash to its id."""
    if not isinstance(head.trial_id, str):
        return {"slot": None}
    slot, n = retries.slot(head.retry_of, head.retry, head.trial_id)
    return {"slot": slot, "retry": n}


@dataclass
class Group:
    """The figures of the trials of one model and agent."""

    trials: int = 0
    passed: int = 0
    errors: int = 0
    reward_sum: float = 0.0
    rewarded: int = 0
    cost: float = 0.0
    cost_unknown: int = 0

    def add(self, row: Row, sign: int = 1) -> None:
        """Count `row` (sign -1: take it back out)."""
        self.trials += sign
        self.passed += sign * (row.status == "passed")
        self.errors += sign * (row.status == "error")
        if row.reward is not None:
            self.reward_sum += sign * row.reward
            self.rewarded += sign
        self.cost_unknown += sign * (row.cost is None)
        self.cost += sign * (row.cost or 0.0)

    def as_dict(self, model: str | None, agent: str | None) -> dict[str, Any]:
        return {
            "model": model, "agent": agent, "trials": self.trials, "passed": self.passed,
            "errors": self.errors, "pass_rate": self.passed / self.trials if self.trials else None,
            "mean_reward": self.reward_sum / self.rewarded if self.rewarded else None,
            "cost_usd": None if self.cost_unknown else self.cost,
        }  # fmt: skip


#: model and agent groups kept per run at most (past it, the rest are not broken down)
MAX_GROUPS = 100


@dataclass
class Totals:
    """The run's counts, kept as rows are added (never recomputed over all rows)."""

    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    reward_sum: float = 0.0
    rewarded: int = 0
    cost: float = 0.0
    #: rows with no known cost (a model with no price): the run's cost is unknown
    cost_unknown: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    #: (model, agent) -> its figures
    groups: dict[tuple[str | None, str | None], Group] = field(default_factory=dict)

    def add(self, row: Row, sign: int = 1) -> None:
        """Count `row` (sign -1: take it back out, when a newer row replaces it)."""
        if row.status != "damaged":
            key = (row.model, row.agent)
            group = self.groups.get(key)
            if group is None and len(self.groups) < MAX_GROUPS:
                group = self.groups[key] = Group()
            if group is not None:
                group.add(row, sign)
        self.statuses[row.status] += sign
        if row.error_type:
            self.errors[row.error_type if row.status != "damaged" else "damaged line"] += sign
        if row.reward is not None:
            self.reward_sum += sign * row.reward
            self.rewarded += sign
        if row.cost is None and row.status != "damaged":
            self.cost_unknown += sign
        self.cost += sign * (row.cost or 0.0)
        self.tokens_in += sign * row.tokens_in
        self.tokens_out += sign * row.tokens_out
        if sign < 0:  # a count taken back to 0 is no status (nor error) of the run's
            self.statuses += Counter()
            self.errors += Counter()

    def as_dict(self) -> dict[str, Any]:
        trials = sum(self.statuses.values())
        return {
            "trials": trials,
            "statuses": dict(self.statuses),
            "errors": dict(self.errors.most_common()),
            "pass_rate": self.statuses["passed"] / trials if trials else None,
            "mean_reward": self.reward_sum / self.rewarded if self.rewarded else None,
            # unknown (null) when any row's is: never a $0 for "no price"
            "cost_usd": None if self.cost_unknown else self.cost,
            "rows_written": self.statuses["ok"],
            "input_tokens": self.tokens_in,
            "output_tokens": self.tokens_out,
            "breakdown": self.breakdown(),
        }

    def breakdown(self) -> list[dict[str, Any]]:
        """Each model and agent's figures, when the run has more than one of either
        (by model, then agent); else empty."""
        if len(self.groups) < 2:
            return []
        order = sorted(self.groups, key=lambda key: (key[0] or "", key[1] or ""))
        return [self.groups[key].as_dict(*key) for key in order]


class RecordIndex:
    """The rows of one results.jsonl; `refresh()` reads only what was appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[Row] = []
        self.totals = Totals()
        self._end = 0  # bytes indexed so far (always just after a newline)
        self._identity: tuple[int, int] | None = None
        self._sorted: dict[tuple[str, bool], list[Row]] = {}
        #: slot -> the row counted for it in the totals
        self._counted: dict[str, Row] = {}

    def refresh(self) -> bool:
        """Index the lines appended since the last call; True when rows were added.
        A file replaced or shortened (a rewrite) is indexed again from the start."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return False
        identity = (stat.st_dev, stat.st_ino)
        if identity != self._identity or stat.st_size < self._end:
            self.rows, self.totals, self._end, self._identity = [], Totals(), 0, identity
            self._counted = {}
            self._sorted.clear()
        if stat.st_size == self._end:
            return False
        added = False
        with open(self.path, "rb") as handle:
            handle.seek(self._end)
            data = handle.read(stat.st_size - self._end)
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break  # the rest is a line still being written
            line = data[start:newline]
            if line.strip():
                row = _row(len(self.rows), self._end + start, line)
                self.rows.append(row)
                self._count(row)
                added = True
            start = newline + 1
        self._end += start
        if added:
            self._sorted.clear()
        return added

    def _count(self, row: Row) -> None:
        """Count `row` in the totals, in place of the older row of its slot."""
        older = self._counted.get(row.slot) if row.slot is not None else None
        if row.retry and older is None:  # a line of this id that was no valid retry
            older = self._counted.pop(_tid(self.record(row)), None)
        if older is not None:
            if older.retry > row.retry:  # an older retry written after a newer one
                row.superseded = True
                return
            self.totals.add(older, -1)
            older.superseded = True
        if row.slot is not None:
            self._counted[row.slot] = row
        self.totals.add(row)

    def ordered(self, sort: str, descending: bool) -> list[Row]:
        """The rows sorted by `sort` (cached until rows are added)."""
        if sort not in SORT_KEYS:
            raise ValueError(f"cannot sort by {sort!r} (one of: {', '.join(SORT_KEYS)})")
        cached = self._sorted.get((sort, descending))
        if cached is None:
            if sort == "index":
                cached = self.rows[::-1] if descending else self.rows
            else:  # rows without the value last, either way
                present = [row for row in self.rows if getattr(row, sort) is not None]
                missing = [row for row in self.rows if getattr(row, sort) is None]
                present.sort(key=lambda row: getattr(row, sort), reverse=descending)
                cached = present + missing
            self._sorted[(sort, descending)] = cached
        return cached

    def record(self, row: Row) -> dict[str, Any]:
        """The whole record of `row`, read from its offset; a damaged line is a dict
        saying so (with the line's first bytes)."""
        with open(self.path, "rb") as handle:
            handle.seek(row.offset)
            line = handle.read(row.length)
        try:
            value = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError) as exc:
            return {"damaged": f"line {row.index + 1}: {exc}", "text": line[:500].decode(
                "utf-8", "replace")}  # fmt: skip
        return value if isinstance(value, dict) else {"damaged": f"line {row.index + 1}: "
                                                      "not a JSON object"}  # fmt: skip
