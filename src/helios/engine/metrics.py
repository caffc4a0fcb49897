"""Scores over many trials: pass@k (unbiased), pass rate, mean reward, bootstrap CI."""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k).

    With k == n this is 1.0 if any of the n attempts passed, else 0.0.
    """
    if n <= 0 or k <= 0:
        raise ValueError("n and k must be positive")
    if k > n:
        raise ValueError(f"k={k} exceeds the number of attempts n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_at_k(passes_by_task: Mapping[str, Sequence[bool]], k: int) -> float:
    """Mean over tasks of pass@k; tasks with fewer than k attempts are left out."""
    scores = [
        pass_at_k(len(passes), sum(passes), k)
        for passes in passes_by_task.values()
        if len(passes) >= k
    ]
    return sum(scores) / len(scores) if scores else 0.0


def pass_at_k_table(passes_by_task: Mapping[str, Sequence[bool]]) -> dict[str, float]:
    """pass@1 … pass@n for n = the smallest number of attempts any task has."""
    if not passes_by_task:
        return {}
    max_k = min(len(p) for p in passes_by_task.values())
    return {f"pass@{k}": mean_pass_at_k(passes_by_task, k) for k in range(1, max_k + 1)}


def group_passes(rows: Iterable[tuple[str, bool]]) -> dict[str, list[bool]]:
    grouped: dict[str, list[bool]] = defaultdict(list)
    for key, passed in rows:
        grouped[key].append(passed)
    return dict(grouped)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


#: above this many values the interval comes from the normal approximation
BOOTSTRAP_MAX = 5000


def _normal_ci(values: Sequence[float], confidence: float) -> tuple[float, float]:
    n = len(values)
    center = mean(values)
    spread = math.sqrt(sum((v - center) ** 2 for v in values) / max(n - 1, 1) / n)
    z = statistics.NormalDist().inv_cdf((1 + confidence) / 2)
    return (center - z * spread, center + z * spread)


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = 0.95, samples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; deterministic for a given seed.

    Past BOOTSTRAP_MAX values the normal approximation is used instead: it is as
    good there, and resampling would cost `samples` × n draws."""
    if not values:
        return (0.0, 0.0)
    n = len(values)
    if n > BOOTSTRAP_MAX:
        return _normal_ci(values, confidence)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(samples))
    low = means[int((1 - confidence) / 2 * samples)]
    high = means[min(samples - 1, int((1 + confidence) / 2 * samples))]
    return (low, high)
