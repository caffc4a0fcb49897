"""A reward is a plain decimal number: Python's float() reads `1_0` as 10, so a test
(or an agent that reached its file) could pass a task with a reward above 1 that no
test meant. Both reward files are read on the host, the same for every provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helios.errors import RewardFileInvalid
from helios.tasks.verifier import read_rewards

LOOSE = ["1_0", "0_5", "١", "１", "nan", "inf", "-Infinity", "0x1", "1.0f", "1 0", "½", ""]
PLAIN = [("1", 1.0), ("0", 0.0), ("0.25", 0.25), ("+1.", 1.0), (".5", 0.5), ("-2e-3", -0.002),
         ("1E2", 100.0)]  # fmt: skip


@pytest.mark.parametrize("text", LOOSE, ids=[f"loose{i}" for i in range(len(LOOSE))])
def test_reward_txt_that_float_would_take_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "reward.txt").write_text(text + "\n", "utf-8")
    with pytest.raises(RewardFileInvalid, match=r"reward\.txt"):
        read_rewards(tmp_path)


@pytest.mark.parametrize("text", LOOSE, ids=[f"loose{i}" for i in range(len(LOOSE))])
def test_reward_json_text_values_are_strict_too(tmp_path: Path, text: str) -> None:
    (tmp_path / "reward.json").write_text(json.dumps({"reward": text}), "utf-8")
    with pytest.raises(RewardFileInvalid, match=r"reward\.json\[reward\]"):
        read_rewards(tmp_path)


@pytest.mark.parametrize(("text", "value"), PLAIN, ids=[p[0] for p in PLAIN])
def test_plain_decimals_still_read(tmp_path: Path, text: str, value: float) -> None:
    (tmp_path / "reward.txt").write_text(f" {text}\n", "utf-8")
    assert read_rewards(tmp_path) == {"reward": value}
    (tmp_path / "reward.json").write_text(json.dumps({"reward": text, "n": 1}), "utf-8")
    assert read_rewards(tmp_path) == {"reward": value, "n": 1.0}
