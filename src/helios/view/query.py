"""A page of a run's trial table: the filter and sort a request asks for."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from helios.view.records import SORT_KEYS, RecordIndex, Row

#: most rows one page may hold
MAX_LIMIT = 500
_RANGES = ("reward", "duration", "cost")


class BadQuery(ValueError):
    """A parameter of the request that cannot be used (named in the message)."""


def _float(params: Mapping[str, str], name: str) -> float | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise BadQuery(f"{name} must be a number, not {text[:40]!r}") from None


def _int(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = params.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise BadQuery(f"{name} must be a whole number, not {text[:40]!r}")
    return max(low, min(high, int(text)))


@dataclass(frozen=True)
class Query:
    sort: str
    descending: bool
    offset: int
    limit: int
    tests: tuple[Callable[[Row], bool], ...]

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Query:
        sort = params.get("sort", "index") or "index"
        if sort not in SORT_KEYS:
            raise BadQuery(f"sort must be one of {', '.join(SORT_KEYS)}, not {sort[:40]!r}")
        tests: list[Callable[[Row], bool]] = []
        statuses = {s for s in params.get("status", "").split(",") if s}
        if statuses:
            tests.append(lambda row: row.status in statuses)
        task = params.get("task", "").strip().lower()
        if task:
            tests.append(lambda row: task in row.task.lower())
        error = params.get("error_type", "").strip()
        if error:
            tests.append(lambda row: row.error_type == error)
        if params.get("attempt", "").strip():
            attempt = _int(params, "attempt", 0, 0, 1 << 30)
            tests.append(lambda row: row.attempt == attempt)
        for name in _RANGES:
            low, high = _float(params, f"{name}_min"), _float(params, f"{name}_max")
            if low is not None or high is not None:
                tests.append(_within(name, low, high))
        return cls(
            sort=sort,
            descending=params.get("desc", "") in ("1", "true"),
            offset=_int(params, "offset", 0, 0, 1 << 40),
            limit=_int(params, "limit", 50, 1, MAX_LIMIT),
            tests=tuple(tests),
        )

    def page(self, index: RecordIndex) -> tuple[int, list[Row]]:
        """How many rows match, and the rows of the requested page."""
        rows = index.ordered(self.sort, self.descending)
        if not self.tests:
            return len(rows), rows[self.offset : self.offset + self.limit]
        matched = 0
        page: list[Row] = []
        end = self.offset + self.limit
        for row in rows:
            if all(test(row) for test in self.tests):
                if self.offset <= matched < end:
                    page.append(row)
                matched += 1
        return matched, page


def _within(name: str, low: float | None, high: float | None) -> Callable[[Row], bool]:
    def test(row: Row) -> bool:
        value: Any = getattr(row, name)
        if value is None:
            return False
        return (low is None or value >= low) and (high is None or value <= high)

    return test
