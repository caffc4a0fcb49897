"""A bounded chaos run: random INT/TERM/kill -9 into a local batch, each followed by
--resume. The full run (60 signals) is `benchmarks/chaos.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from helios.testing.chaos import run_chaos


@pytest.mark.usefixtures("need_bwrap")
def test_random_signals_then_resume_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    report = run_chaos(tmp_path, tasks=40, signals=8, seed=7)
    assert sum(report.signals.values()) >= 6, report  # the batch was really interrupted
    assert report.lost == 0 and report.duplicated == 0, report
    assert report.summary_consistent and not report.processes_left, report
    assert set(report.exit_codes) <= {0, 130, -9}, report
