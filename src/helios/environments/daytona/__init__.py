"""The daytona provider: a cloud sandbox per trial through Daytona's official async
SDK (the `daytona` extra): its keys and client (`client`), the create request a
task's spec makes (`request`), retries and quota back-off (`retry`), commands
(`commands`), file moves (`transfer`), `helios cleanup` by label (`cleanup`) and
the provider itself (`environment`).

`DaytonaEnvironment` is imported on first use, and the SDK only when a sandbox is
made: Helios imports without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.environments.daytona.environment import DaytonaEnvironment as DaytonaEnvironment

__getattr__, __dir__ = lazy_exports(globals())
