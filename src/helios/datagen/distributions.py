"""Toolset distributions, with Hermes's semantics.

A distribution gives each toolset its own probability (percent): every prompt
includes each toolset independently with that chance; if none is picked, the most
likely one is used. The built-ins carry Hermes's names and probabilities,
restricted to the toolsets Helios provides (`terminal`, `file`, `web`); Hermes
distributions with none of them left are not offered. `--distributions_file`
adds or overrides distributions from YAML or JSON:

    my_mix:
      description: mostly terminal
      toolsets: {terminal: 90, file: 50, web: 10}

A toolset that Helios does not provide here (unknown, or `web` without a search
backend) is warned about once and skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helios.errors import ConfigError, InputError
from helios.safe_json import JsonValueError, parse_json


@dataclass(frozen=True)
class Distribution:
    name: str
    description: str
    #: toolset → inclusion probability in percent, in the order given
    toolsets: Mapping[str, float]


def _d(name: str, description: str, **toolsets: float) -> Distribution:
    return Distribution(name, description, toolsets)


# Hermes's toolset_distributions, keeping only the terminal, file and web entries.
BUILTIN: dict[str, Distribution] = {
    d.name: d
    for d in (
        _d("default", "All available tools, all the time", web=100, terminal=100, file=100),
        _d(
            "image_gen",
            "Image generation focus (here: its web and terminal part)",
            web=55,
            terminal=45,
        ),
        _d("research", "Web research (here: web and terminal)", web=90, terminal=10),
        _d(
            "science",
            "Scientific research with web, terminal and file tools",
            web=94,
            terminal=94,
            file=94,
        ),
        _d(
            "development",
            "Terminal and file tools with occasional web lookup",
            terminal=80,
            file=80,
            web=30,
        ),
        _d("safe", "No terminal (here: web only)", web=80),
        _d("balanced", "Equal probability of every toolset", web=50, terminal=50, file=50),
        _d("minimal", "Only web tools for basic research", web=100),
        _d(
            "terminal_only",
            "Terminal and file tools for code execution tasks",
            terminal=100,
            file=100,
        ),
        _d(
            "terminal_web",
            "Terminal and file tools with web search for documentation",
            terminal=100,
            file=100,
            web=100,
        ),
        _d("creative", "Image generation and vision focus (here: its web part)", web=30),
        _d("reasoning", "Reasoning focus (here: web and terminal)", web=30, terminal=20),
        _d("browser_use", "Browser interaction (here: its web part)", web=80),
        _d("browser_tasks", "Browser-focused (here: its terminal part)", terminal=15),
        _d(
            "terminal_tasks",
            "High terminal/file availability, occasional web",
            terminal=97,
            file=97,
            web=97,
        ),
        _d(
            "mixed_tasks",
            "High terminal and file availability, some web",
            terminal=92,
            file=92,
            web=35,
        ),
    )
}
#: Hermes distributions without any toolset Helios provides
HERMES_ONLY = {"browser_only": "browser"}


def _fail(message: str, path: Path, field: str | None = None) -> InputError:
    return InputError(message, file=str(path), field=field)


def _parse_entry(name: Any, entry: Any, path: Path) -> Distribution:
    if not isinstance(name, str) or not name:
        raise _fail("distribution names must be non-empty strings", path, str(name))
    description = ""
    toolsets = entry
    if isinstance(entry, Mapping) and "toolsets" in entry:
        description = str(entry.get("description") or "")
        toolsets = entry["toolsets"]
    if not isinstance(toolsets, Mapping) or not toolsets:
        raise _fail("expected a mapping of toolset name to probability (0-100)", path, name)
    parsed: dict[str, float] = {}
    for toolset, probability in toolsets.items():
        if isinstance(probability, bool) or not isinstance(probability, int | float):
            raise _fail(f"the probability of {toolset!r} is not a number", path, name)
        if not 0 <= probability <= 100:
            raise _fail(f"the probability of {toolset!r} must be within 0-100", path, name)
        parsed[str(toolset)] = float(probability)
    return Distribution(name, description, parsed)


def load_distributions_file(path: Path) -> dict[str, Distribution]:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"cannot read: {exc}", path, "--distributions_file") from None
    if path.suffix.lower() == ".json":
        try:  # NaN is refused by the range check below, with its name
            data = parse_json(text, allow_nan=True)
        except JsonValueError as exc:
            raise InputError(exc.reason, file=str(path), line=exc.line) from None
    else:
        import yaml

        from helios.safe_yaml import load_yaml

        try:
            data = load_yaml(text)  # bounded: depth, aliases expanded, finite numbers
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            raise InputError(f"invalid YAML ({getattr(exc, 'problem', exc)})", file=str(path),
                             line=line) from None  # fmt: skip
    if not isinstance(data, Mapping) or not data:
        raise _fail("expected a mapping of distribution names", path)
    return {str(name): _parse_entry(name, entry, path) for name, entry in data.items()}


def resolve_distribution(name: str, extra: Mapping[str, Distribution]) -> Distribution:
    known = {**BUILTIN, **extra}
    if name in known:
        return known[name]
    if name in HERMES_ONLY:
        raise ConfigError(
            f"distribution {name!r} only uses the {HERMES_ONLY[name]} toolset, which Helios "
            "does not provide", field="--distribution",
        )  # fmt: skip
    raise ConfigError(
        f"unknown distribution {name!r} (known: {', '.join(sorted(known))})",
        field="--distribution",
    )


class ToolsetSampler:
    """Samples one prompt's toolsets; toolsets not usable here are warned about once."""

    def __init__(
        self,
        distribution: Distribution,
        usable: Callable[[str], str | None],
        warn: Callable[[str], None],
    ) -> None:
        self.distribution = distribution
        self.offered: dict[str, float] = {}
        for toolset, probability in distribution.toolsets.items():
            reason = usable(toolset)
            if reason is None:
                self.offered[toolset] = probability
            else:
                warn(f"distribution {distribution.name!r}: toolset {toolset!r} skipped: {reason}")
        if not self.offered:
            raise ConfigError(
                f"distribution {distribution.name!r} has no toolset that can be offered here",
                field="--distribution",
            )
        self.fallback = max(self.offered, key=lambda name: self.offered[name])

    def sample(self, rng: random.Random) -> list[str]:
        chosen = [name for name, p in self.offered.items() if rng.random() * 100 < p]
        return chosen or [self.fallback]


def chosen_distribution(name: str, distributions_file: Path | None) -> Distribution:
    """The distribution a run names: a built-in one, or one of `distributions_file`."""
    extra = load_distributions_file(distributions_file) if distributions_file else {}
    return resolve_distribution(name, extra)


def describe(distribution: Distribution) -> str:
    parts = sorted(distribution.toolsets.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} {p:g}%" for name, p in parts)
