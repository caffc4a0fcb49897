"""Finished (or running) run folders read back: shared by `helios compare` and the viewer.

`runs` loads a run folder as tasks with their attempts; `compare` pairs runs task by
task. Neither prints: they return plain data (`CompareReport.to_json()`).
"""

from helios.results.compare import CompareReport, Comparison, compare_runs
from helios.results.runs import NotARun, RunResults, load_run, load_runs

__all__ = [
    "CompareReport",
    "Comparison",
    "NotARun",
    "RunResults",
    "compare_runs",
    "load_run",
    "load_runs",
]
