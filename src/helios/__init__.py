"""Helios: run AI agents over many tasks and prompts at once, each in its own sandbox."""

__version__ = "0.1.0"

from helios.errors import HeliosError
from helios.tasks.runner import AgentRunner, ParallelRunner
from helios.tasks.summary import BatchResult, TaskResult
from helios.tasks.task import Task, discover_tasks, load_task

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
