"""One model turn of an agent, as every model-driven agent takes it.

The call goes through `ModelServices.generate`, so it gets Helios's retries, the
adaptive limiter and a backoff that releases the trial's scheduler slot; the
call's usage is added to the trial's as it happens; the answer is stamped with
its usage and model for the trajectory. Model errors propagate (typed).
"""

from __future__ import annotations

from typing import Any

from helios.agents.base import AgentContext
from helios.errors import AgentError
from helios.models.base import Message, ModelResponse
from helios.models.errors import ModelError
from helios.models.services import ModelServices


def require_services(ctx: AgentContext, agent: str) -> ModelServices:
    """The trial's model services, or an `AgentError` saying a model is needed."""
    services = ctx.services
    if not isinstance(services, ModelServices):
        raise AgentError(f"the {agent} agent needs a model (-m provider/model)")
    return services


async def model_turn(
    ctx: AgentContext,
    services: ModelServices,
    messages: list[Message],
    tools: list[dict[str, Any]],
) -> ModelResponse:
    """Send `messages` with `tools`; the reply's message carries its usage and model."""

    def on_retry(error: ModelError, delay: float, attempt: int) -> None:
        ctx.retrying("model", delay, error.kind)

    response = await services.generate(
        messages, tools, slot=ctx.slot, on_retry=on_retry, usage=ctx.usage
    )
    message = response.message
    message.usage, message.model = response.usage, response.model or None
    return response
