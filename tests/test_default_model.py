"""One default model for every door (`helios.models.routing.DEFAULT_MODEL`)."""

from __future__ import annotations

from pathlib import Path

from helios.datagen.settings import GenerateSettings
from helios.models.pricing import PriceTable
from helios.models.routing import DEFAULT_MODEL, openrouter_name, split_name
from helios.tasks.runner import ParallelRunner


def _generate(**more: str) -> GenerateSettings:
    return GenerateSettings(dataset_file=Path("p.jsonl"), batch_size=1, run_name="r", **more)


def test_generate_and_batch_default_to_the_same_model() -> None:
    assert ParallelRunner(["t"], agent="tool").model == DEFAULT_MODEL
    assert _generate(routing="helios").model == DEFAULT_MODEL
    # Hermes's routing sends the name verbatim to OpenRouter, which spells it with a dot
    assert _generate().model == openrouter_name(DEFAULT_MODEL) == "anthropic/claude-sonnet-4.5"
    assert _generate(model="openai/gpt-4.1").model == "openai/gpt-4.1"


def test_the_default_model_is_known_to_the_routing_and_the_price_table() -> None:
    assert split_name(DEFAULT_MODEL) == ("anthropic", "claude-sonnet-4-5")
    assert PriceTable().lookup(DEFAULT_MODEL) is not None
    assert openrouter_name("openai/gpt-4.1") == "openai/gpt-4.1"
