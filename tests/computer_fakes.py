"""Small fakes for the computer agent's loop: a desktop, a provider and a scripted
model (no sandbox, no network), and a way to run the agent over them."""

from __future__ import annotations

import asyncio
import hashlib
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helios.agents.base import AgentContext, AgentOutcome
from helios.agents.computer import agent as agent_module
from helios.agents.computer.agent import ComputerAgent
from helios.environments.base import ExecResult
from helios.environments.desktop.actions import Action, ActionResult, Geometry, Region
from helios.models.base import GenerationConfig, ImageRef, Message, ModelResponse, ToolCall
from helios.models.errors import ModelError
from helios.models.retry import RetryPolicy
from helios.models.routing import ModelSpec
from helios.models.services import ModelServices
from helios.usage import Usage


def png(seed: int, width: int = 16, height: int = 4) -> bytes:
    """A real (tiny) PNG whose bytes depend on `seed`: distinct seeds, distinct files."""
    row = b"\x00" + bytes((seed * 7 + x * 3 + c) % 256 for x in range(width) for c in range(3))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join([
        b"\x89PNG\r\n\x1a\n", chunk(b"IHDR", header), chunk(b"tEXt", b"seed\x00%d" % seed),
        chunk(b"IDAT", zlib.compress(row * height)), chunk(b"IEND", b""),
    ])  # fmt: skip


@dataclass
class FakeScreen:
    """A desktop: each action changes the screen (a new PNG), a zoom gives a crop."""

    geometry: Geometry = field(default_factory=Geometry)
    executed: list[Action] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    regions: list[Region | None] = field(default_factory=list)
    #: the size each screenshot was asked at (None: the desktop's own)
    sizes: list[tuple[int, int] | None] = field(default_factory=list)
    #: seconds an action takes (for the per-action timeout)
    hang: float = 0.0
    #: screenshots after this many fail (the desktop dies)
    die_after: int | None = None
    fail_answer: bool = False
    screen: int = 0

    async def execute(self, action: Action) -> ActionResult:
        self.executed.append(action)
        if self.hang:
            await asyncio.sleep(self.hang)
        self.screen += 1
        return ActionResult(output=f"did {action.kind}")

    async def screenshot(
        self, region: Region | None = None, *, size: tuple[int, int] | None = None
    ) -> bytes:
        self.regions.append(region)
        self.sizes.append(size)
        if self.die_after is not None and len(self.regions) > self.die_after:
            raise RuntimeError("Xvfb is gone")
        return png(self.screen * 1000 + (1 if region else 0))

    async def write_final_answer(self, text: str) -> None:
        if self.fail_answer:
            raise RuntimeError("cannot write")
        self.answers.append(text)


class FakeProvider:
    """A provider whose calls are `{"action": kind, ...}`; with `has_done` False its
    tool has no done action and a reply's text is the answer."""

    api = "openai"

    def __init__(self, has_done: bool = True, max_width: int | None = None) -> None:
        self.has_done = has_done
        self.bash_offered: list[bool] = []
        #: a model that sees at most this wide (Anthropic's limits, in small)
        self.max_width = max_width

    def screenshot_size(self, geometry: Geometry) -> tuple[int, int]:
        if self.max_width is None or geometry.width <= self.max_width:
            return geometry.width, geometry.height
        return self.max_width, geometry.height * self.max_width // geometry.width

    def tools(self, geometry: Geometry, *, bash: bool) -> list[dict[str, Any]]:
        self.bash_offered.append(bash)
        tools = [
            {
                "type": "computer_fake",
                "name": "computer",
                "display": [geometry.width, geometry.height],
            }
        ]
        if bash:
            tools.append({"type": "function", "function": {"name": "bash", "parameters": {}}})
        return tools

    def actions(self, call: ToolCall, geometry: Geometry) -> list[Action]:
        args = call.arguments
        if args is None:
            raise ValueError(f"the arguments of {call.name} are not JSON")
        kind = args.get("action")
        if call.name == "bash":
            return [Action("bash", text=str(args["command"]))]
        if kind == "click":
            return [Action("click", point=geometry.clamp((args["x"], args["y"])))]
        if kind == "type":
            return [Action("type", text=args["text"])]
        if kind == "zoom":
            return [Action("zoom", region=tuple(args["region"]))]  # type: ignore[arg-type]
        if kind == "screenshot":
            return [Action("screenshot")]
        if kind == "done" and self.has_done:
            return [Action("done", text=str(args.get("answer", "")))]
        raise ValueError(f"unknown action {kind!r}")

    def result(self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None) -> Message:
        text = outcome.error or outcome.output or "ok"
        return Message("tool", text, tool_call_id=call.id, is_error=outcome.error is not None,
                       images=[screenshot] if screenshot else [])  # fmt: skip

    def final_answer(self, message: Message) -> str | None:
        return None if self.has_done else message.content


