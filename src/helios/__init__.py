"""Helios: run AI agents over many tasks and prompts at once, each in its own sandbox.

The public names are imported on first use, so `import helios` (and the start of
the `helios` command, which must install its signal handlers first) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports
from helios.version import __version__

if TYPE_CHECKING:
    from helios.errors import HeliosError
    from helios.tasks.runner import AgentRunner, ParallelRunner
    from helios.tasks.summary import BatchResult, TaskResult
    from helios.tasks.task import Task, discover_tasks, load_task

_EXPORTS = {
    "HeliosError": "helios.errors",
    "AgentRunner": "helios.tasks.runner",
    "ParallelRunner": "helios.tasks.runner",
    "BatchResult": "helios.tasks.summary",
    "TaskResult": "helios.tasks.summary",
    "Task": "helios.tasks.task",
    "discover_tasks": "helios.tasks.task",
    "load_task": "helios.tasks.task",
}

__all__ = [
    "AgentRunner",
    "BatchResult",
    "HeliosError",
    "ParallelRunner",
    "Task",
    "TaskResult",
    "__version__",
    "discover_tasks",
    "load_task",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
