"""A failure recorded as data: every door's results carry these (a trial never raises)."""

from __future__ import annotations

import errno
import traceback

from pydantic import BaseModel

from helios.errors import EnvironmentError_, HeliosError
from helios.secrets import redact

#: the error kind of a full output disk: every later unit would hit it too
DISK_FULL = "DiskFull"
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


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
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            kind = DISK_FULL
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
            # A host-side OSError is the harness's failure, never the agent's.
            infrastructure=isinstance(exc, EnvironmentError_ | OSError)
            or bool(getattr(exc, "infrastructure", False)),
        )
