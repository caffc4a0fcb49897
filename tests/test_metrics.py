from __future__ import annotations

import random

import pytest

from helios.engine.metrics import (
    bootstrap_ci,
    mean_pass_at_k,
    pass_at_k,
    pass_at_k_ci_table,
    pass_at_k_table,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),
        (5, 0, 3, 0.0),
        (5, 5, 1, 1.0),
        (3, 1, 3, 1.0),  # k == n: any attempt passed
        (3, 0, 3, 0.0),
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (10, 3, 5, 1 - 21 / 252),
    ],
)
def test_pass_at_k_unbiased(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_k_above_n() -> None:
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_table_averages_over_tasks() -> None:
    passes = {"a": [True, False, False], "b": [False, False, False], "c": [True, True, True]}
    table = pass_at_k_table(passes)
    assert list(table) == ["pass@1", "pass@2", "pass@3"]
    assert table["pass@1"] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert table["pass@3"] == pytest.approx(2 / 3)
    assert mean_pass_at_k(passes, 2) == pytest.approx((2 / 3 + 0 + 1) / 3)


def test_bootstrap_ci_brackets_mean_and_is_deterministic() -> None:
    values = [0.0, 1.0] * 20
    low, high = bootstrap_ci(values)
    assert low < 0.5 < high
    assert bootstrap_ci(values) == (low, high)
    assert bootstrap_ci([1.0, 1.0]) == (1.0, 1.0)


def test_large_samples_use_the_normal_interval() -> None:
    from helios.engine.metrics import BOOTSTRAP_MAX

    values = [1.0 if i % 4 else 0.0 for i in range(BOOTSTRAP_MAX + 1)]
    low, high = bootstrap_ci(values)
    assert low < 0.75 < high and high - low < 0.03
    small = values[:2000]
    boot_low, boot_high = bootstrap_ci(small)
    assert boot_low < 0.75 < boot_high and 0.02 < boot_high - boot_low < 0.06


def test_pass_at_k_intervals_resample_tasks_with_their_own_attempts() -> None:
    """Each k's interval is a percentile bootstrap over tasks of their pass@k, checked
    against a plain computation of the same draws."""
    import random

    from helios.engine.metrics import pass_at_k_ci_table

    passes = {"a": [True, False, True], "b": [False, False, False], "c": [True, True, False],
              "d": [False, True, False], "e": [True, True, True]}  # fmt: skip
    table = pass_at_k_ci_table(passes)
    assert list(table) == ["pass@1", "pass@2", "pass@3"]
    for k in (1, 2, 3):
        scores = [pass_at_k(len(p), sum(p), k) for p in passes.values()]
        rng = random.Random(0)
        means = sorted(sum(rng.choices(scores, k=5)) / 5 for _ in range(1000))
        assert table[f"pass@{k}"] == (means[25], means[975])
        assert table[f"pass@{k}"][0] <= sum(scores) / 5 <= table[f"pass@{k}"][1]
    assert pass_at_k_ci_table({}) == {}


def test_bootstrap_ci_of_equal_values_is_that_value_without_resampling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One task tried 500 times has 500 pass@k, each a bootstrap over one value: the
    # batch's end spent seconds resampling what cannot vary (the local benchmark's parent).
    def no_draws(*args: object, **kwargs: object) -> list[float]:
        raise AssertionError("resampled values that are all equal")

    monkeypatch.setattr(random.Random, "choices", no_draws)
    assert bootstrap_ci([0.1, 0.1, 0.1]) == (0.1, 0.1)  # not their float mean 0.10000000000000002
    assert pass_at_k_ci_table({"only": [True, False] * 250})["pass@500"] == (1.0, 1.0)
    with pytest.raises(AssertionError):
        bootstrap_ci([0.0, 1.0])
