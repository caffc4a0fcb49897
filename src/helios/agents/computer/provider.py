"""One provider's computer-use dialect, as the computer agent sees it.

The model client (`helios.models`) carries the provider's wire: it sends the
conversation (screenshots included, as `Message.images`) and turns the reply's
computer calls into `ToolCall`s whose `arguments` are the provider's own action
object (its `id` the provider's call id; anything that must be echoed back, such
as OpenAI's pending safety checks, in `Message.provider_state`). A provider module
(`anthropic.py`, `openai.py`, `gemini.py`, `generic.py`) maps those to and from
the canonical `Action`, with the coordinate scaling of `coordinates.py`; what
they share is `ProviderBase`, `tool_result` and `bash_action` below.
"""

from __future__ import annotations

from typing import Any, Protocol

from helios.agents.computer.coordinates import Scale
from helios.environments.desktop.actions import Action, ActionResult, Geometry
from helios.models.base import ImageRef, Message, ToolCall


class ComputerProvider(Protocol):
    #: the wire this provider needs from the model layer ("anthropic", "responses",
    #: "gemini", "openai")
    api: str

    def screenshot_size(self, geometry: Geometry) -> tuple[int, int]:
        """The size a full screenshot must have when sent: the desktop's, or smaller
        where the model sees a downscaled screen (Anthropic, for a desktop over its
        image limits: `coordinates.anthropic`). The agent resizes before sending; the
        model's points are mapped back by `actions`. Zoom crops are sent as taken."""
        ...

    def tools(self, geometry: Geometry, *, bash: bool) -> list[dict[str, Any]]:
        """The tool declarations sent with every request (the native computer tool, and
        a bash tool when the task allows it)."""
        ...

    def actions(self, call: ToolCall, geometry: Geometry) -> list[Action]:
        """The canonical actions of one call, in desktop pixels. A call that cannot be
        mapped raises `ValueError` with a message for the model."""
        ...

    def result(self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None) -> Message:
        """The message that answers `call` (role "tool"), with the screenshot after it."""
        ...

    def final_answer(self, message: Message) -> str | None:
        """For a provider whose computer tool has no `done` action: the answer in the
        model's last message (its text), or None."""
        ...


#: a region's corners, as the zoom functions name them
CORNERS = ("x0", "y0", "x1", "y1")
#: the bash function beside a native computer tool (OpenAI's, Gemini's), for a task
#: that allows it
BASH_FUNCTION: dict[str, Any] = {
    "name": "bash",
    "description": "Run a shell command in the machine that shows the desktop; "
    "its output comes back.",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def zoom_function(corners: str, corner: str) -> dict[str, Any]:
    """The zoom function beside a native computer tool that has none (OpenAI's,
    Gemini's): `corners` says in what space they are, `corner` describes each."""
    coordinate = {"type": "integer", "description": corner}
    return {
        "name": "zoom",
        "description": "See a region of the screen at full resolution: the next screenshot "
        f"is that region only. {corners}",
        "parameters": {
            "type": "object",
            "properties": {k: coordinate for k in CORNERS},
            "required": list(CORNERS),
        },
    }


class ProviderBase:
    """What every provider does alike: a full screenshot is sent at the size its
    `scale` gives, and the final answer is the text of the model's last message
    when that has no calls (the native computer tools have no `done`)."""

    def scale(self, geometry: Geometry) -> Scale:
        raise NotImplementedError

    def screenshot_size(self, geometry: Geometry) -> tuple[int, int]:
        return self.scale(geometry).screenshot_size

    def final_answer(self, message: Message) -> str | None:
        if message.tool_calls:
            return None
        return message.content.strip() or None


def tool_result(
    call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None, content: str,
    provider_state: Any = None,
) -> Message:  # fmt: skip
    """The message that answers `call` with `content` (an error when the action
    failed) and the screenshot after it."""
    return Message(
        role="tool",
        content=content,
        tool_call_id=call.id,
        is_error=outcome.error is not None,
        images=[screenshot] if screenshot is not None else [],
        provider_state=provider_state,
    )


def bash_action(arguments: dict[str, Any]) -> Action:
    """A bash call's action (for a task that allows it): its `command`, not blank."""
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError("bash needs a `command`")
    return Action("bash", text=command)
