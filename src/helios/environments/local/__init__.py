"""The local provider: a bubblewrap sandbox per trial (`environment`), its bwrap
command line (`bwrap`), folder (`root`), users, services, limits and cleanup, and
the persistent shells it runs commands in (`pool`, `program`: which server).

`LocalEnvironment` is imported on first use, so importing one of the modules
here does not import the provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports

if TYPE_CHECKING:
    from helios.environments.local.environment import LocalEnvironment as LocalEnvironment

__getattr__, __dir__ = lazy_exports(globals())
