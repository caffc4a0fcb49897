"""What `BatchRunner.run` returns: `GenerateResult`, the counts of the run and why
its first failed prompt failed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.text import visible


@dataclass
class GenerateResult:
    run_dir: Path
    rows: int = 0
    discarded: int = 0
    failed: int = 0
    #: the prompts of the run (every prompt failed: `failed == prompts`)
    prompts: int = 0
    #: why the first failed prompt failed ("BadRequestError: ..."), None when none did
    first_failure: str | None = None
    bad_lines: int = 0
    interrupted: bool = False
    #: why the run stopped starting prompts early (a rejected key), if it did
    aborted: str | None = None
    #: which budget stopped the run, and the spend, in one line (None: none did)
    budget_stopped: str | None = None
    statistics: dict[str, Any] = field(default_factory=dict)


def first_failure(finals: Iterable[dict[str, Any]]) -> str | None:
    """The error of the failed prompt with the lowest index, in one line."""
    failed = [r for r in finals if r.get("status") == "error"]
    if not failed:
        return None
    record = min(failed, key=lambda r: (not isinstance(r.get("prompt_index"), int),
                                        r.get("prompt_index") or 0))  # fmt: skip
    error = record.get("error")
    if isinstance(error, dict):
        text = f"{error.get('type') or 'error'}: {error.get('message') or ''}".rstrip(": ")
    else:
        text = str(error or "no error message")
    return visible(" ".join(text.split()), one_line=True)[:300]
