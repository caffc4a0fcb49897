"""The computer agent (`--agent computer`): a screenshot → action loop over the
trial's desktop, on each provider's native computer-use wire.

A run: attach to the desktop Helios started in the sandbox (or start one), send
the instruction with the first screenshot, then per turn: the model's calls →
the provider's canonical `Action`s → `Desktop.execute` each → a new screenshot
(after a zoom: the crop) → the provider's result message. It ends with a `done`
action (its answer), or, for a provider whose tool has no done action, with a
reply without a call (the provider's `final_answer` of it). Whatever the ending
(max turns, its own deadline, a model error), the answer, else the last
message's text, goes to `/logs/agent/final_answer.txt`, and the last screen to
`agent/images/final.png`.

Only the last K screenshots go back to the model (the clients' image window,
`GenerationConfig.keep_images`; the `keep_screenshots` setting changes K for this
agent); the trial keeps them all. Per turn the agent's own work is O(new messages).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from helios.agents.base import Agent, AgentContext, AgentOutcome
from helios.agents.computer.choice import load_provider
from helios.agents.computer.provider import ComputerProvider
from helios.agents.computer.screen import Screen, Size, capture, open_screen
from helios.agents.computer.settings import ComputerSettings
from helios.agents.model_turn import model_turn, require_services
from helios.agents.tools import format_exec_result
from helios.agents.toolsets.base import DEFAULT_MAX_OUTPUT_CHARS
from helios.atomic_write import write_bytes_atomic
from helios.environments.base import Environment
from helios.environments.desktop.actions import Action, ActionResult, Geometry, Region
from helios.environments.desktop.desktop import DISPLAY
from helios.errors import AgentError, AgentTimeout, EnvironmentError_
from helios.failures import ErrorInfo
from helios.models.base import ImageRef, Message, ToolCall
from helios.models.errors import ContextWindowError
from helios.models.routing import APIS, Api
from helios.models.services import ModelServices
from helios.models.tools import ToolSpec
from helios.trajectories.images import FINAL_SCREEN, IMAGES_DIR

#: replies in a row without a usable action (all calls malformed, or nothing) before giving up
MAX_CONSECUTIVE_INVALID = 3
#: at most this share of the agent's timeout (and 10 s) is kept for the final answer and screen
FINISH_SHARE, FINISH_MAX = 0.1, 10.0
NO_ACTION_NUDGE = (
    "Your reply had no computer action and no final answer. Continue with the computer "
    "tool; when the task is complete, use its done action, or if it has none, reply with "
    "your final answer and no tool call."
)
#: what a provider's mapping may raise on a malformed call (ValueError is the contract)
_MAPPING_ERRORS = (ValueError, KeyError, TypeError, IndexError)


class DesktopLost(EnvironmentError_):
    """The desktop stopped answering (a screenshot failed): before the first turn an
    infrastructure error; mid-run the end of the run (partial)."""

    kind = "DesktopLost"


@dataclass
class _Run:
    ctx: AgentContext
    env: Environment
    services: ModelServices
    provider: ComputerProvider
    screen: Screen
    geometry: Geometry
    #: the size the model sees the whole screen at; None: the desktop's own
    shot_size: Size | None
    tools: list[dict[str, Any]]
    turns: int = 0
    invalid_in_a_row: int = 0
    #: the answer of a done action or a final reply; None until the run ends so
    answer: str | None = None
    #: the last screenshot, and whether it still shows the whole current screen
    last: ImageRef | None = None
    fresh: bool = False
    #: the last whole-screen frame's bytes: after an action, the screen is not settled
    #: while it still shows this frame (`capture`'s `before`)
    last_frame: bytes | None = None

    def add(self, message: Message) -> None:
        self.ctx.conversation.append(message)


class ComputerAgent(Agent):
    name: ClassVar[str] = "computer"
    version: ClassVar[str] = "1.0"
    uses_model: ClassVar[bool] = True

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.options = ComputerSettings.read(settings)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, **self.options.identity()}

    async def run(self, instruction: str, env: Environment, ctx: AgentContext) -> AgentOutcome:
        batch_services = require_services(ctx, self.name)
        provider = load_provider(batch_services.spec, self.options.provider)
        # the provider's wire of the same model (Responses, native Gemini): one client
        # per batch, sharing the batch's limiter and totals
        services = _keeping(batch_services.with_api(_wire(provider)), self.options.keep_screenshots)
        reserve = _finish_reserve(ctx.timeout)
        loop = asyncio.get_running_loop()
        deadline = None if math.isinf(ctx.timeout) else loop.time() + ctx.timeout - reserve
        outcome = AgentOutcome(conversation=ctx.conversation, setup_messages=1)
        run: _Run | None = None
        failure: Exception | None = None
        try:
            async with asyncio.timeout_at(deadline) as budget:
                screen = await open_screen(env, self.options.geometry, self.options.start_url)
                run = self._start(instruction, env, ctx, services, provider, screen)
                outcome.tools = list(ctx.tool_specs)
                outcome.error = await self._loop(run, instruction)
        except TimeoutError:
            if not budget.expired():
                raise
            outcome.error = ErrorInfo.from_exception(AgentTimeout("agent", ctx.timeout), "agent")
        except ContextWindowError as exc:
            outcome.error = ErrorInfo(type="ContextWindowExceeded", message=str(exc), phase="agent")
        except Exception as exc:  # a model error: the trial errs, but the answer is written
            failure = exc
        outcome.n_turns = run.turns if run is not None else 0
        if run is not None:
            await self._finish(run, outcome, reserve)
        if failure is not None:
            raise failure
        return outcome

    # -- the loop --------------------------------------------------------------------

    def _start(
        self,
        instruction: str,
        env: Environment,
        ctx: AgentContext,
        services: ModelServices,
        provider: ComputerProvider,
        screen: Screen,
    ) -> _Run:
        geometry = screen.geometry  # a running desktop's own size wins
        tools = provider.tools(geometry, bash=self.options.bash_allowed)
        ctx.tool_specs[:] = tool_specs(tools)
        size = tuple(provider.screenshot_size(geometry))
        shot_size = None if size == (geometry.width, geometry.height) else (size[0], size[1])
        return _Run(ctx, env, services, provider, screen, geometry, shot_size, tools)

    async def _loop(self, run: _Run, instruction: str) -> ErrorInfo | None:
        """Model turns until an answer; returns why the run ended early, if it did."""
        geometry = run.geometry
        system = self.options.system_prompt.replace("{width}", str(geometry.width))
        run.add(Message("system", system.replace("{height}", str(geometry.height))))
        first = await self._screenshot(run, None)
        run.add(Message("user", instruction, images=[first]))
        while run.turns < self.options.max_turns:
            run.turns += 1
            run.ctx.turn(run.turns)
            response = await model_turn(run.ctx, run.services, run.ctx.conversation, run.tools)
            message = response.message
            run.add(message)
            if message.tool_calls:
                try:
                    valid = await self._run_calls(run, message.tool_calls)
                except DesktopLost as exc:
                    return ErrorInfo(type="DesktopLost", message=str(exc), phase="agent")
            else:
                answer = run.provider.final_answer(message)
                if answer is not None and answer.strip():
                    run.answer = answer
                valid = False
            if run.answer is not None:
                return None
            if not message.tool_calls:
                run.add(Message("user", NO_ACTION_NUDGE))
            run.invalid_in_a_row = 0 if valid else run.invalid_in_a_row + 1
            if run.invalid_in_a_row >= MAX_CONSECUTIVE_INVALID:
                return ErrorInfo(
                    type="InvalidReplies",
                    message=f"{run.invalid_in_a_row} replies in a row without a usable action",
                    phase="agent",
                )
        return ErrorInfo(
            type="MaxTurns", message=f"stopped after {self.options.max_turns} turns", phase="agent"
        )

    async def _run_calls(self, run: _Run, calls: Sequence[ToolCall]) -> bool:
        """Run the turn's calls in order, each answered with a screenshot; True if one
        of them was well formed. A done action ends the turn."""
        valid = False
        for call in calls:
            try:
                actions = run.provider.actions(call, run.geometry)
            except _MAPPING_ERRORS as exc:
                result = ActionResult(error=str(exc) or type(exc).__name__)
                run.add(run.provider.result(call, result, await self._current(run)))
                continue
            valid = True
            result, region = await self._perform(run, actions)
            screenshot = await self._screenshot(run, region)
            run.add(run.provider.result(call, result, screenshot))
            if run.answer is not None:
                break
        return valid

    async def _perform(
        self, run: _Run, actions: Sequence[Action]
    ) -> tuple[ActionResult, Region | None]:
        """Execute one call's actions until one fails; the combined result, and the
        region of a zoom among them (the next screenshot's crop)."""
        outputs: list[str] = []
        combined = ActionResult()
        region: Region | None = None
        for action in actions:
            if action.kind == "done":
                run.answer = action.text
                break
            if action.kind == "zoom":
                region = action.region
                continue
            if action.kind == "screenshot":
                continue
            if action.kind == "bash":
                step = await self._bash(run, action)
            else:
                step = await self._execute(run, action)
                run.fresh = False
            if step.output:
                outputs.append(step.output)
            combined.meta.update(step.meta)
            if step.error is not None:
                combined.error = step.error
                break
        combined.output = "\n".join(outputs)
        return combined, region

    async def _execute(self, run: _Run, action: Action) -> ActionResult:
        timeout = self.options.action_timeout
        try:
            async with asyncio.timeout(timeout):
                return await run.screen.execute(action)
        except TimeoutError:
            return ActionResult(error=f"the {action.kind} action did not finish in {timeout:g} s")
        except Exception as exc:  # the model hears of it; a dead desktop ends the run next
            return ActionResult(error=f"the {action.kind} action failed: {exc}")

    async def _bash(self, run: _Run, action: Action) -> ActionResult:
        if not self.options.bash_allowed:
            return ActionResult(
                error="bash is not allowed in this task: use the computer tool's actions"
            )
        run.fresh = False
        timeout = self.options.action_timeout
        env = {**run.ctx.exec_env, "DISPLAY": DISPLAY}
        result = await run.env.exec(action.text, cwd=run.ctx.workdir, env=env, timeout=timeout)
        text = format_exec_result(result, timeout, DEFAULT_MAX_OUTPUT_CHARS)
        return ActionResult(output=text, error=None if result.ok else text)

    async def _current(self, run: _Run) -> ImageRef:
        """The screen as it is: the last screenshot when nothing has changed since."""
        if run.last is not None and run.fresh:
            return run.last
        return await self._screenshot(run, None)

    async def _screenshot(self, run: _Run, region: Region | None) -> ImageRef:
        try:
            async with asyncio.timeout(self.options.action_timeout):
                before = run.last_frame if region is None else None
                data = await capture(
                    run.screen, region, run.shot_size, self.options.settle_seconds, before
                )
        except Exception as exc:
            raise DesktopLost(f"screenshot failed: {exc or type(exc).__name__}") from exc
        image = ImageRef.of(data)
        if region is None:
            run.last, run.fresh, run.last_frame = image, True, data
        return image

    # -- the end ---------------------------------------------------------------------

    async def _finish(self, run: _Run, outcome: AgentOutcome, reserve: float) -> None:
        """The final answer through the desktop, and the final screen on the host,
        within the time kept for them. A failure here is recorded, never raised."""
        answer = run.answer if run.answer is not None else last_text(run)
        deadline = asyncio.get_running_loop().time() + reserve
        try:
            async with asyncio.timeout_at(deadline):
                await run.screen.write_final_answer(answer)
        except Exception as exc:
            outcome.error = outcome.error or ErrorInfo(
                type="FinalAnswerNotWritten", message=f"{exc or type(exc).__name__}", phase="agent"
            )
        logs = run.ctx.logs_dir
        if logs is None:
            return
        try:
            async with asyncio.timeout_at(deadline):
                # the screen as it is, at its own size (not the model's downscaled one)
                image = (
                    await self._current(run)
                    if run.shot_size is None
                    else ImageRef.of(await run.screen.screenshot())
                )
            target = logs / IMAGES_DIR / FINAL_SCREEN
            await asyncio.to_thread(write_bytes_atomic, target, image.data)
        except Exception:
            pass  # no final screen: the trajectory still has the last screenshot


def last_text(run: _Run) -> str:
    """The answer when the run ended without one: the last model message's text."""
    for message in reversed(run.ctx.conversation):
        if message.role == "assistant":
            answer = run.provider.final_answer(message)
            return answer if answer is not None else message.content
    return ""


def tool_specs(tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """The native tool declarations as `ToolSpec`s, for the trajectory's list."""
    specs = []
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, dict) and "name" in function:
            specs.append(
                ToolSpec(
                    str(function["name"]),
                    str(function.get("description") or ""),
                    dict(function.get("parameters") or {"type": "object"}),
                )
            )
            continue
        name = tool.get("name") or tool.get("type") or next(iter(tool), "tool")
        schema = tool.get("input_schema") or tool.get("parameters")
        native = {k: v for k, v in tool.items() if k not in ("input_schema", "parameters")}
        parameters = dict(schema) if isinstance(schema, dict) else {"type": "object"}
        specs.append(ToolSpec(str(name), f"native computer-use tool: {native}", parameters))
    return specs


def _keeping(services: ModelServices, keep: int | None) -> ModelServices:
    """`services` sending the last `keep` screenshots (None: as configured). The copy
    shares the client, limiter and totals: only the generation settings differ."""
    if keep is None or services.config.keep_images == keep:
        return services
    services.model  # noqa: B018  (made now, so the copy shares this one client)
    return replace(services, config=replace(services.config, keep_images=keep))


def _wire(provider: ComputerProvider) -> Api:
    api = provider.api
    if api not in APIS:
        raise AgentError(f"computer provider {type(provider).__name__} names unknown wire {api!r}")
    return api


def _finish_reserve(timeout: float) -> float:
    if math.isinf(timeout):
        return FINISH_MAX
    return max(0.5, min(FINISH_MAX, timeout * FINISH_SHARE))
