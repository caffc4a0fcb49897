"""The agent adapters under the name the issue uses (same objects as `adapters`)."""

from helios.toolcalls.adapters import *  # noqa: F403
from helios.toolcalls.adapters import __all__  # noqa: F401
