"""A fourth door with a budget of its own is under 100 lines and imports only the
public API: the engine from `helios.engine`, no private module."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import pytest

from helios.errors import ConfigError

from .budget_door import run_prompts

SOURCE = Path(__file__).with_name("budget_door.py")


def test_the_door_spends_its_budget_and_records_the_rest(tmp_path: Path) -> None:
    prompts = [f"prompt number {i}" for i in range(5)]  # 3 words each
    door = asyncio.run(run_prompts(prompts, budget=10, folder=tmp_path / "run"))
    assert door.spent == 9  # three prompts fit, the fourth would pass 10
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text()
               .splitlines()]  # fmt: skip
    assert sorted(r["status"] for r in records) == ["over_budget"] * 2 + ["ran"] * 3
    # resumed: every prompt has its record, nothing runs again
    again = asyncio.run(run_prompts(prompts, budget=10, folder=tmp_path / "run"))
    assert again.spent == 0
    with pytest.raises(ConfigError, match="budget=10"):  # another budget is another run
        asyncio.run(run_prompts(prompts, budget=20, folder=tmp_path / "run"))


def test_the_door_is_small_and_uses_only_the_public_api() -> None:
    source = SOURCE.read_text()
    assert len(source.splitlines()) < 100
    modules = {
        node.module for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }  # fmt: skip
    helios = {m for m in modules if m.startswith("helios")}
    assert helios == {"helios.engine", "helios.environments", "helios.failures"}
    assert not any(part.startswith("_") for m in helios for part in m.split("."))
