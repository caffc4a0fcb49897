"""Helios: run AI agents over many tasks and prompts at once, each in its own sandbox.

The public names are imported on first use, so `import helios` (and the start of
the `helios` command, which must install its signal handlers first) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helios.lazy import lazy_exports
from helios.version import __version__ as __version__

if TYPE_CHECKING:
    from helios.errors import HeliosError as HeliosError
    from helios.tasks.runner import AgentRunner as AgentRunner
    from helios.tasks.runner import ParallelRunner as ParallelRunner
    from helios.tasks.summary import BatchResult as BatchResult
    from helios.tasks.summary import TaskResult as TaskResult
    from helios.tasks.task import Task as Task
    from helios.tasks.task import discover_tasks as discover_tasks
    from helios.tasks.task import load_task as load_task

__getattr__, __dir__ = lazy_exports(globals(), also=["__version__"])
