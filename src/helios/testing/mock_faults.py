"""The faults the mock model server injects: their settings, the `fail_sequence` queue's
items, and what each looks like on a wire (shared by the server and its command line)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

if TYPE_CHECKING:
    from helios.testing.mock_dialects import Dialect

FaultKind = int | Literal["drop", "malformed"]
_FAULT_WORDS = frozenset({"drop", "malformed"})


@dataclass(frozen=True)
class Faults:
    """Fault settings; probabilities are independent draws, checked in the order
    drop, 429, 500, malformed (so with several set, earlier ones shadow later ones)."""

    latency_ms: float = 0.0
    rate_429: float = 0.0
    retry_after: float = 1.0
    rate_500: float = 0.0
    drop: float = 0.0
    malformed: float = 0.0
    require_key: str | None = field(default=None, repr=False)
    #: each reply's latency is latency_ms ± up to this much (uniform)
    jitter_ms: float = 0.0
    #: a provider's rate limit: at most this many requests answered in any second, the
    #: others get a 429 whose Retry-After is when the window has room (0: no limit)
    rate_limit_rps: float = 0.0

    def __post_init__(self) -> None:
        for name in ("rate_429", "rate_500", "drop", "malformed"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
        if min(self.latency_ms, self.retry_after, self.jitter_ms, self.rate_limit_rps) < 0:
            raise ValueError("latency_ms, jitter_ms, retry_after and rate_limit_rps must be >= 0")

    def describe(self) -> dict[str, Any]:
        """Settings as JSON, with the required key reduced to whether one is set."""
        data = asdict(self)
        data["require_key"] = self.require_key is not None
        return data


def check_fail_sequence(items: Iterable[object]) -> list[FaultKind]:
    checked: list[FaultKind] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and 400 <= item <= 599:
            checked.append(item)
        elif item in _FAULT_WORDS:
            checked.append("drop" if item == "drop" else "malformed")
        else:
            raise ValueError(
                f"fail_sequence items are 4xx/5xx statuses, 'drop' or 'malformed': {item!r}"
            )
    return checked


def parse_fail_sequence(text: str) -> list[FaultKind]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    return check_fail_sequence(item if item in _FAULT_WORDS else int(item) for item in items)


def injected(
    request: web.Request, dialect: Dialect, fault: FaultKind, *, retry_after: float,
    retry_after_headers: Sequence[str] = (), stream: bool = False,
) -> tuple[str, web.Response]:  # fmt: skip
    """(the stat it counts as, the response) of an injected fault, in `dialect`'s shape."""
    if fault == "drop":
        # Closing the socket before any byte of a response: the client sees a disconnect.
        if request.transport is not None:
            request.transport.close()
        return "dropped", web.Response(status=500)  # never reaches the wire
    if fault == "malformed":
        return "malformed", dialect.malformed(stream=stream)
    status = int(fault)
    if status == 429:
        message = "Rate limit reached (injected by the mock server). Please try again later."
        response = dialect.error(429, message, retry_after=retry_after)
        if retry_after_headers:
            response.headers.popall("retry-after", None)
            for value in retry_after_headers:
                response.headers.add("Retry-After", value)
        return "injected_429", response
    stat = "injected_500" if status >= 500 else "injected_other"
    return stat, dialect.error(status, f"Injected error {status} from the mock server.")
