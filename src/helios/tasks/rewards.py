"""A multi-step task's rewards: each step's gate (`min_reward`) and the trial's
reward (`multi_step_reward_strategy`), with Harbor's semantics:

- a step "has a result" when its verifier produced rewards; a step whose
  verifier failed (no reward file, a timeout) has none;
- `min_reward` as a number gates the `reward` key, as a table each of its
  keys; a missing key, or no result at all, counts as -inf: the remaining
  steps are not run;
- "mean" (the default) is the per-key mean over the steps that have a result,
  a key a step lacks counting as 0; "final" is the last step's result as it is
  (after an early stop, the stopping step's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from helios.engine.metrics import mean
from helios.tasks.phases import MinReward

Rewards = dict[str, float]


def meets_min_reward(rewards: Rewards | None, threshold: MinReward) -> bool:
    if threshold is None:
        return True
    if rewards is None:
        return False
    gates = threshold if isinstance(threshold, dict) else {"reward": float(threshold)}
    return all(rewards.get(key, -math.inf) >= value for key, value in gates.items())


def combine(results: Sequence[Rewards | None], strategy: str) -> Rewards | None:
    """The trial's rewards from the steps' (None: a step with no result); None
    when no step counts."""
    if not results:
        return None
    if strategy == "final":
        return None if results[-1] is None else dict(results[-1])
    counted = [r for r in results if r is not None]
    if not counted:
        return None
    keys = list(dict.fromkeys(key for r in counted for key in r))
    # `mean`: finite rewards have a finite mean (a plain sum may overflow)
    return {key: mean([r.get(key, 0.0) for r in counted]) for key in keys}