def call(action: str | None = None, name: str = "computer", **args: Any) -> dict[str, Any]:
    arguments = None if action is None and not args else {"action": action, **args}
    return {"name": name, "arguments": arguments}


class ScriptedModel:
    """Replies in order (then repeats the last); records the messages it was sent."""

    name = "fake"
    provider = "openai-compatible"

    def __init__(self, replies: list[dict[str, Any]], *, block: bool = False,
                 error: ModelError | None = None) -> None:  # fmt: skip
        self.replies = replies
        self.block = block
        self.error = error
        self.sent: list[list[Message]] = []
        self.configs: list[GenerationConfig] = []
        #: set on the first call
        self.called = asyncio.Event()

    async def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], config: GenerationConfig
    ) -> ModelResponse:
        self.sent.append(list(messages))
        self.configs.append(config)
        self.called.set()
        if self.block:
            await asyncio.Event().wait()
        n = len(self.sent)
        if self.error is not None and n > 1:
            raise self.error
        reply = self.replies[min(n, len(self.replies)) - 1]
        calls = [
            ToolCall(f"call_{n}_{i}", c["name"], c["arguments"], raw_arguments="{oops")
            for i, c in enumerate(reply.get("calls", []))
        ]
        message = Message("assistant", reply.get("text", ""), tool_calls=calls)
        usage = Usage(input_tokens=100, output_tokens=10, calls=1)
        return ModelResponse(message, usage, model="fake")

    async def close(self) -> None:
        return None


@dataclass
class FakeEnv:
    """What the agent uses of an environment: exec (bash)."""

    commands: list[tuple[str, dict[str, str] | None]] = field(default_factory=list)

    async def exec(self, command: str, *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   user: Any = None) -> ExecResult:  # fmt: skip
        self.commands.append((command, env))
        return ExecResult(stdout=f"ran {command}\n", stderr="", exit_code=0)


@dataclass
class Rig:
    screen: FakeScreen
    provider: FakeProvider
    model: ScriptedModel
    env: FakeEnv
    ctx: AgentContext


def rig(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    replies: list[dict[str, Any]],
    *,
    has_done: bool = True,
    timeout: float = 60.0,
    screen: FakeScreen | None = None,
    max_width: int | None = None,
    **model_kw: Any,
) -> Rig:
    screen = screen or FakeScreen()
    provider = FakeProvider(has_done, max_width)
    model = ScriptedModel(replies, **model_kw)
    services = ModelServices(
        spec=ModelSpec("openai-compatible", "fake", "openai", "http://127.0.0.1:9/v1"),
        policy=RetryPolicy(max_attempts=1),
    )
    services._model = model

    async def open_screen(env: Any, geometry: Any, start_url: Any) -> FakeScreen:
        return screen

    monkeypatch.setattr(agent_module, "open_screen", open_screen)
    monkeypatch.setattr(agent_module, "load_provider", lambda spec, forced=None: provider)
    ctx = AgentContext(logs_dir=tmp_path / "agent", timeout=timeout, services=services)
    return Rig(screen, provider, model, FakeEnv(), ctx)


def run_agent(r: Rig, instruction: str = "Click the button.", **settings: Any) -> AgentOutcome:
    # one screenshot a step, as these tests count them (settling: test_desktop_settle)
    settings.setdefault("settle_seconds", 0)
    agent = ComputerAgent(**settings)

    async def go() -> AgentOutcome:
        async with asyncio.timeout(30):
            return await agent.run(instruction, r.env, r.ctx)  # type: ignore[arg-type]

    return asyncio.run(go())


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
