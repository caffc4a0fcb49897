"""The run's spend ledger: what its model calls cost, kept as they are made (issue 33).

Each record keeps its trial's spend (`budget.SPEND_KEY`), but a trial whose process was
killed (kill -9) before its record was written spent money too, and so did a trial an
interrupt or a hard budget stopped. So the run's one writer (the parent process) also
keeps `spend.jsonl` in the run folder:

- one line each time this invocation's running totals of its model calls change:
  `{"invocation": ID, "cost_usd": C, "tokens": T}`, cumulative, so the last line of an
  invocation holds all of its spend, and a lost or torn line loses nothing the next
  does not hold. It is written after each model call in one process, after each usage
  message of a worker (`--workers`), and before each record (on Ray, where the usage
  comes with the result);
- each line is flushed at once (a kill -9 loses none) and fsynced within a second, as
  the records are (`jsonl.RecordStream`);
- a record written while the ledger is kept names its invocation (its spend's
  `invocation`); a resume counts, for each invocation in the ledger, the larger of its
  last line and the sum of its records (the ledger holds every call its records hold,
  and those of the trials never recorded), and every other record as it is (runs made
  before the ledger, a ledger line lost to an OS crash). So each call counts once;
- the ledger is compacted when a run opens (one line per invocation, written to a
  temporary file, then `os.replace`), so it stays as long as the last invocation's calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.engine.budget import INVOCATION_KEY, tokens_of
from helios.engine.jsonl import RecordStream
from helios.safe_json import dumps, parse_json
from helios.usage import Usage

log = logging.getLogger(__name__)

#: the ledger's stream name in the run folder (`spend.jsonl`)
LEDGER = "spend"


@dataclass(frozen=True)
class LedgerTotal:
    """An invocation's spend as its ledger's last line keeps it."""

    cost_usd: float | None
    tokens: int


def read_ledger(path: Path) -> dict[str, LedgerTotal]:
    """Each invocation's last line, by its id (a torn or bad line is skipped)."""
    totals: dict[str, LedgerTotal] = {}
    for _, _, line in RecordStream(path).scan(_decode):
        if isinstance(line, tuple):
            invocation, total = line
            totals[invocation] = total
    return totals


def _decode(raw: bytes) -> tuple[str, LedgerTotal] | str:
    try:
        data = parse_json(raw)
    except ValueError as exc:
        return str(exc)
    if not isinstance(data, dict) or not isinstance(data.get(INVOCATION_KEY), str):
        return "not a ledger line"
    cost, tokens = data.get("cost_usd"), data.get("tokens")
    cost = float(cost) if isinstance(cost, int | float) else None
    return data[INVOCATION_KEY], LedgerTotal(cost, tokens if isinstance(tokens, int) else 0)


def compact(path: Path, totals: Mapping[str, LedgerTotal]) -> None:
    """Rewrite the ledger as one line per invocation (atomically); best effort."""
    if not path.is_file():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as handle:
            for invocation, total in totals.items():
                handle.write(_line(invocation, total.cost_usd, total.tokens))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        log.info("could not compact the spend ledger %s: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()


def _line(invocation: str, cost: float | None, tokens: int) -> bytes:
    entry: dict[str, Any] = {INVOCATION_KEY: invocation,
                             "cost_usd": None if cost is None else round(cost, 8),
                             "tokens": tokens}  # fmt: skip
    return dumps(entry).encode() + b"\n"


class SpendLedger:
    """This invocation's lines of the run's ledger, and the earlier invocations' totals."""

    def __init__(self, stream: RecordStream) -> None:
        self.stream = stream
        self.invocation = uuid.uuid4().hex[:16]
        #: the earlier invocations' totals (read, and compacted, when the run opened)
        self.earlier = read_ledger(stream.path)
        stream.close()  # an open handle would write on past the replaced file
        compact(stream.path, self.earlier)
        self._last: tuple[float | None, int] | None = None
        self._broken = False

    @property
    def kept(self) -> bool:
        """Whether this invocation has a line in the ledger (it spent something)."""
        return self._last is not None

    def note(self, totals: Usage) -> None:
        """This invocation's running totals, kept if they changed."""
        now = (totals.cost_usd, tokens_of(totals))
        if now == self._last or self._broken or not (now[0] or now[1]):
            return
        self._last = now
        cost = None if now[0] is None else round(now[0], 8)
        try:
            self.stream.append({INVOCATION_KEY: self.invocation, "cost_usd": cost,
                                "tokens": now[1]})  # fmt: skip
        except OSError as exc:  # a full disk: the records keep each trial's spend still
            self._broken = True
            log.warning("cannot keep the spend ledger %s (%s): a trial killed before "
                        "its record is not counted on resume", self.stream.path,
                        exc.strerror)  # fmt: skip
