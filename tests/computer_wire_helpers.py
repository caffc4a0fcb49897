"""Helpers of the computer-use wire tests: synthetic screens, one scripted GUI episode,
and the wires under test (each provider's client against the loopback model server)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helios.agents.computer import anthropic, gemini, generic, openai
from helios.agents.computer.provider import ComputerProvider
from helios.environments.desktop.actions import Action, ActionResult, Geometry
from helios.models.base import GenerationConfig, ImageRef, Message
from helios.models.images import OMITTED, PLACEHOLDER_PNG, data_url
from helios.models.retry import RetryPolicy
from helios.models.routing import ModelSpec, resolve_model
from helios.models.services import ModelServices
from helios.testing.mock_llm import MockLLMServer
from helios.testing.screens import make_png

GEOMETRY = Geometry(1024, 768)
RED, BLUE, GREEN, YELLOW, BLACK = "#e53935", "#1e88e5", "#43a047", "#fdd835", "#000000"
#: where things are on the desktop at turn 0 (each turn moves them right by SHIFT px)
RECTS = {
    RED: (100, 100, 200, 150),
    BLUE: (400, 300, 480, 340),
    GREEN: (600, 500, 640, 540),
    YELLOW: (700, 100, 760, 160),
    BLACK: (50, 600, 90, 620),
}
SHIFT = 6
FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)

#: one canonical script, played on every wire
GUI_SCRIPT: dict[str, Any] = {
    "scenarios": [
        {
            "match": "calibrate",
            "turns": [
                {"action": "click", "target": RED, "safety": "This looks like a cookie banner."},
                {"action": "type", "target": GREEN, "text": "hello", "say": "Typing."},
                {"action": "key", "keys": ["ctrl", "l"]},
                {"action": "scroll", "target": BLUE, "dy": 3},
                {"action": "drag", "target": GREEN, "to": YELLOW},
                {"action": "zoom", "target": BLACK},
                {"action": "click", "target": RED},
                {"action": "done", "answer": "42"},
            ],
        },
        {"match": "*", "turns": [{"text": "hello"}]},
    ]
}


def rects(turn: int) -> dict[str, tuple[int, int, int, int]]:
    shift = SHIFT * turn
    return {c: (x0 + shift, y0, x1 + shift, y1) for c, (x0, y0, x1, y1) in RECTS.items()}


def screen(turn: int, size: tuple[int, int] = (GEOMETRY.width, GEOMETRY.height)) -> bytes:
    """The desktop at `turn`, as a screenshot of `size` (a downscaled one for Claude)."""
    fx, fy = size[0] / GEOMETRY.width, size[1] / GEOMETRY.height
    boxes = [((int(x0 * fx), int(y0 * fy), int(x1 * fx), int(y1 * fy)), color)
             for color, (x0, y0, x1, y1) in rects(turn).items()]  # fmt: skip
    return make_png(size[0], size[1], "#ffffff", boxes)


def centre(color: str, turn: int) -> tuple[int, int]:
    x0, y0, x1, y1 = rects(turn)[color]
    return (x0 + x1 - 1) // 2, (y0 + y1 - 1) // 2


@dataclass(frozen=True)
class Wire:
    name: str
    model: str
    make: Callable[[str], ComputerProvider]
    base_url: Callable[[MockLLMServer], str]
    #: how far a mapped point may be from the target's centre (Gemini's grid rounds)
    tolerance: int = 0

    def spec(self, server: MockLLMServer, key: str = "k") -> ModelSpec:
        provider = self.make(self.model.split("/", 1)[1])
        spec = resolve_model(self.model, base_url=self.base_url(server), api_key=key)
        return spec.with_api(provider.api)  # type: ignore[arg-type]


WIRES = [
    Wire("anthropic", "anthropic/claude-opus-4-5", anthropic.AnthropicProvider,
         lambda s: s.anthropic_base_url),
    Wire("responses", "openai/gpt-5.4", openai.OpenAIProvider, lambda s: s.openai_base_url),
    Wire("responses-preview", "openai/computer-use-preview", openai.OpenAIProvider,
         lambda s: s.openai_base_url),
    Wire("gemini", "gemini/gemini-2.5-computer-use-preview-10-2025", gemini.GeminiProvider,
         lambda s: s.gemini_base_url, tolerance=2),
    Wire("generic", "openai-compatible/qwen2.5-vl", generic.GenericProvider,
         lambda s: s.openai_base_url),
]  # fmt: skip
BY_NAME = {w.name: w for w in WIRES}


@dataclass
class Episode:
    turns: list[list[Action]]
    answer: str | None
    messages: list[Message]


def services_for(
    wire: Wire, server: MockLLMServer, keep: int | None = 2, key: str = "k"
) -> ModelServices:
    config = GenerationConfig(keep_images=keep, timeout=10, max_tokens=512)
    return ModelServices(spec=wire.spec(server, key), config=config, policy=FAST)


async def play(
    wire: Wire, server: MockLLMServer, *, geometry: Geometry = GEOMETRY, keep: int | None = 2,
    prompt: str = "calibrate the screen", max_turns: int = 12,
    result: Callable[[ComputerProvider, Any, ImageRef], Message] | None = None,
) -> Episode:  # fmt: skip
    """The agent's loop, reduced to the wire: screenshot → model → actions → screenshot.
    A zoom is answered with a crop (a small black image) that must not be aimed at."""
    provider = wire.make(wire.model.split("/", 1)[1])
    size = provider.screenshot_size(geometry)
    services = services_for(wire, server, keep)
    first = Message("user", prompt, images=[ImageRef.of(screen(0, size))])
    messages = [Message("system", "You drive a desktop."), first]
    tools = provider.tools(geometry, bash=False)
    turns: list[list[Action]] = []
    try:
        for turn in range(max_turns):
            response = await services.generate(messages, tools)
            messages.append(response.message)
            answer = provider.final_answer(response.message)
            if answer is not None:
                return Episode(turns, answer, messages)
            actions: list[Action] = []
            for call in response.tool_calls:
                mapped = provider.actions(call, geometry)
                actions += mapped
                if mapped[0].kind == "done":
                    turns.append(actions)
                    return Episode(turns, mapped[0].text, messages)
                crop = mapped[0].kind == "zoom"
                shot = ImageRef.of(make_png(40, 20, BLACK) if crop else screen(turn + 1, size))
                if result is not None:
                    messages.append(result(provider, call, shot))
                else:
                    messages.append(provider.result(call, ActionResult(), shot))
            turns.append(actions)
        return Episode(turns, None, messages)
    finally:
        await services.close()


def images_sent(body: Any) -> tuple[int, int]:
    """(real images, placeholders) in a request body of any wire."""
    placeholder = data_url(PLACEHOLDER_PNG)
    images = placeholders = 0

    def walk(node: Any) -> None:
        nonlocal images, placeholders
        if isinstance(node, dict):
            if node.get("type") == "image" or "inlineData" in node:
                images += 1
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            if node in (placeholder, OMITTED):
                placeholders += 1
            elif node.startswith("data:image/"):
                images += 1

    walk(body)
    return images, placeholders
