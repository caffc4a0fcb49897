"""What the door lends to the code it calls during one run."""

from __future__ import annotations

from contextvars import ContextVar

from helios.engine.scheduler import Slot

#: the running unit's scheduler slot, so a backoff inside an adapter frees it
current_slot: ContextVar[Slot | None] = ContextVar("helios_toolcalls_slot", default=None)
