"""A generate run's `RunConfig`: the engine's run for a generate folder
(`<run_name>/.helios/`, resumed by name), what run.json keeps for `--resume`, and
Hermes's `reasoning_config` as Helios's settings."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from helios.datagen.folder import STORE_DIR
from helios.datagen.settings import GenerateSettings
from helios.engine.config import ConcurrencyConfig, OutputsConfig, RunConfig, SandboxConfig
from helios.engine.saved_config import dump_config
from helios.secrets import public_url


def reasoning_flags(config: dict[str, Any] | None) -> dict[str, Any]:
    """Hermes's reasoning_config ({"effort": "none"}, {"enabled": True, "effort": "high"})."""
    if not config:
        return {}
    if config.get("enabled") is False or config.get("effort") == "none":
        return {"reasoning_disabled": True}
    return {"reasoning_effort": config.get("effort")} if config.get("effort") else {}


#: the settings `helios generate --resume` takes from the run when not given again, by
#: their flag's name (the system prompt and prefill are not kept: pass them again;
#: --max_samples is this invocation's: a resume without it runs the whole dataset)
RESUMABLE = ("batch_size", "base_url", "routing", "provider", "max_turns", "num_workers",
             "concurrency", "max_tokens", "reasoning_effort", "reasoning_disabled",
             "providers_allowed", "providers_ignored", "providers_order", "provider_sort",
             "keep_no_reasoning", "image", "prompt_timeout", "prices",
             "distributions_file", "executor", "ray_address", "cache")  # fmt: skip


def resumable_settings(settings: GenerateSettings) -> dict[str, Any]:
    """What run.json keeps for `--resume` (no key; the endpoint without its userinfo)."""
    kept: dict[str, Any] = {}
    for name in RESUMABLE:
        value = getattr(settings, name)
        if isinstance(value, list):
            value = ",".join(value)
        elif isinstance(value, Path):
            value = str(value.absolute())
        kept[name] = value
    if settings.base_url:
        kept["base_url"] = public_url(settings.base_url)
    return kept


def run_config(settings: GenerateSettings) -> RunConfig:
    """The engine's run for a generate folder: `<run_name>/.helios/`, resumed by name."""
    s = settings
    seed = s.seed if s.seed is not None else random.randrange(2**31)  # recorded if new
    return RunConfig(
        kind="generate",
        concurrency=ConcurrencyConfig(
            in_flight=s.in_flight, retry_errors=True,
            executor="ray" if s.executor == "ray" else "local", ray_address=s.ray_address,
        ),
        sandbox=SandboxConfig(provider=s.provider),
        outputs=OutputsConfig(fixed=s.run_dir / STORE_DIR),
        recorded={
            "run_name": s.run_name, "dataset_file": str(s.dataset_file.absolute()),
            "model": s.model, "distribution": s.distribution, "seed": seed,
            "settings": resumable_settings(s),
        },
        config={"settings": dump_config(s)},
        labels=s.labels,
        budget=s.budget,
    )  # fmt: skip
