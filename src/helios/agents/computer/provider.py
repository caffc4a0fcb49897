"""One provider's computer-use dialect, as the computer agent sees it.

The model client (`helios.models`) carries the provider's wire: it sends the
conversation (screenshots included, as `Message.images`) and turns the reply's
computer calls into `ToolCall`s whose `arguments` are the provider's own action
object (its `id` the provider's call id; anything that must be echoed back, such
as OpenAI's pending safety checks, in `Message.provider_state`). A provider module
(`anthropic.py`, `openai.py`, `gemini.py`, `generic.py`) maps those to and from
the canonical `Action`, with the coordinate scaling of `coordinates.py`.
"""

from __future__ import annotations

from typing import Any, Protocol

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

    def result(
        self, call: ToolCall, outcome: ActionResult, screenshot: ImageRef | None
    ) -> Message:
        """The message that answers `call` (role "tool"), with the screenshot after it."""
        ...

    def final_answer(self, message: Message) -> str | None:
        """For a provider whose computer tool has no `done` action: the answer in the
        model's last message (its text), or None."""
        ...
