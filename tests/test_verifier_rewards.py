from __future__ import annotations

from pathlib import Path

import pytest

from helios.errors import RewardFileInvalid, RewardFileMissing
from helios.tasks.verifier import primary_reward, read_rewards


def test_reward_txt(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text(" 0.5\n")
    assert read_rewards(tmp_path) == {"reward": 0.5}


def test_reward_json_wins_and_primary_is_reward_key(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("0")
    (tmp_path / "reward.json").write_text('{"reward": 0.75, "style": 1}')
    rewards = read_rewards(tmp_path)
    assert rewards == {"reward": 0.75, "style": 1.0}
    assert primary_reward(rewards) == 0.75
    assert primary_reward({"a": 1.0, "b": 0.0}) == 0.5


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("reward.txt", "yes"),
        ("reward.txt", "nan"),
        ("reward.json", "[1, 2]"),
        ("reward.json", '{"reward": "high"}'),
        ("reward.json", '{"reward": true}'),
        ("reward.json", "{not json"),
    ],
)
def test_invalid_reward_files(tmp_path: Path, name: str, content: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(RewardFileInvalid):
        read_rewards(tmp_path)


def test_missing_reward(tmp_path: Path) -> None:
    with pytest.raises(RewardFileMissing):
        read_rewards(tmp_path)
