"""Prices come from `genai-prices` (issue 33): the hand-written table is gone.

The expected costs are computed here from the library's own published prices
(its `ModelPrice` per million tokens), so a new release of its data changes both
sides alike; cache reads and writes are counted at their own prices.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from genai_prices.data_snapshot import get_snapshot

import helios.models.pricing as pricing
from helios.models.pricing import PriceTable, price_source
from helios.usage import Usage

#: one call: below every long-prompt tier
CALL = Usage(input_tokens=1_000, output_tokens=500, cache_read_tokens=2_000,
             cache_write_tokens=300)  # fmt: skip


def _published(provider: str, model: str) -> Any:
    _, info = get_snapshot().find_provider_model(model, None, provider, None)
    return info.get_prices(datetime.now(tz=UTC))


def _base(value: Any) -> Decimal:
    return Decimal(value.base if hasattr(value, "base") else value)


def _expected(provider: str, model: str) -> float:
    price = _published(provider, model)
    total = (CALL.input_tokens * _base(price.input_mtok)
             + CALL.output_tokens * _base(price.output_mtok)
             + CALL.cache_read_tokens * _base(price.cache_read_mtok)
             + CALL.cache_write_tokens * _base(price.cache_write_mtok or price.input_mtok))
    return float(total / 1_000_000)  # fmt: skip


@pytest.mark.parametrize(
    ("model", "provider", "name"),
    [("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
     ("openai/gpt-4.1", "openai", "gpt-4.1")],
)  # fmt: skip
def test_two_known_models_are_priced_by_genai_prices(model: str, provider: str, name: str) -> None:
    price = _published(provider, name)
    assert price.cache_read_mtok is not None  # cache reads have their own price
    assert _base(price.cache_read_mtok) < _base(price.input_mtok)
    cost = PriceTable().cost(model, CALL)
    assert cost == pytest.approx(_expected(provider, name), rel=1e-9)
    # and the cache tokens count at their own price, not the input's
    plain = PriceTable().cost(model, Usage(input_tokens=1_000, output_tokens=500))
    assert cost is not None and plain is not None and cost > plain
    cached = (2_000 * _base(price.cache_read_mtok)
              + 300 * _base(price.cache_write_mtok or price.input_mtok))  # fmt: skip
    assert cost - plain == pytest.approx(float(cached) / 1e6, rel=1e-9)


def test_the_hand_table_is_gone() -> None:
    assert not hasattr(pricing, "DEFAULT_PRICES")
    assert PriceTable().prices == {}


def test_a_prices_file_overrides_the_library(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"claude-sonnet-4-5": {"input": 1.0, "output": 1.0}}))
    table = PriceTable.load(prices)
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert table.cost("anthropic/claude-sonnet-4-5", million) == pytest.approx(2.0)


def test_unknown_and_self_hosted_models_have_no_price() -> None:
    table = PriceTable()
    assert table.lookup("anthropic/claude-no-such-model") is None
    # a self-hosted endpoint has no list price, whatever its model is called
    assert table.lookup("openai-compatible/gpt-4.1") is None


def test_the_price_source_and_its_date_are_named() -> None:
    source = price_source()
    assert source["source"] == "genai-prices"
    assert source["version"] and source["data_date"]
    datetime.fromisoformat(str(source["data_date"]))


def test_the_price_source_is_kept_and_a_broken_copy_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # reading the snapshot costs half a second: a run keeps the answer, by version
    monkeypatch.setenv("HOME", str(tmp_path))
    price_source.cache_clear()
    first = price_source()
    (kept,) = (tmp_path / ".cache/helios").glob("price-source-*.json")
    assert json.loads(kept.read_text()) == first
    for broken in ("{", '{"source": "x"}', "[1]", '{"source": 1, "version": 2, "data_date": 3}',
                   json.dumps({**first, "version": "0.0.0"}), "\udcff"):  # fmt: skip
        kept.write_text(broken, errors="surrogateescape")
        price_source.cache_clear()
        assert price_source() == first
        assert json.loads(kept.read_text()) == first  # and it is mended
    kept.write_text(json.dumps({**first, "data_date": "2001-01-01"}))
    price_source.cache_clear()
    assert price_source()["data_date"] == "2001-01-01"  # the kept answer is what is read
    (tmp_path / "home").mkdir()
    (tmp_path / "home/.cache").write_text("a file, not a folder")  # unwritable, even as root
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    price_source.cache_clear()
    assert price_source() == first  # computed, no error
    price_source.cache_clear()


def test_every_run_records_the_price_source() -> None:
    from helios.engine.config import RunConfig
    from helios.engine.saved_config import CONFIG_KEY

    saved = RunConfig(kind="batch").saved()[CONFIG_KEY]
    assert saved["price_source"] == price_source()


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "openai/gpt-4.1",
                                   "gemini/gemini-2.5-pro"])  # fmt: skip
@pytest.mark.parametrize(
    "usage",
    [Usage(input_tokens=1_000, output_tokens=500, cache_read_tokens=2_000, cache_write_tokens=300),
     Usage(input_tokens=150_000, output_tokens=9_000, cache_read_tokens=60_000),  # a long prompt
     Usage(output_tokens=10)],
)  # fmt: skip
def test_a_call_costs_what_genai_prices_computes(model: str, usage: Usage) -> None:
    from genai_prices import Usage as LibraryUsage
    from genai_prices import calc_price

    provider, _, name = model.partition("/")
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    theirs = calc_price(
        LibraryUsage(input_tokens=prompt, output_tokens=usage.output_tokens,
                     cache_read_tokens=usage.cache_read_tokens,
                     cache_write_tokens=usage.cache_write_tokens),
        name, provider_id={"gemini": "google"}.get(provider, provider),
    ).total_price  # fmt: skip
    assert PriceTable().cost(model, usage) == pytest.approx(float(theirs), rel=1e-9)


def test_four_processes_keeping_the_price_source_at_once_leave_one_whole_file(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    code = ("import json\nfrom helios.models.pricing import price_source\n"
            "print(json.dumps(price_source()))")
    env = {**os.environ, "HOME": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(4)]  # fmt: skip
    answers = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    (kept,) = (tmp_path / ".cache/helios").glob("price-source-*.json")  # no torn temp left
    assert all(answer == json.loads(kept.read_text()) for answer in answers)
    assert [p.name for p in kept.parent.iterdir()] == [kept.name]
