"""Scores over many trials: pass@k (unbiased), pass rate, mean reward, bootstrap CI."""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k).

    With k == n this is 1.0 if any of the n attempts passed, else 0.0. The ratio is a
    running product of min(c, k) float factors, never a binomial of n: 100,000 attempts
    cost microseconds, not minutes.
    """
    if n <= 0 or k <= 0:
        raise ValueError("n and k must be positive")
    if k > n:
        raise ValueError(f"k={k} exceeds the number of attempts n={n}")
    if n - c < k:
        return 1.0
    if k == 1:
        return c / n
    # C(n-c, k) / C(n, k) = prod over i < c of (n-k-i) / (n-i), or over j < k of
    # (n-c-j) / (n-j): the shorter of the two products.
    ratio = 1.0
    if c <= k:
        for i in range(c):
            ratio *= (n - k - i) / (n - i)
    else:
        for j in range(k):
            ratio *= (n - c - j) / (n - j)
            if ratio == 0.0:
                break
    return 1.0 - ratio


def k_values(n: int) -> list[int]:
    """The k a table of pass@k shows for n attempts: 1 … 10, then 20, 50, 100, 200,
    500, … below n, and n itself (a table grows with log n, not with n)."""
    ks = list(range(1, min(n, 10) + 1))
    step = 20
    while step < n:
        ks.append(step)
        step = step * 5 // 2 if str(step).startswith("2") else step * 2
    if n > 10:
        ks.append(n)
    return ks


def mean_pass_at_k(passes_by_task: Mapping[str, Sequence[bool]], k: int) -> float:
    """Mean over tasks of pass@k; tasks with fewer than k attempts are left out."""
    scores = [
        pass_at_k(len(passes), sum(passes), k)
        for passes in passes_by_task.values()
        if len(passes) >= k
    ]
    return sum(scores) / len(scores) if scores else 0.0


def _counts(passes_by_task: Mapping[str, Sequence[bool]]) -> list[tuple[int, int]]:
    return [(len(p), sum(p)) for p in passes_by_task.values()]


def pass_at_k_table(passes_by_task: Mapping[str, Sequence[bool]]) -> dict[str, float]:
    """pass@k for each k of `k_values(n)`, n the smallest number of attempts any task has."""
    if not passes_by_task:
        return {}
    counts = _counts(passes_by_task)
    max_k = min(n for n, _ in counts)
    return {f"pass@{k}": sum(pass_at_k(n, c, k) for n, c in counts) / len(counts)
            for k in k_values(max_k)}  # fmt: skip


def pass_at_k_ci_table(
    passes_by_task: Mapping[str, Sequence[bool]], *, confidence: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float]]:
    """For each k of `pass_at_k_table`, the bootstrap interval over tasks of the mean of
    the tasks' pass@k (the tasks resampled, each keeping its own attempts)."""
    if not passes_by_task:
        return {}
    counts = _counts(passes_by_task)
    max_k = min(n for n, _ in counts)
    table = {}
    for k in k_values(max_k):
        scores = [pass_at_k(n, c, k) for n, c in counts]
        table[f"pass@{k}"] = bootstrap_ci(scores, confidence=confidence, seed=seed)
    return table


def group_passes(rows: Iterable[tuple[str, bool]]) -> dict[str, list[bool]]:
    grouped: dict[str, list[bool]] = defaultdict(list)
    for key, passed in rows:
        grouped[key].append(passed)
    return dict(grouped)


def mean(values: Sequence[float]) -> float:
    """The mean of finite values, itself always finite: a plain sum can overflow
    (two rewards of 1e308), and then the values are scaled down first."""
    if not values:
        return 0.0
    plain = sum(values) / len(values)
    if math.isfinite(plain):
        return plain
    return _scaled_mean(values)


def _scaled_mean(values: Sequence[float]) -> float:
    low, high = min(values), max(values)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError("the mean of non-finite values is not a number")
    scale = max(abs(low), abs(high))
    scaled = math.fsum(v / scale for v in values) / len(values) * scale
    # The mean lies between the extremes: rounding must not carry it past them.
    return min(max(scaled, low), high)


#: above this many values the interval comes from the normal approximation
BOOTSTRAP_MAX = 5000


def _spread(values: Sequence[float], center: float, scale: float) -> float:
    """The standard error of the mean, computed on the values divided by `scale`
    (`d * d`, not `d ** 2`: a float power raises OverflowError)."""
    deviations = (v / scale - center / scale for v in values)
    n = len(values)
    return math.sqrt(sum(d * d for d in deviations) / max(n - 1, 1) / n) * scale


def _normal_ci(values: Sequence[float], confidence: float) -> tuple[float, float]:
    center = mean(values)
    z = statistics.NormalDist().inv_cdf((1 + confidence) / 2)
    spread = _spread(values, center, 1.0)
    if math.isfinite(center - z * spread) and math.isfinite(center + z * spread):
        return (center - z * spread, center + z * spread)
    # Huge values, whose squares overflow: scaled down, and (as the interval of a
    # mean never reaches past the values) kept within them.
    low, high = min(values), max(values)
    spread = _spread(values, center, max(abs(low), abs(high)))
    return (max(low, center - z * spread), min(high, center + z * spread))


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = 0.95, samples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; deterministic for a given seed.

    Past BOOTSTRAP_MAX values the normal approximation is used instead: it is as
    good there, and resampling would cost `samples` × n draws."""
    if not values:
        return (0.0, 0.0)
    low, high = min(values), max(values)
    if low == high:  # every resample's mean is that value (one task; all passed)
        return (low, high)
    n = len(values)
    if n > BOOTSTRAP_MAX:
        return _normal_ci(values, confidence)
    rng = random.Random(seed)
    means = sorted(mean(rng.choices(values, k=n)) for _ in range(samples))
    low = means[int((1 - confidence) / 2 * samples)]
    high = means[min(samples - 1, int((1 + confidence) / 2 * samples))]
    return (low, high)
