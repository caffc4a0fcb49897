"""The computer agent's settings (`agent_settings`), read and checked once.

| setting | default | meaning |
|---|---|---|
| `max_turns` | 100 | model turns before the run ends as partial (`MaxTurns`) |
| `geometry` | the desktop's (1024x768) | `"WxH"`, `[w, h]` or `{"width", "height"}` |
| `start_url` | none | the browser is sent there before the first screenshot |
| `keep_screenshots` | the batch's (3) | screenshots the model still sees (older: a placeholder) |
| `bash` | true | offer a `bash` tool, but only when the task allows it |
| `action_timeout` | 60 | seconds for one action (an overrun goes back as an error) |
| `settle_seconds` | 1.0 | a screenshot waits for two equal frames in a row, at most this long |
| `provider` | from the model | force `anthropic`, `openai`, `gemini` or `generic` |
| `system_prompt` | built in | the system prompt (`{width}`, `{height}` are filled in) |

`task_allows_bash` is not a user setting: the task door sets it from the task.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helios.environments.desktop.actions import Geometry
from helios.errors import ConfigError

DEFAULT_MAX_TURNS = 100
DEFAULT_ACTION_TIMEOUT = 60.0
#: the longest a screenshot waits for the screen to stop moving (a smooth scroll, a
#: page loading): the model aims at what it was sent, which must still be there
DEFAULT_SETTLE_SECONDS = 1.0
MAX_SETTLE_SECONDS = 30.0
PROVIDERS = ("anthropic", "openai", "gemini", "generic")
#: the setting the task door fills in from the task (never from the user)
TASK_ALLOWS_BASH = "task_allows_bash"

DEFAULT_SYSTEM_PROMPT = """\
You operate a computer: a Linux desktop of {width}x{height} pixels, which you see \
through screenshots and drive with the computer tool (mouse, keyboard, scrolling, \
waiting, zooming). Each result comes with a new screenshot. Work step by step, and \
check the screen after each action. Do not ask questions: nobody will answer.
When the task is complete, finish with the tool's done action if it has one; \
otherwise reply with your final answer and no tool call.
"""

_GEOMETRY = re.compile(r"^\s*(\d{2,5})\s*[xX×]\s*(\d{2,5})\s*$")


@dataclass(frozen=True)
class ComputerSettings:
    max_turns: int = DEFAULT_MAX_TURNS
    #: None: the running desktop's, or `Geometry()` for one the agent starts
    geometry: Geometry | None = None
    start_url: str | None = None
    #: None: the generation setting `keep_images` (default 3)
    keep_screenshots: int | None = None
    #: the user wants bash offered (it is, only if the task allows it too)
    bash: bool = True
    task_allows_bash: bool = False
    action_timeout: float = DEFAULT_ACTION_TIMEOUT
    settle_seconds: float = DEFAULT_SETTLE_SECONDS
    provider: str | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT

    @property
    def bash_allowed(self) -> bool:
        return self.bash and self.task_allows_bash

    @classmethod
    def read(cls, settings: Mapping[str, Any]) -> ComputerSettings:
        """Settings from `agent_settings`; a bad value is a one-line ConfigError."""
        known = {
            "max_turns", "geometry", "start_url", "keep_screenshots", "bash",
            TASK_ALLOWS_BASH, "action_timeout", "settle_seconds", "provider", "system_prompt",
        }  # fmt: skip
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(
                f"unknown computer agent setting(s): {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known - {TASK_ALLOWS_BASH}))})",
                field="agent_settings",
            )
        provider = settings.get("provider")
        if provider is not None and provider not in PROVIDERS:
            raise ConfigError(
                f"unknown computer provider {provider!r} (known: {', '.join(PROVIDERS)})",
                field="agent_settings.provider",
            )
        return cls(
            max_turns=_positive_int(settings, "max_turns", DEFAULT_MAX_TURNS),
            geometry=parse_geometry(settings.get("geometry")),
            start_url=str(settings["start_url"]) if settings.get("start_url") else None,
            keep_screenshots=(
                None
                if settings.get("keep_screenshots") is None
                else _positive_int(settings, "keep_screenshots", 1)
            ),
            bash=_flag(settings, "bash", True),
            task_allows_bash=_flag(settings, TASK_ALLOWS_BASH, False),
            action_timeout=_positive_float(settings, "action_timeout", DEFAULT_ACTION_TIMEOUT),
            settle_seconds=_settle(settings.get("settle_seconds")),
            provider=provider,
            system_prompt=str(settings.get("system_prompt") or DEFAULT_SYSTEM_PROMPT),
        )

    def identity(self) -> dict[str, Any]:
        """What changes results (part of every trial id). `settle_seconds` is named
        only when it is not the default, so the ids of earlier runs still hold."""
        geometry = self.geometry
        settle = (
            {}
            if self.settle_seconds == DEFAULT_SETTLE_SECONDS
            else {"settle_seconds": self.settle_seconds}
        )
        return {
            "max_turns": self.max_turns,
            "geometry": None if geometry is None else f"{geometry.width}x{geometry.height}",
            "start_url": self.start_url,
            "keep_screenshots": self.keep_screenshots,
            "bash": self.bash_allowed,
            "action_timeout": self.action_timeout,
            "provider": self.provider,
            "system_prompt": hashlib.sha256(self.system_prompt.encode()).hexdigest()[:16],
            **settle,
        }


def parse_geometry(value: Any) -> Geometry | None:
    """`"1280x800"`, `[1280, 800]` or `{"width": 1280, "height": 800}`; None stays None."""
    if value is None or value == "":
        return None
    width: Any
    height: Any
    if isinstance(value, Geometry):
        return value
    if isinstance(value, str):
        match = _GEOMETRY.match(value)
        if match is None:
            raise ConfigError(
                f"bad geometry {value!r} (write WIDTHxHEIGHT, e.g. 1280x800)",
                field="agent_settings.geometry",
            )
        width, height = match.groups()
    elif isinstance(value, list | tuple) and len(value) == 2:
        width, height = value
    elif isinstance(value, Mapping) and {"width", "height"} <= set(value):
        width, height = value["width"], value["height"]
    else:
        raise ConfigError(
            f"bad geometry {value!r} (write WIDTHxHEIGHT)", field="agent_settings.geometry"
        )
    try:
        geometry = Geometry(int(width), int(height))
    except (TypeError, ValueError):
        raise ConfigError(
            f"bad geometry {value!r} (write WIDTHxHEIGHT)", field="agent_settings.geometry"
        ) from None
    if not (64 <= geometry.width <= 8192 and 64 <= geometry.height <= 8192):
        raise ConfigError(
            f"geometry {geometry.width}x{geometry.height} is out of range (64 to 8192 pixels)",
            field="agent_settings.geometry",
        )
    return geometry


def _positive_int(settings: Mapping[str, Any], name: str, default: int) -> int:
    value = settings.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{name} must be a whole number, got {value!r}", field=name)
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {value!r}", field=name) from None
    if number < 1:
        raise ConfigError(f"{name} must be at least 1, got {number}", field=name)
    return number


def _positive_float(settings: Mapping[str, Any], name: str, default: float) -> float:
    value = settings.get(name)
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        message = f"{name} must be a number of seconds, got {value!r}"
        raise ConfigError(message, field=name) from None
    if not number > 0:
        raise ConfigError(f"{name} must be positive, got {value!r}", field=name)
    return number


def _flag(settings: Mapping[str, Any], name: str, default: bool) -> bool:
    value = settings.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise ConfigError(f"{name} must be true or false, got {value!r}", field=name)


def _settle(value: Any) -> float:
    """`settle_seconds`: 0 (no wait) to `MAX_SETTLE_SECONDS`."""
    if value is None:
        return DEFAULT_SETTLE_SECONDS
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not 0 <= number <= MAX_SETTLE_SECONDS:
        raise ConfigError(
            f"settle_seconds must be a number of seconds from 0 to {MAX_SETTLE_SECONDS:g}, "
            f"got {value!r}",
            field="agent_settings.settle_seconds",
        )
    return number
