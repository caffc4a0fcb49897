"""A failure recorded as data: every door's results carry these (a trial never raises)."""

from __future__ import annotations

import traceback

from pydantic import BaseModel

from helios.errors import EnvironmentError_, HeliosError
from helios.secrets import redact


class ErrorInfo(BaseModel):
    """A failure recorded as data: its kind, a one-line message and the phase."""

    type: str
    message: str
    phase: str | None = None
    detail: str | None = None
    #: the sandbox or the harness failed, not the agent: the trial is an error
    infrastructure: bool = False

    @classmethod
    def from_exception(cls, exc: BaseException, phase: str | None = None) -> ErrorInfo:
        kind = exc.kind if isinstance(exc, HeliosError) else type(exc).__name__
        detail = None
        if not isinstance(exc, HeliosError):
            # Unexpected exceptions keep their traceback for debugging.
            detail = redact("".join(traceback.format_exception(exc))[-4000:])
        message = redact(" ".join(str(exc).split())) or kind
        return cls(
            type=kind,
            message=message[:500],
            phase=phase,
            detail=detail,
            infrastructure=isinstance(exc, EnvironmentError_)
            or bool(getattr(exc, "infrastructure", False)),
        )
