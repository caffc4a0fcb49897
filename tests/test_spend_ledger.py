"""The run's spend ledger (engine/spend_ledger.py): each invocation's running totals,
kept as its calls are made, and how a resume counts them with the records: every call
once, whether its trial was recorded or killed before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helios.engine.budget import prior_spend
from helios.engine.jsonl import RecordStream
from helios.engine.spend_ledger import LedgerTotal, SpendLedger, read_ledger
from helios.usage import Usage


def test_the_ledger_keeps_each_invocations_last_totals_and_compacts(tmp_path: Path) -> None:
    path = tmp_path / "spend.jsonl"
    first = SpendLedger(RecordStream(path))
    assert first.earlier == {} and not first.kept
    first.note(Usage())  # nothing spent: no line
    for tokens in (10, 20, 20, 30):  # an unchanged total is not written again
        first.note(Usage(input_tokens=tokens, cost_usd=tokens / 1000))
    first.stream.close()
    assert len(path.read_text().splitlines()) == 3 and first.kept
    with path.open("ab") as handle:  # a kill -9 mid-append: a torn last line
        handle.write(b'{"invocation": "x", "cost_u')
    second = SpendLedger(RecordStream(path))
    assert second.earlier == {first.invocation: LedgerTotal(0.03, 30)}
    # compacted on open: one line per invocation, the torn one gone
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"invocation": first.invocation, "cost_usd": 0.03, "tokens": 30}]
    second.note(Usage(output_tokens=5, cost_usd=None))  # a model without a price
    second.stream.close()
    assert read_ledger(path)[second.invocation] == LedgerTotal(None, 5)


def test_a_resume_counts_every_call_once() -> None:
    ledger = {"a": LedgerTotal(0.08, 80)}
    spends = [
        {"cost_usd": 0.01, "tokens": 10, "invocation": "a"},  # in a's ledger line already
        {"cost_usd": 0.01, "tokens": 10, "invocation": "a"},
        {"cost_usd": 0.02, "tokens": 20},  # a run made before the ledger: as it is
        {"cost_usd": 0.04, "tokens": 40, "invocation": "lost"},  # its ledger line lost
        None,  # a record without a spend
    ]
    spend = prior_spend(spends, 5.0, ledger)
    # a's 8 calls (2 recorded, 6 killed in flight), plus the two other records
    assert spend.cost_usd == pytest.approx(0.08 + 0.02 + 0.04)
    assert spend.tokens == 80 + 20 + 40 and spend.trials == 4 and spend.seconds == 5.0
    # records hold more than a line that was cut short: the larger counts, once
    behind = prior_spend(spends[:2], 0.0, {"a": LedgerTotal(0.01, 10)})
    assert behind.cost_usd == pytest.approx(0.02) and behind.tokens == 20
    assert prior_spend(spends, 0.0, {"a": LedgerTotal(None, 80)}).cost_usd is None
